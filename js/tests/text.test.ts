// @vitest-environment jsdom
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NODE_MAX, SEG_MAX, TextSink } from "../src/text";

const sink = () => {
  const el = document.createElement("div");
  return { el, text: new TextSink(el) };
};

const segments = (el: HTMLElement) => [...el.children] as HTMLElement[];

describe("TextSink", () => {
  it("shows any sequence of appends and replaces exactly, as Text nodes only", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            { weight: 9, arbitrary: fc.string({ unit: "grapheme", maxLength: 300 }) },
            {
              weight: 2,
              arbitrary: fc.constantFrom("\n", "a\n\nb", "x".repeat(3000), "\n".repeat(5)),
            },
            { weight: 1, arbitrary: fc.string({ maxLength: 50 }).map((s) => ({ replace: s })) },
          ),
          { maxLength: 60 },
        ),
        (ops) => {
          const { el, text } = sink();
          let expected = "";
          for (const op of ops) {
            if (typeof op === "string") {
              text.append(op);
              expected += op;
            } else {
              text.replace(op.replace);
              expected = op.replace;
            }
          }
          expect(el.textContent).toBe(expected);
          const segs = segments(el);
          for (const [i, seg] of segs.entries()) {
            expect(seg.className).toBe("nbs-seg");
            expect(seg.children.length).toBe(0);
            for (const node of seg.childNodes) expect(node.nodeType).toBe(Node.TEXT_NODE);
            // Every segment but the last is closed right after a newline.
            if (i < segs.length - 1) expect(seg.textContent?.endsWith("\n")).toBe(true);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("extends the last Text node while short, then starts a new one", () => {
    const { el, text } = sink();
    text.append("ab");
    text.append("cd");
    const seg = segments(el)[0] as HTMLElement;
    expect(seg.childNodes.length).toBe(1);
    text.append("x".repeat(NODE_MAX));
    text.append("y");
    expect(seg.childNodes.length).toBe(2);
    expect(seg.lastChild?.textContent).toBe("y");
  });

  it("cuts a long segment at a newline only", () => {
    const { el, text } = sink();
    text.append("x".repeat(SEG_MAX + 10));
    expect(segments(el).length).toBe(1);
    text.append("tail\nnext line");
    expect(segments(el).map((s) => s.textContent)).toEqual([
      `${"x".repeat(SEG_MAX + 10)}tail\n`,
      "next line",
    ]);
  });

  it("appending touches only the open segment, however long the text", () => {
    const { el, text } = sink();
    for (let i = 0; i < 200; i++) text.append(`line ${i} ${"w".repeat(80)}\n`);
    const before = segments(el);
    expect(before.length).toBeGreaterThan(5);
    const observer = new MutationObserver(() => undefined);
    observer.observe(el, { subtree: true, childList: true, characterData: true });
    text.append("more");
    const records = observer.takeRecords();
    observer.disconnect();
    const closed = new Set(before.slice(0, -1));
    for (const r of records) {
      const seg = r.target.nodeType === Node.TEXT_NODE ? r.target.parentElement : r.target;
      expect(closed.has(seg as HTMLElement)).toBe(false);
    }
  });
});
