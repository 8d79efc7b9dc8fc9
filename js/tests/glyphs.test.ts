// @vitest-environment jsdom
// The fonts for a long chat's characters (glyphs.ts), and the frames lazy.ts
// gives them: which characters are collected, each laid out once, in batches
// that stop at the frame's budget, only in frames with nothing else to do, and
// not while the list is out of sight. jsdom has no layout: a fake box makes
// each forced layout cost clock time per character.
import { describe, expect, it } from "vitest";
import { GlyphWarmer, glyphsOf, pageGlyphs, STYLES, scriptOf } from "../src/glyphs";
import { DEFERRED_CLASS, type LazyHost, LazyRenderer } from "../src/lazy";
import { FakeFrames } from "./fakes";

/** A box whose forced layout costs `msPerGlyph` of the clock per character it holds. */
function timedBox(clock: { t: number }, msPerGlyph: number) {
  const box = document.createElement("div");
  const laidOut: string[] = [];
  const batches: HTMLElement[] = [];
  box.getBoundingClientRect = () => {
    const chars = [...(box.textContent ?? "")];
    laidOut.push(...chars);
    batches.push(box.cloneNode(true) as HTMLElement);
    clock.t += chars.length * msPerGlyph;
    return new DOMRect();
  };
  return { box, laidOut, batches };
}

describe("glyphsOf", () => {
  it("keeps what may need a fallback font: CJK, emoji, symbols; not Latin or spaces", () => {
    expect(glyphsOf("plain ASCII, Latin-1 café, naïve Ærø\n\t ")).toEqual([]);
    expect(glyphsOf("梯度下降 ok")).toEqual(["梯", "度", "下", "降"]);
    // an emoji is one character (a surrogate pair), not two halves
    expect(glyphsOf("a 😀 b ∑ x")).toEqual(["😀", "∑"]);
    expect(glyphsOf("日本語、かな")).toHaveLength(6);
  });
});

describe("GlyphWarmer", () => {
  it("queues each character once, whichever texts repeat it, and a script's sample once per style", () => {
    const w = new GlyphWarmer();
    w.add("梯度下降 梯度");
    expect(w.pending).toBe(4 + STYLES.length);
    w.add("下降 😀 😀 and text");
    expect(w.pending).toBe(5 + 2 * STYLES.length);
    w.add("梯度下降😀 更多"); // two more Han characters: no new script
    expect(w.pending).toBe(7 + 2 * STYLES.length);
  });

  it("keys characters by script", () => {
    expect(scriptOf("梯")).toBe("han");
    expect(scriptOf("度")).toBe("han");
    expect(scriptOf("か")).toBe(scriptOf("カ"));
    expect(scriptOf("한")).toBe("hangul");
    expect(scriptOf("😀")).toBe("emoji");
    expect(scriptOf("✅")).toBe("emoji");
    expect(scriptOf("α")).not.toBe(scriptOf("∑"));
  });

  it("lays a formula's letters out as MathML, once, with its sizes, when a text may hold one", () => {
    const w = new GlyphWarmer();
    w.add("no formula here");
    expect(w.pending).toBe(0);
    w.add("Energy: $E = mc^2$");
    const n = w.pending;
    expect(n).toBeGreaterThan(52); // a–z, A–Z, Greek, and the sizes
    w.add("$$x$$ and \\(y\\)");
    expect(w.pending).toBe(n);
    const clock = { t: 0 };
    const { box, batches } = timedBox(clock, 0.01);
    while (w.pending > 0) {
      w.step(box, () => clock.t, 8);
    }
    const mi = batches.flatMap((b) => [...b.querySelectorAll("mi")].map((e) => e.textContent));
    expect(mi).toEqual(expect.arrayContaining(["a", "z", "A", "Z", "α", "ω"]));
    for (const b of batches) {
      for (const m of b.querySelectorAll("math")) {
        expect(m.namespaceURI).toBe("http://www.w3.org/1998/Math/MathML");
      }
    }
    // the sizes: a display formula and an inline one, with scripts
    expect(batches.some((b) => b.querySelector('math[display="block"] msubsup') !== null)).toBe(
      true,
    );
  });

  it("lays every character out once, in batches that stop at the budget, the box left empty", () => {
    const w = new GlyphWarmer();
    const chars = Array.from({ length: 300 }, (_, i) => String.fromCodePoint(0x4e00 + i));
    w.add(chars.join(""));
    expect(w.pending).toBe(300 + STYLES.length);
    const clock = { t: 0 };
    const { box, laidOut, batches } = timedBox(clock, 0.5);
    const now = () => clock.t;
    const first = w.step(box, now, 8);
    // the first batch is timed (8 characters, 4 ms), the next sized from it to fill the budget
    expect(first.batches).toBe(2);
    expect(first.glyphs).toBe(16);
    expect(clock.t).toBe(8);
    expect(box.textContent).toBe("");
    let frames = 1;
    while (w.pending > 0) {
      const start = clock.t;
      const s = w.step(box, now, 8);
      frames++;
      // each frame within its budget: batches are sized from the cost measured
      expect(clock.t - start).toBeLessThanOrEqual(8);
      expect(s.glyphs).toBeGreaterThan(0);
    }
    // every character once, in order, each a run of its own; then the script's sample in
    // each style of the messages' Markdown
    expect(laidOut).toEqual([...chars, ...STYLES.map(() => chars[0])]);
    expect(w.warmed).toBe(300 + STYLES.length);
    expect(frames).toBe(Math.ceil((300 + STYLES.length) / 16));
    const firstBatch = batches[0] as HTMLElement;
    expect(firstBatch.firstElementChild?.className).toBe("nbs-md");
    expect(
      [...(firstBatch.firstElementChild as HTMLElement).children].map((e) => e.textContent),
    ).toEqual(chars.slice(0, 8));
    const styled = batches.flatMap((b) => [...b.querySelectorAll(STYLES.join(","))]);
    expect(styled.map((e) => e.tagName.toLowerCase())).toEqual([...STYLES]);
  });

  it("lays a script's samples out one a batch, so that a costly one stops the frame", () => {
    const w = new GlyphWarmer();
    w.add("梯度");
    const clock = { t: 0 };
    const box = document.createElement("div");
    const sizes: number[] = [];
    box.getBoundingClientRect = () => {
      const md = box.firstElementChild as HTMLElement;
      sizes.push(md.children.length);
      // a new strike: 5 ms a sample in a style, a character 0.1 ms
      clock.t += md.querySelector(STYLES.join(",")) === null ? 0.1 * md.children.length : 5;
      return new DOMRect();
    };
    const s = w.step(box, () => clock.t, 8);
    // the two characters in one batch, then samples until the budget is spent
    expect(sizes).toEqual([2, 1, 1]);
    expect(s.batches).toBe(3);
    expect(w.pending).toBe(STYLES.length - 2);
  });

  it("lays out one batch at least, however short the budget", () => {
    const w = new GlyphWarmer();
    w.add("一二三四五六七八九十");
    const clock = { t: 0 };
    const { box } = timedBox(clock, 1);
    expect(w.step(box, () => clock.t, 0).batches).toBe(1);
    expect(w.pending).toBe(10 + STYLES.length - 8);
  });

  it("is one per page", () => {
    expect(pageGlyphs(document)).toBe(pageGlyphs(document));
    const other = document.implementation.createHTMLDocument("other");
    expect(pageGlyphs(other)).not.toBe(pageGlyphs(document));
  });
});

