// @vitest-environment jsdom
// Long conversations (lazy.ts, and the list that uses it in messages.ts): the
// end renders at once, a long history enters the DOM from its end a chunk per
// frame, placeholders near the view render a budget per frame (nearest first),
// the reader's place holds when a placeholder above it renders, a JupyterLab
// search mark keeps a placeholder as it is, and Copy all covers everything.
// jsdom has no layout: a small fake gives the list and its messages a geometry;
// frames, clock and timer are driven by hand.
import { afterEach, describe, expect, it } from "vitest";
import { mountChat } from "../src/chat";
import type { Timer } from "../src/frame";
import type { WarmPart } from "../src/incremental";
import {
  ATTACH_CHUNK,
  ATTACH_FIRST,
  DEFERRED_CLASS,
  estimateHeight,
  type LazyHost,
  LazyRenderer,
  MARK_RETRY_MS,
  OPENING_CLASS,
  TAIL_CHARS,
} from "../src/lazy";
import { FRAME_BUDGET_MS, PageLoop } from "../src/scheduler";
import { conversationMarkdown } from "../src/transcript";
import { FakeFrames, FakeModel, steppingClock } from "./fakes";

class FakeTimer implements Timer {
  private next = 1;
  readonly pending = new Map<number, { cb: () => void; at: number }>();
  t = 0;
  set(cb: () => void, ms: number): number {
    const h = this.next++;
    this.pending.set(h, { cb, at: this.t + ms });
    return h;
  }
  clear(h: number): void {
    this.pending.delete(h);
  }
  advance(ms: number): void {
    this.t += ms;
    for (const [h, p] of [...this.pending]) {
      if (p.at <= this.t) {
        this.pending.delete(h);
        p.cb();
      }
    }
  }
}

/**
 * A scrolling list `client` px tall whose children are laid out one after
 * the other, each as tall as `heightOf` says (read at every call, so a
 * rendered message can change height); scrollTop is clamped as a browser does.
 */
function geometry(list: HTMLElement, client: number, heightOf: (el: Element) => number) {
  let top = 0;
  const offset = (el: Element): number => {
    let y = 0;
    for (const c of list.children) {
      if (c === el) {
        return y;
      }
      y += heightOf(c);
    }
    return y;
  };
  const total = () => [...list.children].reduce((a, c) => a + heightOf(c), 0);
  const rect = (y: number, h: number) =>
    ({ top: y, bottom: y + h, height: h, width: 600, left: 0, right: 600, x: 0, y }) as DOMRect;
  Object.defineProperty(list, "clientHeight", { get: () => client });
  Object.defineProperty(list, "clientTop", { get: () => 0 });
  Object.defineProperty(list, "scrollHeight", { get: () => Math.max(total(), client) });
  Object.defineProperty(list, "scrollTop", {
    get: () => top,
    set: (v: number) => {
      top = Math.max(0, Math.min(v, Math.max(total(), client) - client));
    },
  });
  list.getBoundingClientRect = () => rect(0, client);
  const place = (el: Element) => {
    el.getBoundingClientRect = () => rect(offset(el) - top, heightOf(el));
  };
  return {
    place,
    get top() {
      return top;
    },
    scroll(to: number) {
      list.scrollTop = to;
      list.dispatchEvent(new Event("scroll"));
    },
  };
}

/** A bare list of `n` message elements of `chars` characters each, with a fake host. */
function bareList(n: number, chars = 500, client = 400, budgetMs?: number) {
  const root = document.createElement("div");
  const texts = new Map<HTMLElement, HTMLElement>();
  const rendered: string[] = [];
  const deferredHeight = 100;
  const renderedHeight = 160;
  const g = geometry(root, client, (el) =>
    el.classList.contains(DEFERRED_CLASS) ? deferredHeight : renderedHeight,
  );
  for (let i = 0; i < n; i++) {
    const el = document.createElement("div");
    el.dataset.id = `m${i + 1}`;
    const t = document.createElement("div");
    el.append(t);
    root.append(el);
    texts.set(el, t);
    g.place(el);
  }
  let following = true;
  let clock = 0;
  const frames = new FakeFrames();
  const timer = new FakeTimer();
  const shifts: number[] = [];
  const host: LazyHost = {
    render: (el) => {
      rendered.push(el.dataset.id as string);
      clock += 3; // each render takes 3 ms
      return chars;
    },
    chars: () => chars,
    elements: () => root.children,
    following: () => following,
    shift: (dy) => {
      shifts.push(dy);
      root.scrollTop += dy;
    },
    settled: () => {
      if (following) {
        root.scrollTop = root.scrollHeight;
      }
    },
    warm: () => {},
    attach: () => false,
  };
  const controller = new AbortController();
  const lazy = new LazyRenderer({
    root,
    scheduler: frames,
    now: () => clock,
    timer,
    host,
    signal: controller.signal,
    untilFound: true,
    ...(budgetMs === undefined ? {} : { budgetMs }),
  });
  for (const [el, t] of texts) {
    lazy.defer(el, t, "x".repeat(chars));
  }
  const els = [...texts.keys()];
  return {
    root,
    els,
    lazy,
    host,
    frames,
    timer,
    rendered,
    shifts,
    g,
    controller,
    setFollowing: (f: boolean) => {
      following = f;
    },
  };
}

