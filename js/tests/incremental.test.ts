// @vitest-environment jsdom
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findCut, MarkdownSink, renderOnce } from "../src/incremental";
import { parse, renderTokens } from "../src/markdown";
import { sanitize } from "../src/sanitize";
import { ALL, CORPUS } from "./corpus";

const oneShot = (text: string): string => {
  const el = document.createElement("div");
  el.appendChild(renderOnce(document, text));
  return el.innerHTML;
};

/** Cuts `text` at the given positions (any positions, sorted and deduplicated). */
const split = (text: string, cuts: number[]): string[] => {
  const at = [...new Set(cuts.map((c) => Math.min(text.length, Math.max(0, c))))].sort(
    (a, b) => a - b,
  );
  const out: string[] = [];
  let prev = 0;
  for (const c of [...at, text.length]) {
    if (c > prev) {
      out.push(text.slice(prev, c));
      prev = c;
    }
  }
  return out;
};

/** Random deltas, grouped at random into frames (each frame renders once). */
const stream = (text: string) =>
  fc
    .tuple(
      fc.array(fc.nat({ max: text.length }), { maxLength: Math.min(120, text.length) }),
      fc.array(fc.boolean(), { minLength: 200, maxLength: 200 }),
    )
    .map(([cuts, frameEnds]) => {
      const deltas = split(text, cuts);
      const frames: string[] = [];
      let acc = "";
      deltas.forEach((d, i) => {
        acc += d;
        if (frameEnds[i % frameEnds.length] || i === deltas.length - 1) {
          frames.push(acc);
          acc = "";
        }
      });
      return frames;
    });

const hasReferenceDefinitions = (text: string) => /^ {0,3}\[[^\]]+\]:/m.test(text);

const docs = Object.entries({ ...CORPUS, all: ALL });

describe("incremental Markdown equals a one-shot render", () => {
  it.each(docs)("%s: for every split, after the last delta", (_name, text) => {
    const want = oneShot(text);
    fc.assert(
      fc.property(stream(text), (frames) => {
        const el = document.createElement("div");
        const sink = new MarkdownSink(el);
        for (const f of frames) {
          sink.append(f);
        }
        sink.finish();
        expect(el.innerHTML).toBe(want);
      }),
      { numRuns: 60 },
    );
  });

  it.each(docs.filter(([, text]) => !hasReferenceDefinitions(text)))(
    "%s: at every frame (no reference definitions: nothing reaches backwards)",
    (_name, text) => {
      fc.assert(
        fc.property(stream(text), (frames) => {
          const el = document.createElement("div");
          const sink = new MarkdownSink(el);
          for (const f of frames) {
            sink.append(f);
            expect(el.innerHTML).toBe(oneShot(sink.source));
          }
        }),
        { numRuns: 25 },
      );
    },
  );

  it("character by character through the whole corpus", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    for (const ch of ALL) {
      sink.append(ch);
    }
    sink.finish();
    expect(el.innerHTML).toBe(oneShot(ALL));
  }, 60_000);

  it("replace, append after finish, and CR held across deltas", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.replace("```\ncode\r");
    sink.append("\nmore\r");
    sink.finish();
    expect(el.innerHTML).toBe(oneShot("```\ncode\r\nmore\r"));
    sink.append("\r\n- item");
    sink.finish();
    expect(el.innerHTML).toBe(oneShot("```\ncode\r\nmore\r\r\n- item"));
    sink.replace("# new");
    sink.finish();
    expect(el.innerHTML).toBe(oneShot("# new"));
  });
});

describe("the cost of a frame follows the open block, not the answer", () => {
  it("the tail stays small while a long answer of many blocks streams", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    const block = (i: number) =>
      `## Part ${i}\n\nSome text for part ${i} with \`code\`.\n\n- a\n- b\n\n\`\`\`py\nx = ${i}\n\`\`\`\n\n`;
    let maxTail = 0;
    let text = "";
    const early: number[] = [];
    const late: number[] = [];
    for (let i = 0; i < 150; i++) {
      // a frame's worth of text: three words
      const words = block(i).split(/(?<= )/);
      for (let w = 0; w < words.length; w += 3) {
        const delta = words.slice(w, w + 3).join("");
        const t0 = performance.now();
        sink.append(delta);
        (i < 40 ? early : late).push(performance.now() - t0);
        text += delta;
        maxTail = Math.max(maxTail, sink.lastTailChars);
      }
    }
    expect(text.length).toBeGreaterThan(10_000);
    expect(maxTail).toBeLessThan(200);
    // jsdom is slow and noisy; the point is no growth with the answer's length
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] as number;
    expect(median(late)).toBeLessThan(median(early) * 3 + 1);
    sink.finish();
    expect(el.innerHTML).toBe(oneShot(text));
  }, 60_000);

  it("frozen blocks keep their nodes; only the open block's nodes change", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.append("# Head\n\nfirst para\n\nsecond");
    const h1 = el.querySelector("h1");
    const p1 = el.querySelector("p");
    sink.append(" para grows\n\nthird\n\n");
    sink.append("fourth");
    expect(el.querySelector("h1")).toBe(h1);
    expect(el.querySelector("p")).toBe(p1);
    expect([...el.querySelectorAll("p")].map((p) => p.textContent)).toEqual([
      "first para",
      "second para grows",
      "third",
      "fourth",
    ]);
  });

  it("a new reference label renders the earlier blocks again, once", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    const text = "Use [x].\n\npara\n\n[x]: https://x.example\n\nend\n\nmore\n";
    sink.append(text.slice(0, 17)); // "Use [x].\n\npara\n\n": the first block is frozen
    expect(el.querySelector("a")).toBeNull();
    sink.append(text.slice(17));
    expect(sink.rebuilds).toBe(1);
    expect(el.querySelector("a")?.getAttribute("href")).toBe("https://x.example");
    sink.finish();
    expect(el.innerHTML).toBe(oneShot(text));
  });

  it("reports closed code blocks once each, not the open tail's", () => {
    const seen: string[] = [];
    const el = document.createElement("div");
    const sink = new MarkdownSink(el, { onClosedCode: (c) => seen.push(c.textContent ?? "") });
    sink.append("```py\na = 1\n```\n\n```js\nlet b");
    expect(seen).toEqual([]);
    sink.append(" = 2\n```\n\nnext\n\nafter\n");
    expect(seen).toEqual(["a = 1\n", "let b = 2\n"]);
    sink.append("```sh\nopen");
    sink.finish();
    expect(seen).toEqual(["a = 1\n", "let b = 2\n", "open"]);
  });
});