/** A list of deferred messages with `texts`, a lazy renderer with a glyph warmer. */
function warmedList(texts: string[], visible = true, loadedFirst = true) {
  let asks = 0;
  let loaded = loadedFirst;
  const parent = document.createElement("div");
  const root = document.createElement("div");
  parent.append(root);
  document.body.append(parent);
  root.getBoundingClientRect = () =>
    ({ top: 0, bottom: 400, height: 400, width: 600, left: 0, right: 600 }) as DOMRect;
  // jsdom has no checkVisibility: the list is in sight, or skipped (a cell out of sight)
  (root as unknown as { checkVisibility: () => boolean }).checkVisibility = () => visible;
  const clock = { t: 0 };
  const frames = new FakeFrames();
  const rendered: string[] = [];
  const host: LazyHost = {
    render: (el) => {
      rendered.push(el.dataset.id as string);
      return 10;
    },
    chars: () => 10,
    elements: () => root.children,
    following: () => true,
    shift: () => {},
    settled: () => {},
    warm: () => {},
    attach: () => false,
  };
  const glyphs = new GlyphWarmer();
  const lazy = new LazyRenderer({
    root,
    scheduler: frames,
    now: () => clock.t,
    timer: { set: () => 0, clear: () => {} },
    host,
    signal: new AbortController().signal,
    untilFound: true,
    glyphs: () => {
      asks++;
      return loaded ? glyphs : null;
    },
  });
  const els: HTMLElement[] = [];
  texts.forEach((text, i) => {
    const el = document.createElement("div");
    el.dataset.id = `m${i + 1}`;
    const t = document.createElement("div");
    el.append(t);
    root.append(el);
    // far above the view: never near, so frames have nothing else to do
    el.getBoundingClientRect = () =>
      ({ top: -10_000 + i, bottom: -9_990 + i, height: 10, width: 600 }) as DOMRect;
    lazy.defer(el, t, text);
    els.push(el);
  });
  return {
    root,
    parent,
    lazy,
    frames,
    glyphs,
    rendered,
    els,
    asks: () => asks,
    load: () => {
      loaded = true;
    },
  };
}