describe("estimateHeight", () => {
  it("grows with the text and counts code lines, table rows and headings", () => {
    const w = 700;
    const prose = estimateHeight("word ".repeat(200), w);
    expect(estimateHeight("word ".repeat(400), w)).toBeGreaterThan(prose);
    expect(estimateHeight("# Title\n\ntext", w)).toBeGreaterThan(estimateHeight("text", w));
    const code = `\`\`\`python\n${"x = 1\n".repeat(20)}\`\`\``;
    expect(estimateHeight(code, w)).toBeGreaterThanOrEqual(20 * 17);
    const table = `| a | b |\n|---|---|\n${"| 1 | 2 |\n".repeat(10)}`;
    expect(estimateHeight(table, w)).toBeGreaterThanOrEqual(11 * 27);
    // a narrower list wraps prose into more lines
    expect(estimateHeight("word ".repeat(200), 300)).toBeGreaterThan(prose);
  });
});

describe("LazyRenderer", () => {
  it("defers a message as its source, the message hidden until found, at an estimated height", () => {
    const { els } = bareList(3, 50);
    const el = els[0] as HTMLElement;
    const text = el.firstElementChild as HTMLElement;
    expect(el.classList.contains(DEFERRED_CLASS)).toBe(true);
    // the whole message is hidden (one paint layer that hover hit tests walk), not its
    // text alone inside a contained message (two)
    expect(el.getAttribute("hidden")).toBe("until-found");
    expect(text.hasAttribute("hidden")).toBe(false);
    expect(text.textContent).toBe("x".repeat(50));
    const size = el.style.getPropertyValue("contain-intrinsic-size");
    expect(size).toMatch(/^auto \d+px$/);
    // the text keeps the same size for when its source shows (a search mark in it)
    expect(text.style.getPropertyValue("contain-intrinsic-size")).toBe(size);
  });

  it("leaves a rendered message as it was: no hidden, no style attribute", () => {
    const { els, lazy } = bareList(2, 50);
    const el = els[0] as HTMLElement;
    const text = el.firstElementChild as HTMLElement;
    lazy.forget(el);
    expect(el.classList.contains(DEFERRED_CLASS)).toBe(false);
    expect(el.hasAttribute("hidden")).toBe(false);
    expect(text.hasAttribute("hidden")).toBe(false);
    // an empty `style=""` on the element that holds model text is what a sanitizer check
    // (tests/browser/xss.mjs) reports: none is left
    expect(text.hasAttribute("style")).toBe(false);
    expect(el.hasAttribute("style")).toBe(false);
    expect(text.textContent).toBe("");
  });

  it("renders the end at once while following, from the last message up, until TAIL_CHARS", () => {
    const chars = 600;
    const { lazy, rendered, els, frames, root } = bareList(20, chars);
    lazy.renderTail();
    const expected = Math.ceil(TAIL_CHARS / chars);
    // each render takes 3 ms: what fits in a frame's budget now (4 would take 12 ms)
    const now = Math.ceil(FRAME_BUDGET_MS / 3);
    expect(now).toBeLessThan(expected);
    const fromEnd = (n: number) =>
      els
        .slice(-n)
        .reverse()
        .map((e) => e.dataset.id);
    expect(rendered).toEqual(fromEnd(now));
    const last = els.at(-1) as HTMLElement;
    expect(last.classList.contains(DEFERRED_CLASS)).toBe(false);
    expect(last.hasAttribute("hidden")).toBe(false);
    expect(lazy.size).toBe(20 - now);
    // the rest of the end in the next frame, which the list asks for once it settled at
    // its bottom (scroll.ts)
    root.scrollTop = root.scrollHeight;
    lazy.flush();
    expect(frames.pending).toBe(1);
    frames.frame();
    expect(rendered.slice(0, expected)).toEqual(fromEnd(expected));
  });

  it("renders the last message at once even when it alone takes longer than the budget", () => {
    const { lazy, rendered, els, frames, root } = bareList(12, 600, 400, 1);
    lazy.renderTail();
    expect(rendered).toEqual([els.at(-1)?.dataset.id]);
    root.scrollTop = root.scrollHeight;
    lazy.flush();
    frames.frame(); // one more a frame at least, the nearest (lowest in view) first
    expect(rendered).toEqual([els.at(-1)?.dataset.id, els.at(-2)?.dataset.id]);
  });

  it("holds a history's end for frames of its own: its end put in the DOM in one, the parser warmed in the next, the sanitizer, the layout, the end rendered unseen, then shown", () => {
    const b = bareList(12, 300);
    const warmed: [WarmPart, number][] = [];
    b.host.warm = (part) => void warmed.push([part, b.rendered.length]);
    // the history's messages wait to enter the DOM: two chunks (messages.ts attachChunk)
    const attached: number[] = [];
    let chunks = 2;
    b.host.attach = () => {
      attached.push(warmed.length);
      chunks--;
      return chunks > 0;
    };
    // as messages.ts settles a list: its end first (renderTail), then its bottom
    b.host.settled = () => {
      b.lazy.renderTail();
      b.root.scrollTop = b.root.scrollHeight;
    };
    // as messages.ts reconciles a history: the end held, the messages waiting
    b.lazy.holdEnd();
    b.lazy.wake();
    expect(b.lazy.holdingEnd).toBe(true);
    expect(b.root.classList.contains(OPENING_CLASS)).toBe(true);
    // the task that built the list settles it: nothing rendered there, nothing attached
    b.lazy.renderTail();
    b.lazy.flush();
    expect(b.rendered).toEqual([]);
    expect(attached).toEqual([]);
    expect(b.frames.pending).toBe(1);
    b.frames.frame(); // the end into the DOM (one chunk: the last messages), alone
    expect(attached).toEqual([0]);
    expect(warmed).toEqual([]);
    expect(b.frames.pending).toBe(1);
    b.frames.frame(); // the parser's first compiling, alone
    expect(attached).toEqual([0]); // the older messages wait until the end is shown
    expect(warmed).toEqual([["parser", 0]]);
    expect(b.frames.pending).toBe(1);
    b.frames.frame(); // the sanitizer's, alone
    b.frames.frame(); // a text laid out, alone
    expect(warmed).toEqual([
      ["parser", 0],
      ["sanitizer", 0],
      ["layout", 0],
    ]);
    expect(b.rendered).toEqual([]);
    expect(b.root.classList.contains(OPENING_CLASS)).toBe(true);
    let scrolls = 0;
    b.host.settled = () => {
      scrolls++; // (what reads the list's layout)
      b.lazy.renderTail();
      b.root.scrollTop = b.root.scrollHeight;
    };
    b.frames.frame(); // the end rendered, the list's content still skipped: no layout read
    expect(b.rendered[0]).toBe(b.els.at(-1)?.dataset.id);
    expect(b.rendered.length).toBeGreaterThan(0);
    expect(b.root.classList.contains(OPENING_CLASS)).toBe(true);
    expect(scrolls).toBe(0);
    b.frames.frame(); // the list shown, at its bottom
    expect(scrolls).toBe(1);
    expect(b.root.classList.contains(OPENING_CLASS)).toBe(false);
    expect(b.lazy.holdingEnd).toBe(false);
    expect(warmed.length).toBe(3);
    expect(attached).toEqual([0]);
    b.frames.frame(); // the older messages, above the end shown
    expect(attached).toEqual([0, 3]);
    // from then on the end renders at once again (a new answer's placeholder)
    const count = b.rendered.length;
    b.lazy.renderTail();
    expect(b.rendered.length).toBeGreaterThanOrEqual(count);
  });

  it("holds nothing for a reader who scrolled away, and a second hold waits as the first", () => {
    const away = bareList(12, 300);
    away.setFollowing(false);
    away.lazy.holdEnd();
    expect(away.lazy.holdingEnd).toBe(false);
    expect(away.root.classList.contains(OPENING_CLASS)).toBe(false);
    const b = bareList(12, 300);
    const warms: WarmPart[] = [];
    b.host.warm = (part) => void warms.push(part);
    b.lazy.holdEnd();
    b.frames.frame(); // the end put in the DOM
    b.frames.frame(); // the parser warmed
    b.lazy.holdEnd(); // more history came: its end waits for six frames again
    b.frames.frame(); // its end put in the DOM
    b.frames.frame();
    b.frames.frame();
    b.frames.frame();
    expect(b.rendered).toEqual([]);
    b.frames.frame(); // the end rendered, unseen
    expect(b.root.classList.contains(OPENING_CLASS)).toBe(true);
    b.frames.frame();
    expect(b.root.classList.contains(OPENING_CLASS)).toBe(false);
    expect(warms).toEqual(["parser", "parser", "sanitizer", "layout"]);
  });

  it("asks for a frame once the list settled, only if placeholders are left", () => {
    // a chat at its bottom: what it deferred rendered at once (renderTail), no frame
    const tail = bareList(3, 100);
    expect(tail.frames.pending).toBe(0); // defer asks for nothing by itself
    tail.lazy.renderTail();
    tail.lazy.flush();
    expect(tail.lazy.size).toBe(0);
    expect(tail.frames.pending).toBe(0);
    // a reader scrolled away: the placeholders wait for a frame that looks near the view
    const away = bareList(3, 100);
    away.setFollowing(false);
    away.lazy.renderTail();
    away.lazy.flush();
    expect(away.frames.pending).toBe(1);
  });

  it("renders nothing at once for a reader who scrolled away", () => {
    const { lazy, rendered, setFollowing } = bareList(20);
    setFollowing(false);
    lazy.renderTail();
    expect(rendered).toEqual([]);
  });

  it("after a scroll, renders the placeholders near the view, nearest first, within a frame's budget", () => {
    // 100 px placeholders, a 400 px view: the view at 3050 shows m31..m35; the margin
    // (one view above and below) reaches m27..m39
    const { lazy, rendered, frames, g, setFollowing } = bareList(60);
    setFollowing(false);
    g.scroll(3050);
    expect(frames.pending).toBe(1);
    frames.frame();
    // 3 ms a render against an 8 ms budget: three this frame, those in view first, lowest first
    expect(rendered).toEqual(["m35", "m34", "m33"]);
    while (frames.pending > 0) {
      frames.frame();
    }
    // everything within the margin, and nothing beyond it
    const near = new Set(rendered);
    for (const id of ["m31", "m30", "m29", "m35", "m36"]) {
      expect(near.has(id)).toBe(true);
    }
    expect(near.has("m10")).toBe(false);
    expect(near.has("m55")).toBe(false);
    expect(lazy.counters.near).toBe(rendered.length);
  });

  it("a list that follows its bottom looks for nothing when it scrolls (an answer streaming)", () => {
    const { frames, g, rendered } = bareList(60);
    while (frames.pending > 0) {
      frames.frame(); // (the placeholders asked for a look when they were made)
    }
    const before = rendered.length;
    g.scroll(5600); // the view's own scroll to the bottom, while following
    expect(frames.pending).toBe(0);
    expect(rendered.length).toBe(before);
  });

  it("keeps the reader's place when a placeholder above the view renders taller", () => {
    const { rendered, frames, g, shifts, setFollowing } = bareList(60);
    setFollowing(false);
    g.scroll(3000);
    while (frames.pending > 0) {
      frames.frame();
    }
    // each render above the top of the view (100 -> 160 px) moved the list by 60 px
    const above = rendered.filter((id) => Number(id.slice(1)) <= 30).length;
    expect(above).toBeGreaterThan(0);
    expect(shifts.reduce((a, b) => a + b, 0)).toBe(above * 60);
  });

  it("leaves a placeholder holding a search mark as its source, and renders it once the mark is gone", () => {
    const { lazy, rendered, frames, timer, els, setFollowing, g } = bareList(10, 100);
    setFollowing(false);
    const el = els[9] as HTMLElement;
    const text = el.firstElementChild as HTMLElement;
    // JupyterLab's search wraps a match in <mark>
    const mark = document.createElement("mark");
    mark.textContent = "xx";
    text.append(mark);
    g.scroll(600); // the end of the list: m7..m10 in view
    while (frames.pending > 0) {
      frames.frame();
    }
    expect(rendered).toContain("m9");
    expect(rendered).not.toContain("m10");
    expect(lazy.isDeferred(el)).toBe(true);
    expect(el.hasAttribute("hidden")).toBe(false); // shown, marks and all
    expect(text.hasAttribute("hidden")).toBe(false);
    mark.replaceWith("xx"); // the search ended
    timer.advance(MARK_RETRY_MS);
    while (frames.pending > 0) {
      frames.frame();
    }
    expect(rendered).toContain("m10");
  });

  it("stops when disposed", () => {
    const { frames, g, controller, rendered, setFollowing } = bareList(30);
    setFollowing(false);
    g.scroll(1000);
    controller.abort();
    frames.frame();
    g.scroll(2000);
    expect(frames.pending).toBe(0);
    expect(rendered).toEqual([]);
  });
});

