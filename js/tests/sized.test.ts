// @vitest-environment jsdom
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { MarkdownSink, renderOnce } from "../src/incremental";
import { SIZED_BATCH_MS, SIZED_CLASS } from "../src/sized";

/** A ResizeObserver whose "layout" happens when the test says so. */
class FakeResizeObserver {
  static all: FakeResizeObserver[] = [];
  readonly targets = new Set<Element>();
  constructor(private readonly cb: ResizeObserverCallback) {
    FakeResizeObserver.all.push(this);
  }
  observe(el: Element): void {
    this.targets.add(el);
  }
  unobserve(el: Element): void {
    this.targets.delete(el);
  }
  disconnect(): void {
    this.targets.clear();
  }
  /** The browser laid out every watched element, and the batch of marks came. */
  layout(): void {
    this.report();
    vi.advanceTimersByTime(SIZED_BATCH_MS);
  }
  /** The browser laid out every watched element: the observer's callback only. */
  report(): void {
    const entries = [...this.targets].map((target) => ({ target }) as ResizeObserverEntry);
    this.cb(entries, this as unknown as ResizeObserver);
  }
}

const ro = (): FakeResizeObserver => {
  expect(FakeResizeObserver.all).toHaveLength(1); // one per window, shared by every sink
  return FakeResizeObserver.all[0] as FakeResizeObserver;
};
const sized = (el: Element): boolean[] =>
  [...el.children].map((c) => c.classList.contains(SIZED_CLASS));
const withoutMarks = (el: Element): string => {
  const copy = el.cloneNode(true) as Element;
  for (const c of copy.querySelectorAll(`.${SIZED_CLASS}`)) {
    c.classList.remove(SIZED_CLASS);
    if (c.classList.length === 0) c.removeAttribute("class");
  }
  return copy.innerHTML;
};

beforeAll(() => {
  vi.useFakeTimers();
  vi.stubGlobal("ResizeObserver", FakeResizeObserver);
});
afterEach(() => {
  ro().layout(); // every test starts with nothing watched
});
afterAll(() => {
  vi.useRealTimers();
});

describe("blocks may skip layout only once laid out", () => {
  it("the paragraph that closes is a new node: not sized until laid out", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.append("a long paragraph");
    expect(sized(el)).toEqual([false]);
    ro().layout();
    expect(sized(el)).toEqual([true]);
    const streamed = el.firstElementChild;
    // its last words and the next block in one delta: the paragraph is re-created
    sink.append(" and its end.\n\nThe next block.");
    expect(el.firstElementChild).not.toBe(streamed);
    expect(sized(el)).toEqual([false, false]);
    expect(ro().targets.has(streamed as Element)).toBe(false);
    ro().layout();
    expect(sized(el)).toEqual([true, true]);
    expect(ro().targets.size).toBe(0); // each block is watched until its first layout
  });

  it("a laid-out block rendered the same keeps its node (the mark does not count)", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.append("one\n\ntwo");
    ro().layout();
    const [first, second] = [...el.children];
    sink.append(" more");
    expect(el.children[0]).toBe(first);
    expect(el.children[1]).not.toBe(second);
    expect(sized(el)).toEqual([true, false]);
    sink.finish();
    expect(el.children[0]).toBe(first);
    const want = document.createElement("div");
    want.appendChild(renderOnce(document, "one\n\ntwo more"));
    expect(withoutMarks(el)).toBe(want.innerHTML);
  });

  it("blocks removed before their first layout are no longer watched", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    for (const ch of "streamed a character at a time") {
      sink.append(ch);
    }
    expect(ro().targets.size).toBe(1);
    expect(ro().targets.has(el.firstElementChild as Element)).toBe(true);
    sink.replace("- a\n- b\n\ntext", true);
    expect([...ro().targets]).toEqual([...el.children]);
    ro().layout();
    expect(sized(el)).toEqual([true, true]);
  });
});

describe("marks come in batches, never in the observer's callback", () => {
  // A class changed in a ResizeObserver callback makes the browser lay the
  // frame out a second time: the marks wait for a timer, one per batch.
  it("blocks laid out are marked together, once the batch time has passed", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.append("one\n\ntwo\n\nthree");
    ro().report();
    expect(sized(el)).toEqual([false, false, false]);
    expect(ro().targets.size).toBe(0); // reported once: no longer watched
    vi.advanceTimersByTime(SIZED_BATCH_MS - 1);
    expect(sized(el)).toEqual([false, false, false]);
    sink.append("\n\nfour");
    ro().report(); // joins the batch that is waiting
    vi.advanceTimersByTime(1);
    expect(sized(el)).toEqual([true, true, true, true]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a block removed while it waits for its batch is not marked", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.append("a paragraph");
    ro().report();
    const waiting = el.firstElementChild as Element;
    sink.append(" goes on.\n\nNext.");
    expect(el.firstElementChild).not.toBe(waiting);
    ro().layout();
    expect(waiting.classList.contains(SIZED_CLASS)).toBe(false);
    expect(sized(el)).toEqual([true, true]);
  });

  it('"at-once": marked in the callback (the previous way, for benchmarks)', () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el, { sized: "at-once" });
    sink.append("one\n\ntwo");
    ro().report();
    expect(sized(el)).toEqual([true, true]);
    expect(vi.getTimerCount()).toBe(0);
    // a view as shipped on the same page still batches
    const other = document.createElement("div");
    new MarkdownSink(other).append("three\n\nfour");
    ro().report();
    expect(sized(other)).toEqual([false, false]);
    expect(vi.getTimerCount()).toBe(1);
  });
});