describe("LazyRenderer with a glyph warmer", () => {
  it("lays out the characters of deferred messages in frames with nothing else to do, then stops", () => {
    const { parent, lazy, frames, glyphs, rendered } = warmedList([
      "## 梯度下降\n\n用中文解释一下什么是梯度下降 😀",
      "plain English only",
      "重复：梯度下降 ∑",
    ]);
    const chars = new Set([..."梯度下降用中文解释一下什么是😀重复：∑"]);
    const scripts = new Set([...chars].map(scriptOf)); // Han, emoji, fullwidth forms, math
    expect(scripts.size).toBe(4);
    lazy.flush(); // the list settled
    let n = 0;
    while (frames.pending > 0 && n < 50) {
      frames.frame();
      n++;
      // the hidden box only while characters wait: in the page's body, not beside the
      // list (JupyterLab's search over outputs would search again at every change)
      expect(document.querySelectorAll(".nbs-warm").length).toBe(glyphs.pending > 0 ? 1 : 0);
      expect(parent.querySelector(".nbs-warm")).toBeNull();
    }
    expect(glyphs.pending).toBe(0);
    expect(glyphs.warmed).toBe(chars.size + scripts.size * STYLES.length);
    expect(lazy.counters.glyphFrames).toBe(n);
    expect(n).toBeGreaterThan(0);
    expect(rendered).toEqual([]); // nothing near: nothing rendered for it
    expect(frames.pending).toBe(0); // no frame asked for once done
    expect(lazy.size).toBe(3);
    expect(parent.querySelector(`.${DEFERRED_CLASS}`)).not.toBeNull();
  });

  it("leaves the characters waiting while the list is out of sight, until it is looked at", () => {
    const { lazy, frames, glyphs, root } = warmedList(["梯度下降"], false);
    lazy.flush();
    frames.frame(); // looks near (nothing), then would warm: the list is skipped
    expect(glyphs.warmed).toBe(0);
    expect(frames.pending).toBe(0); // parked: no frame spins for it
    (root as unknown as { checkVisibility: () => boolean }).checkVisibility = () => true;
    lazy.look();
    while (frames.pending > 0) {
      frames.frame();
    }
    expect(glyphs.pending).toBe(0);
  });

  it("waits while JupyterLab's search marks the list, and warms once it closed", () => {
    const { lazy, frames, glyphs, els } = warmedList(["梯度下降", "第二"]);
    const mark = document.createElement("mark");
    mark.textContent = "x";
    (els[1] as HTMLElement).append(mark); // a search match in a rendered part of the list
    lazy.flush();
    while (frames.pending > 0) {
      frames.frame();
    }
    expect(glyphs.warmed).toBe(0);
    mark.remove(); // the search closed
    lazy.look();
    while (frames.pending > 0) {
      frames.frame();
    }
    expect(glyphs.warmed).toBe(6 + STYLES.length);
  });

  it("asks for the warmer (a chunk) once placeholders stay, and warms once it arrived", () => {
    const { lazy, frames, glyphs, asks, load } = warmedList(["梯度下降", "plain"], true, false);
    expect(asks()).toBe(0); // deferring asks for nothing
    lazy.flush();
    frames.frame();
    expect(asks()).toBe(1); // not loaded: the list waits, no frame spins for it
    expect(frames.pending).toBe(0);
    expect(glyphs.pending).toBe(0);
    load();
    lazy.look(); // the host, when the chunk arrives
    while (frames.pending > 0) {
      frames.frame();
    }
    expect(asks()).toBe(2);
    expect(glyphs.warmed).toBe(4 + STYLES.length);
  });

  it("asks for no warmer where nothing stays deferred, and keeps no text for it", () => {
    const { lazy, frames, asks, els } = warmedList(["梯度下降"]);
    lazy.renderNow(els[0] as HTMLElement);
    lazy.flush();
    while (frames.pending > 0) {
      frames.frame();
    }
    expect(asks()).toBe(0);
    expect(lazy.counters.glyphFrames).toBe(0);
  });

  it("waits for a history to enter the DOM and its held end before laying characters out", () => {
    // more than the end renders (10 characters each: TAIL_CHARS of them), so some stay
    const { lazy, frames, glyphs } = warmedList(
      Array.from({ length: 300 }, (_, i) => `梯度下降 ${i}`),
    );
    // six frames: the end put in the DOM, parser, sanitizer, layout, the end rendered, shown
    lazy.holdEnd();
    for (let i = 0; i < 6; i++) {
      frames.frame();
      expect(lazy.counters.glyphFrames).toBe(0);
    }
    expect(lazy.holdingEnd).toBe(false);
    while (frames.pending > 0) {
      frames.frame();
    }
    expect(glyphs.pending).toBe(0);
    expect(lazy.counters.glyphFrames).toBeGreaterThan(0);
  });
});