/** A kernel's per-message state of `n` messages, questions and answers alternating. */
function history(n: number): {
  state: Record<string, unknown>;
  entries: { role: string; text: string; status: string }[];
} {
  const state: Record<string, unknown> = { last_id: n, live: {}, removed: 0, current: `m${n}` };
  const entries: { role: string; text: string; status: string }[] = [];
  for (let i = 1; i <= n; i++) {
    const parent = i === 1 ? null : `m${i - 1}`;
    if (i % 2 === 1) {
      const text = `Question ${i}?`;
      state[`m${i}`] = { role: "user", seq: 0, status: "done", stats: {}, text, parent };
      entries.push({ role: "user", text, status: "done" });
    } else {
      const text = `## Answer ${i}\n\nSome **text** for answer ${i}.\n\n- a\n- b\n`;
      state[`m${i}`] = {
        role: "assistant",
        seq: 1,
        status: "done",
        stats: {},
        parent,
        finish_reason: "stop",
      };
      state[`m${i}.1`] = text;
      entries.push({ role: "assistant", text, status: "done" });
    }
  }
  return { state, entries };
}

/**
 * A lazy chat on `traits` whose comm the view finds live in the task that made it (a
 * promise already resolved): it says "connected" at once.
 */
async function mountLive(traits: Record<string, unknown>, cleanups: (() => void)[]) {
  const model = new FakeModel({ mode: "chat", _model_ref: "IPY_MODEL_x", ...traits });
  model.widget_manager = { get_model: () => Promise.resolve({ comm_live: true }) } as never;
  const el = document.createElement("div");
  document.body.append(el);
  cleanups.push(() => el.remove());
  const frames = new FakeFrames();
  cleanups.push(mountChat(model, el, { scheduler: frames, now: () => 0, idle: null, lazy: true }));
  await Promise.resolve();
  await Promise.resolve();
  expect(el.querySelector(".nbs-chat")?.getAttribute("data-connection")).toBe("live");
  return { model, el, frames };
}

