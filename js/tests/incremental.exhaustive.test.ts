// @vitest-environment jsdom
// Exhaustive: incremental Markdown equals a one-shot render for every split of the
// corpus (fast-check), character by character, with math, and a long answer's frames
// cost what its open block costs. Minutes on a loaded machine: `make test` (CI) and
// `npm test` run it, `make test-fast` (the inner loop) leaves it out.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MarkdownSink } from "../src/incremental";
import { ALL } from "./corpus";
import {
  docs,
  hasReferenceDefinitions,
  MATH_DOCS,
  oneShot,
  oneShotOpen,
  stream,
} from "./incremental_helpers";

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
});

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