describe("findCut", () => {
  const cut = (text: string) => {
    const c = findCut(text, parse(text, {}));
    return text.slice(0, c.offset);
  };

  it("cuts before the last block whose first two lines are complete", () => {
    expect(cut("para\n\n# h\n\nnext\n")).toBe("para\n\n");
    expect(cut("para\n\n# h\n\nnext\nmore\n")).toBe("para\n\n# h\n\n");
    expect(cut("single paragraph\nstill\n")).toBe("");
  });

  it("waits for a table's delimiter row before ending the paragraph above it", () => {
    expect(cut("text\na | b\n-|-")).toBe("");
    expect(cut("text\na | b\n-|-\n")).toBe("text\n");
  });

  it("never cuts inside an open fence", () => {
    expect(cut("intro\n\n```\ncode\n\n# not heading\n\nmore\n")).toBe("intro\n\n");
  });
});

/** Documents with math: every delimiter, prices, escapes, failures, unclosed formulas. */
const MATH_DOCS: Record<string, string> = {
  inline:
    "Euler: $e^{i\\pi} + 1 = 0$, and \\(a^2 + b^2 = c^2\\) holds.\nIt costs $5 and $10, or \\$3.\n",
  display:
    "The sum:\n\n$$\n\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}\n$$\n\nand\n\\[\n\\int_0^1 x\\,dx = \\tfrac12\n\\]\nafter.\n",
  mixed:
    "# Formulas\n\n- a list with $x_1$\n- and $$\\sqrt{2}$$ inline display\n\n> quoted \\(\\alpha\\)\n\n| a | b |\n|---|---|\n| $x$ | \\(y\\) |\n\n```\n$not math$\n```\n\n`$code$` then $\\frac{a}{b}$ end",
  broken:
    "Bad: $\\frac{a}{$ and $x^$ and \\(\\left(\\).\n\n$$\n\\begin{matrix} a \\end{pmatrix}\n$$\n",
  unclosed: "Text $x + y and more\n\nnext $$ still open\n\n$$\n\\frac{a}{b}\n\nno close",
  dense: "$a$$b$ $ c$ $d $ $$e$$$f$ \\\\(g\\\\) \\(h\\) $i$5 $j$.\n$$k$$\n\\[l\\]\n",
};

/** What the sink should show for `text` while it may still grow: a one-shot parse of it as open text. */
const oneShotOpen = (text: string): string => {
  const env = { mathOpen: true };
  const el = document.createElement("div");
  el.appendChild(sanitize(document, renderTokens(parse(text, env), env)));
  return el.innerHTML;
};

describe("incremental Markdown with math equals a one-shot render", () => {
  const mathDocs = Object.entries(MATH_DOCS);

  it.each(mathDocs)(
    "%s: split once at every position, after the last delta",
    (_name, text) => {
      const want = oneShot(text);
      for (let i = 0; i <= text.length; i++) {
        const el = document.createElement("div");
        const sink = new MarkdownSink(el);
        sink.append(text.slice(0, i));
        sink.append(text.slice(i));
        sink.finish();
        expect(el.innerHTML, `split at ${i}`).toBe(want);
      }
    },
    60_000,
  );

  it.each(mathDocs)(
    "%s: character by character, at every frame and after",
    (_name, text) => {
      const el = document.createElement("div");
      const sink = new MarkdownSink(el);
      for (const ch of text) {
        sink.append(ch);
        expect(el.innerHTML, JSON.stringify(sink.source)).toBe(oneShotOpen(sink.source));
      }
      sink.finish();
      expect(el.innerHTML).toBe(oneShot(text));
    },
    60_000,
  );

  it.each(mathDocs)(
    "%s: for random splits into frames",
    (_name, text) => {
      const want = oneShot(text);
      fc.assert(
        fc.property(stream(text), (frames) => {
          const el = document.createElement("div");
          const sink = new MarkdownSink(el);
          for (const f of frames) {
            sink.append(f);
          }
          sink.finish();
          expect(el.innerHTML).toBe(want);
        }),
        { numRuns: 40 },
      );
    },
    60_000,
  );
});