/** Counts reads of `scrollHeight` (a layout read) until `cleanups` run. */
function countLayoutReads(cleanups: (() => void)[]): number[] {
  const reads: number[] = [];
  const proto = Element.prototype;
  const own = Object.getOwnPropertyDescriptor(proto, "scrollHeight");
  Object.defineProperty(proto, "scrollHeight", {
    configurable: true,
    get(this: Element) {
      reads.push(1);
      return own?.get?.call(this) ?? 0;
    },
  });
  cleanups.push(() => Object.defineProperty(proto, "scrollHeight", own ?? {}));
  return reads;
}

/** A history of `n` messages as the kernel sends a loaded one: its slices by message
 * number (`slice(from, to)`, both included), and the state's other keys (`rest`). */
function historySlices(n: number) {
  const { state } = history(n);
  const slice = (from: number, to: number) =>
    Object.fromEntries(
      Object.entries(state).filter(([k]) => {
        const m = /^m(\d+)/.exec(k);
        return m !== null && Number(m[1]) >= from && Number(m[1]) <= to;
      }),
    );
  const rest = Object.fromEntries(Object.entries(state).filter(([k]) => !/^m\d/.test(k)));
  return { slice, rest };
}

describe("a long chat (messages.ts with lazy rendering)", () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) {
      c();
    }
  });

  function mount(n: number, now: () => number = () => 0) {
    const { state, entries } = history(n);
    const model = new FakeModel({ mode: "chat", ...(state as object) });
    const el = document.createElement("div");
    document.body.append(el);
    const frames = new FakeFrames();
    cleanups.push(mountChat(model, el, { scheduler: frames, now, idle: null, lazy: true }));
    cleanups.push(() => el.remove());
    const list = el.querySelector(".nbs-messages") as HTMLElement;
    return { model, el, list, frames, entries };
  }

  it("shows its end first, rendered, then puts the older messages in the DOM within a frame's budget", () => {
    const n = 400;
    // the list's layout read (where its bottom is): not in the task that builds it
    const reads: string[] = [];
    const proto = Element.prototype;
    const own = Object.getOwnPropertyDescriptor(proto, "scrollHeight");
    Object.defineProperty(proto, "scrollHeight", {
      configurable: true,
      get(this: Element) {
        if (this.classList.contains("nbs-messages")) {
          reads.push(this.classList.contains(OPENING_CLASS) ? "hidden" : "shown");
        }
        return own?.get?.call(this) ?? 0;
      },
    });
    cleanups.push(() => Object.defineProperty(proto, "scrollHeight", own ?? {}));
    // a clock that moves 4 ms per reading: two chunks fit a frame's 8 ms
    const { el, list, frames } = mount(n, steppingClock(4));
    // the elements each frame creates
    const created: Element[] = [];
    const create = Document.prototype.createElement;
    Document.prototype.createElement = function (this: Document, ...args: [string]) {
      const made = create.apply(this, args);
      created.push(made);
      return made;
    } as typeof create;
    cleanups.push(() => {
      Document.prototype.createElement = create;
    });
    const messagesMade = () => created.splice(0).filter((e) => e.matches(".nbs-message"));
    // the task that made the view (the module evaluated, the chrome built) builds no
    // list, nor does the first frame after it (the page's first paint of the view)
    expect(list.children.length).toBe(0);
    expect(frames.pending).toBe(1);
    frames.frame();
    expect(created).toEqual([]);
    expect(list.classList.contains(OPENING_CLASS)).toBe(false);
    expect(el.querySelector("button.nbs-copy-all")).not.toBeNull();
    // the next reconciles the history, and creates none of its elements
    expect(frames.pending).toBe(1);
    frames.frame();
    expect(created).toEqual([]);
    expect(list.children.length).toBe(0);
    expect(list.classList.contains(OPENING_CLASS)).toBe(true);
    // every message is the list's already (Copy all), none in the DOM yet
    expect(list.querySelector(".nbs-message")).toBeNull();
    // the next puts the end in the DOM: the last ATTACH_FIRST messages, no other
    frames.frame();
    expect(reads).toEqual([]);
    expect(messagesMade().map((e) => (e as HTMLElement).dataset.id)).toEqual(
      Array.from({ length: ATTACH_FIRST }, (_, i) => `m${n - ATTACH_FIRST + i + 1}`),
    );
    expect(list.children.length).toBe(ATTACH_FIRST);
    const last = list.lastElementChild as HTMLElement;
    expect(last.dataset.id).toBe(`m${n}`);
    // built, not shown: its end renders in frames of its own (the renderer warmed first)
    expect(list.classList.contains(OPENING_CLASS)).toBe(true);
    expect(last.classList.contains(DEFERRED_CLASS)).toBe(true);
    for (let i = 0; i < 3; i++) {
      frames.frame(); // the renderer warmed, a part a frame
      expect(list.classList.contains(OPENING_CLASS)).toBe(true);
      expect(last.classList.contains(DEFERRED_CLASS)).toBe(true);
    }
    expect(reads).toEqual([]);
    // the layout's part: a rendered text beside the list, hidden, of no height
    const warm = list.parentElement?.querySelector(".nbs-warm") as HTMLElement;
    expect(warm.getAttribute("aria-hidden")).toBe("true");
    expect(warm.querySelector(".nbs-md table")).not.toBeNull();
    frames.frame(); // the end rendered, the list not shown yet (its content skipped)
    expect(last.classList.contains(DEFERRED_CLASS)).toBe(false);
    expect(list.classList.contains(OPENING_CLASS)).toBe(true);
    expect(reads).toEqual([]); // no layout read in the frame that rendered it
    frames.frame(); // shown
    expect(list.parentElement?.querySelector(".nbs-warm")).toBeNull(); // gone with the hold
    expect(list.classList.contains(OPENING_CLASS)).toBe(false);
    // settled at its bottom once its end rendered, and shown
    expect(reads.length).toBeGreaterThan(0);
    expect(new Set(reads)).toEqual(new Set(["shown"]));
    expect(list.children.length).toBe(ATTACH_FIRST);
    expect(last.classList.contains(DEFERRED_CLASS)).toBe(false);
    expect(last.querySelector(".nbs-md h2")?.textContent).toBe(`Answer ${n}`);
    let frameCount = 0;
    while (list.children.length < n && frameCount < 100) {
      frames.frame();
      frameCount++;
      expect(list.children.length).toBeLessThanOrEqual(
        ATTACH_FIRST + frameCount * 2 * ATTACH_CHUNK,
      );
    }
    expect(frameCount).toBeGreaterThan(1);
    expect(list.children.length).toBe(n);
    expect([...list.children].map((c) => (c as HTMLElement).dataset.id)).toEqual(
      Array.from({ length: n }, (_, i) => `m${i + 1}`),
    );
    // the older ones wait as placeholders holding their text
    const first = list.querySelector('[data-id="m2"]') as HTMLElement;
    expect(first.classList.contains(DEFERRED_CLASS)).toBe(true);
    expect(first.querySelector(".nbs-text")?.textContent).toContain("Answer 2");
    expect(first.dataset.status).toBe("done");
  });

  it("a short chat shows in the task that made it; a history's first frame announces none of its statuses", () => {
    // as many messages as the list puts in the DOM at once: no history, shown at once
    const short = mount(ATTACH_FIRST);
    expect(short.list.children.length).toBe(ATTACH_FIRST);
    expect(short.list.classList.contains(OPENING_CLASS)).toBe(false);
    const { el, list, frames } = mount(ATTACH_FIRST + 1);
    expect(list.children.length).toBe(0);
    const live = el.querySelector(".nbs-live") as HTMLElement;
    for (let i = 0; i < 10 && frames.pending > 0; i++) {
      frames.frame();
      expect(live.textContent).toBe(""); // finished answers are not news
    }
    expect(list.children.length).toBe(ATTACH_FIRST + 1);
    expect(list.classList.contains(OPENING_CLASS)).toBe(false);
  });

  it("the task that makes a history's view reads no layout, even when its kernel answers in it", async () => {
    const reads = countLayoutReads(cleanups);
    const { state } = history(100);
    // a live comm, found in the same task (a promise already resolved): the view says
    // "connected" at once
    const { el, frames } = await mountLive(state as Record<string, unknown>, cleanups);
    expect(reads).toEqual([]); // the page's layout is read in the frames that build the list
    for (let i = 0; i < 10 && frames.pending > 0; i++) {
      frames.frame();
    }
    expect(reads.length).toBeGreaterThan(0);
    expect(el.querySelectorAll(".nbs-message").length).toBe(100);
  });

  it("the task that makes an empty chat's view reads no layout (a history comes in updates after it)", async () => {
    const reads = countLayoutReads(cleanups);
    const { state } = history(2);
    const rest = Object.fromEntries(Object.entries(state).filter(([k]) => !/^m\d/.test(k)));
    // as ChatWidget(messages=...) or load(): the view made with no message; a live comm
    // found in the same task says "connected" (the view repaints and settles)
    const { model, el, frames } = await mountLive(rest, cleanups);
    expect(el.querySelectorAll(".nbs-message").length).toBe(0);
    expect(reads).toEqual([]);
    // its first messages settle it at its bottom, in their frame
    model.update(state);
    frames.frame();
    expect(el.querySelectorAll(".nbs-message").length).toBe(2);
    expect(reads.length).toBeGreaterThan(0);
  });

  it("in the page's one frame loop, the history enters through the loop's frames", () => {
    const n = 400;
    const { state } = history(n);
    const model = new FakeModel({ mode: "chat", ...(state as object) });
    const el = document.createElement("div");
    document.body.append(el);
    cleanups.push(() => el.remove());
    const frames = new FakeFrames();
    const loop = new PageLoop({ scheduler: frames, now: steppingClock(4) });
    // no scheduler of the view's own: every frame it or lazy.ts asks for is the loop's
    cleanups.push(mountChat(model, el, { frames: loop, now: () => 0, idle: null, lazy: true }));
    const list = el.querySelector(".nbs-messages") as HTMLElement;
    expect(list.children.length).toBe(0); // built in the loop's first frame
    let frameCount = 0;
    while (frames.pending > 0 && frameCount < 100) {
      expect(frames.pending).toBe(1); // one request for the page, whoever asked
      frames.frame();
      frameCount++;
    }
    expect(frameCount).toBeGreaterThan(1);
    expect(list.children.length).toBe(n);
    expect(loop.stats.max_callbacks_per_frame).toBe(1);
    expect(loop.stats.views).toBe(2); // the view and its lazy frames
    // the view gone, its lazy frames leave the loop too
    for (const c of cleanups.splice(0)) {
      c();
    }
    expect(loop.stats.views).toBe(0);
  });

  it("a history that comes after its first message still enters from its end", () => {
    const n = 300;
    const { state } = history(n);
    const first = Object.fromEntries(
      Object.entries(state).filter(([k]) => k === "m1" || !/^m\d/.test(k)),
    );
    const model = new FakeModel({ mode: "chat", ...(first as object), last_id: 1, current: "m1" });
    const el = document.createElement("div");
    const frames = new FakeFrames();
    cleanups.push(
      mountChat(model, el, { scheduler: frames, now: () => 0, idle: null, lazy: true }),
    );
    const list = el.querySelector(".nbs-messages") as HTMLElement;
    expect(list.children.length).toBe(1);
    model.update(state); // the rest of the history, in one update
    frames.frame(); // the page's first paint of the view: the history waits
    expect(list.children.length).toBe(1);
    frames.frame(); // reconciled, hidden: the first message out of the DOM too
    expect(list.children.length).toBe(0);
    expect(list.classList.contains(OPENING_CLASS)).toBe(true);
    frames.frame(); // its end in the DOM
    expect(list.children.length).toBe(ATTACH_FIRST);
    expect((list.firstElementChild as HTMLElement).dataset.id).toBe(`m${n - ATTACH_FIRST + 1}`);
    while (frames.pending > 0) {
      frames.frame();
    }
    expect([...list.children].map((c) => (c as HTMLElement).dataset.id)).toEqual(
      Array.from({ length: n }, (_, i) => `m${i + 1}`),
    );
  });

  it("a history that comes newest slice first shows its end once, the older slices enter above it", () => {
    // as the kernel sends a loaded history (nbstream/widgets/wire.py history_slices):
    // the first update names every id (last_id) and carries the newest messages
    const n = 300;
    const { slice, rest } = historySlices(n);
    const model = new FakeModel({ mode: "chat", ...rest, ...slice(201, n) });
    const el = document.createElement("div");
    document.body.append(el);
    cleanups.push(() => el.remove());
    const frames = new FakeFrames();
    cleanups.push(
      mountChat(model, el, { scheduler: frames, now: steppingClock(4), idle: null, lazy: true }),
    );
    const list = el.querySelector(".nbs-messages") as HTMLElement;
    const last = () => list.querySelector(`[data-id="m${n}"]`) as HTMLElement;
    const ids = () => [...list.children].map((c) => (c as HTMLElement).dataset.id);
    frames.frame(); // the page's first paint of the view
    frames.frame(); // the next builds the list
    expect(list.classList.contains(OPENING_CLASS)).toBe(true); // the end's own frames
    expect(list.children.length).toBe(0);
    frames.frame(); // the next puts its end in the DOM
    expect(ids()).toEqual(
      Array.from({ length: ATTACH_FIRST }, (_, i) => `m${n - ATTACH_FIRST + i + 1}`),
    );
    for (let i = 0; i < 5; i++) {
      frames.frame();
    }
    expect(list.classList.contains(OPENING_CLASS)).toBe(false);
    expect(last().classList.contains(DEFERRED_CLASS)).toBe(false);
    // the older slices: above what is shown, a chunk a frame, never hidden again
    for (const [from, to] of [
      [101, 200],
      [1, 100],
    ] as const) {
      model.update(slice(from, to));
      const before = list.children.length;
      frames.frame();
      expect(list.classList.contains(OPENING_CLASS)).toBe(false);
      expect(list.children.length - before).toBeLessThanOrEqual(2 * ATTACH_CHUNK);
      expect(ids().at(-1)).toBe(`m${n}`);
      expect(last().classList.contains(DEFERRED_CLASS)).toBe(false);
    }
    let frameCount = 0;
    while (frames.pending > 0 && frameCount < 100) {
      frames.frame();
      frameCount++;
      expect(list.classList.contains(OPENING_CLASS)).toBe(false);
    }
    expect(ids()).toEqual(Array.from({ length: n }, (_, i) => `m${i + 1}`));
    expect(last().querySelector(".nbs-md h2")?.textContent).toBe(`Answer ${n}`);
    expect((list.querySelector('[data-id="m2"]') as HTMLElement).dataset.status).toBe("done");
  });

  it("a slice that comes before the history's end is in the DOM waits with it: the end's frame puts in the last of all", () => {
    const n = 300;
    const { slice, rest } = historySlices(n);
    const model = new FakeModel({ mode: "chat", ...rest, ...slice(201, n) });
    const el = document.createElement("div");
    document.body.append(el);
    cleanups.push(() => el.remove());
    // the page's loop: a view's new messages go before a list's own frames ("later")
    const frames = new FakeFrames();
    const loop = new PageLoop({ scheduler: frames, now: steppingClock(4) });
    cleanups.push(mountChat(model, el, { frames: loop, now: () => 0, idle: null, lazy: true }));
    const list = el.querySelector(".nbs-messages") as HTMLElement;
    const ids = () => [...list.children].map((c) => (c as HTMLElement).dataset.id);
    frames.frame(); // the page's first paint of the view
    frames.frame(); // the newest slice reconciled, none of it in the DOM
    expect(list.children.length).toBe(0);
    model.update(slice(101, 200)); // an older slice, before the end's frame
    frames.frame(); // the slice reconciled, then the end put in the DOM
    // the end, the last ATTACH_FIRST of all; the older slice not in the DOM
    expect(ids()).toEqual(
      Array.from({ length: ATTACH_FIRST }, (_, i) => `m${n - ATTACH_FIRST + i + 1}`),
    );
    expect(list.classList.contains(OPENING_CLASS)).toBe(true);
    let frameCount = 0;
    while (frames.pending > 0 && frameCount < 100) {
      frames.frame();
      frameCount++;
    }
    expect(list.classList.contains(OPENING_CLASS)).toBe(false);
    // every message given so far, in order (the order names an id above the slices too)
    expect(ids().slice(-200)).toEqual(Array.from({ length: 200 }, (_, i) => `m${i + 101}`));
  });

  it("copies all of it, placeholders and messages not yet in the DOM included", async () => {
    const n = 300;
    const { el, entries, frames } = mount(n);
    frames.frame(); // the page's first paint of the view
    frames.frame(); // the next builds the list (Copy all waits for it)
    const seen: string[] = [];
    Object.defineProperty(navigator, "clipboard", {
      configurable: true,
      value: { writeText: async (t: string) => void seen.push(t) },
    });
    (el.querySelector("button.nbs-copy-all") as HTMLButtonElement).click();
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual([conversationMarkdown(entries)]);
  });

  it("opening a history sends the kernel no ack (its messages were never live here)", () => {
    // a history that arrives after the view rendered, as from a kernel's update
    const model = new FakeModel({ mode: "chat", last_id: 0, live: {}, removed: 0 });
    const el = document.createElement("div");
    const frames = new FakeFrames();
    cleanups.push(
      mountChat(model, el, { scheduler: frames, now: () => 0, idle: null, lazy: true }),
    );
    model.update(history(200).state);
    while (frames.pending > 0) {
      frames.frame();
    }
    expect(el.querySelectorAll(".nbs-message").length).toBe(200);
    expect(model.drain("acks")).toEqual([]);
  });

  it("a new question and its answer stream at the end as in a fresh chat", () => {
    const n = 200;
    const { model, list, frames } = mount(n);
    while (frames.pending > 0) {
      frames.frame();
    }
    model.update({
      last_id: n + 2,
      [`m${n + 1}`]: {
        role: "user",
        seq: 0,
        status: "done",
        stats: {},
        text: "More?",
        parent: `m${n}`,
      },
      [`m${n + 2}`]: {
        role: "assistant",
        seq: 1,
        status: "running",
        stats: {},
        parent: `m${n + 1}`,
      },
      [`m${n + 2}.1`]: "Streaming **now**",
      live: { [`m${n + 2}`]: 1 },
      current: `m${n + 2}`,
    });
    frames.frame();
    const live = list.lastElementChild as HTMLElement;
    expect(live.dataset.id).toBe(`m${n + 2}`);
    expect(live.classList.contains(DEFERRED_CLASS)).toBe(false);
    expect(live.querySelector(".nbs-md")?.textContent).toContain("Streaming now");
    const question = live.previousElementSibling as HTMLElement;
    expect(question.querySelector(".nbs-text")?.textContent).toBe("More?");
    expect(question.classList.contains(DEFERRED_CLASS)).toBe(false);
    // the live answer is acked (the kernel paces its stream by the view), the history never
    expect(model.drain("acks").flatMap((m) => m.acks.map((a) => a.id))).toEqual([`m${n + 2}`]);
  });

  it("without lazy rendering (the previous way) renders everything at once", () => {
    const { state } = history(100);
    const model = new FakeModel({ mode: "chat", ...(state as object) });
    const el = document.createElement("div");
    cleanups.push(
      mountChat(model, el, { scheduler: new FakeFrames(), now: () => 0, idle: null, lazy: false }),
    );
    expect(el.querySelectorAll(".nbs-message").length).toBe(100);
    expect(el.querySelectorAll(`.${DEFERRED_CLASS}`).length).toBe(0);
    expect(el.querySelectorAll(".nbs-md h2").length).toBe(50);
  });
});
