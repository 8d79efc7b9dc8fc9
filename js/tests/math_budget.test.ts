// @vitest-environment jsdom
// Typesetting within a frame's budget (math.ts), on a clock that advances by a
// fixed step at each reading, so that what fits in a budget never depends on
// the machine's speed: each formula costs 3 ms (the clock read before and
// after it), so a budget of FRAME_BUDGET_MS (8 ms) typesets 3 formulas a task; the others show their
// source, escaped, and the message is rendered again in the following frames
// (messages.ts through the chat's re-render path; incremental.ts renders again
// only the blocks that hold one) until every formula is typeset, ending equal
// to the render with no budget.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { mountChat } from "../src/chat";
import { MarkdownSink, renderOnce } from "../src/incremental";
import {
  CACHE_SIZE,
  clearMathCache,
  DEFERRED_SELECTOR,
  mathCacheSize,
  mathDeferrals,
  setMathBudget,
} from "../src/math";
import { MessageList } from "../src/messages";
import { FRAME_BUDGET_MS } from "../src/scheduler";
import { SIZED_CLASS } from "../src/sized";
import { FakeFrames, FakeModel, message } from "./fakes";

/** Formulas typeset in one task with the clock below. */
const PER_TASK = 3;

let clock = 0;
const stepping = () => ({ now: () => (clock += 3), budgetMs: FRAME_BUDGET_MS });

/** The end of the task: the budget's window closes at the next microtask checkpoint. */
const nextTask = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/** `n` display formulas and `n` inline ones, a table and a code block: an answer heavy in math. */
function mathAnswer(n: number, tag: string): string {
  const parts = ["## Derivation", ""];
  for (let i = 0; i < n; i++) {
    parts.push(
      `Step ${i}: with $x_{${tag}${i}} = ${i}$ we get`,
      "",
      "$$",
      `\\frac{a_{${tag}${i}}}{b} + ${i}`,
      "$$",
      "",
    );
  }
  parts.push(
    "| a | b |",
    "|---|---|",
    `| $\\alpha_${tag}$ | 1 |`,
    "",
    "```python",
    "print(1)",
    "```",
    "",
  );
  return parts.join("\n");
}

/** The HTML of `el`'s children, without the class sized.ts adds once a block was laid out. */
function html(el: Element): string {
  const copy = el.cloneNode(true) as Element;
  for (const node of copy.querySelectorAll(`.${SIZED_CLASS}`)) {
    node.classList.remove(SIZED_CLASS);
    if (node.getAttribute("class") === "") {
      node.removeAttribute("class");
    }
  }
  return copy.innerHTML;
}

/** The reference: the whole text rendered with no budget. */
function unbounded(text: string): string {
  setMathBudget(null);
  const el = document.createElement("div");
  el.appendChild(renderOnce(document, text));
  setMathBudget(stepping());
  return el.innerHTML;
}

beforeEach(() => {
  clock = 0;
  clearMathCache();
  setMathBudget(stepping());
});

afterEach(() => {
  setMathBudget({ now: () => 0, budgetMs: FRAME_BUDGET_MS }); // as setup.ts
  document.body.textContent = "";
});

describe("a render typesets formulas within the budget", () => {
  it("typesets some, leaves the others as their source, and typesets the rest in the next tasks", async () => {
    const text = mathAnswer(8, "s");
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    const before = mathDeferrals();
    sink.replace(text, true);
    // the first task: PER_TASK formulas, the 17 others (8 inline, 8 display, 1 in the table) wait
    expect(el.querySelectorAll("math").length).toBe(PER_TASK);
    const waiting = el.querySelectorAll(DEFERRED_SELECTOR);
    expect(waiting.length).toBe(17 - PER_TASK);
    expect(mathDeferrals() - before).toBe(17 - PER_TASK);
    // where the formula goes, with the class it gets, its TeX source as text
    const block = el.querySelector(`div${DEFERRED_SELECTOR}`) as HTMLElement;
    expect(block.classList.contains("nbs-math-block")).toBe(true);
    expect(block.textContent).toMatch(/^\$\$\n\\frac\{a_\{s\d\}\}\{b\} \+ \d\n\$\$$/);
    const inline = el.querySelector(`span${DEFERRED_SELECTOR}`) as HTMLElement;
    expect(inline.classList.contains("nbs-math")).toBe(true);
    expect(el.textContent).toContain("\\frac{a_{s7}}{b} + 7");

    let tasks = 1;
    while (el.querySelector(DEFERRED_SELECTOR) !== null) {
      await nextTask();
      const shown = el.querySelectorAll("math").length;
      sink.replace(text, true); // what messages.ts does in the next frame
      expect(el.querySelectorAll("math").length).toBe(Math.min(17, shown + PER_TASK));
      tasks++;
      expect(tasks).toBeLessThan(20);
    }
    expect(tasks).toBe(Math.ceil(17 / PER_TASK));
    expect(html(el)).toBe(unbounded(text));
  });

  it("with no budget, every formula at once", () => {
    setMathBudget(null);
    const el = document.createElement("div");
    new MarkdownSink(el).replace(mathAnswer(8, "n"), true);
    expect(el.querySelectorAll("math").length).toBe(17);
    expect(el.querySelector(DEFERRED_SELECTOR)).toBeNull();
  });

  it("a closed (frozen) block's waiting formulas get typeset, the blocks beside it kept", async () => {
    const el = document.createElement("div");
    const closed: HTMLElement[] = [];
    const sink = new MarkdownSink(el, { onClosedCode: (code) => closed.push(code) });
    // a streaming answer: its first blocks are frozen (final) as soon as a later block starts
    const text =
      "```js\nlet a = 1;\n```\n\nFive: $c_1$ $c_2$ $c_3$ $c_4$ $c_5$.\n\nThen $$c_6$$\n\nand more";
    sink.append(text);
    expect(closed.length).toBe(1);
    const code = el.querySelector("pre > code") as HTMLElement;
    code.classList.add("hljs"); // as the highlighter does to a closed block
    const paragraph = el.children[1] as HTMLElement;
    expect(paragraph.tagName).toBe("P");
    expect(paragraph.querySelectorAll(DEFERRED_SELECTOR).length).toBe(5 - PER_TASK);
    expect(el.querySelectorAll(DEFERRED_SELECTOR).length).toBe(6 - PER_TASK);

    let tasks = 0;
    while (el.querySelector(DEFERRED_SELECTOR) !== null && tasks < 10) {
      await nextTask();
      sink.replace(text); // the re-render of the next frame: the same text, still growing
      tasks++;
    }
    expect(el.querySelector(DEFERRED_SELECTOR)).toBeNull();
    expect(el.querySelectorAll("math").length).toBe(6);
    // the frozen code block stayed (not rendered again, its highlighting kept), once queued
    expect(el.querySelector("pre > code")).toBe(code);
    expect(code.classList.contains("hljs")).toBe(true);
    expect(closed.length).toBe(1);
    expect(sink.retypesets).toBeGreaterThan(0);
    // and the stream goes on from there as before
    sink.append(" text.\n");
    sink.finish();
    const done = `${text} text.\n`;
    expect(html(el).replace(" hljs", "")).toBe(unbounded(done));
  });

  it("a re-render that left nothing waiting renders whole, as before", () => {
    setMathBudget(null);
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.replace("A $b$\n\nC", true);
    const first = el.firstChild;
    sink.replace("A $b$\n\nC", true);
    expect(el.firstChild).not.toBe(first);
    expect(sink.retypesets).toBe(0);
  });

  it("hostile TeX in a waiting formula is text, never markup", async () => {
    const hostile = [
      '$<img src=x onerror="globalThis.__pwned=1">$',
      "$$</span><script>globalThis.__pwned=1</script>$$",
      '$\\href{javascript:alert(1)}{x} <a href="javascript:alert(1)" data-commandlinker-command="x">y</a>$',
    ];
    const text = `Warm: $a$ $b$ $c$ then ${hostile.join(" and ")}\n\n$$\n<iframe src="javascript:1"></iframe>\n$$\n`;
    const el = document.createElement("div");
    document.body.appendChild(el);
    new MarkdownSink(el).replace(text, true);
    const waiting = [...el.querySelectorAll(DEFERRED_SELECTOR)];
    expect(waiting.length).toBe(4);
    for (const node of waiting) {
      expect(node.children.length).toBe(0); // text only
    }
    expect(
      el.querySelector("img, script, iframe, a, [onerror], [data-commandlinker-command]"),
    ).toBeNull();
    expect(waiting[0]?.textContent).toBe(hostile[0]);
    expect(el.textContent).toContain("<script>globalThis.__pwned=1</script>");
    expect(el.textContent).toContain('<iframe src="javascript:1"></iframe>');
    await nextTask();
    expect((globalThis as { __pwned?: number }).__pwned).toBeUndefined();
  });
});

describe("the cache", () => {
  it("a message with more formulas than the cache holds still gets all typeset", async () => {
    const n = CACHE_SIZE + 40;
    const text = Array.from({ length: n }, (_, i) => `$y_{${i}}$`).join(" ");
    setMathBudget({ now: () => (clock += 3), budgetMs: 3 * 60 }); // 60 formulas a task
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.replace(text, true);
    let tasks = 1;
    while (el.querySelector(DEFERRED_SELECTOR) !== null && tasks < 20) {
      await nextTask();
      sink.replace(text, true);
      tasks++;
    }
    expect(el.querySelectorAll("math").length).toBe(n);
    expect(tasks).toBe(Math.ceil(n / 60));
    expect(mathCacheSize()).toBeGreaterThan(CACHE_SIZE); // what the last task used is kept
    // later tasks that use other formulas bring it back to its size
    await nextTask();
    const other = document.createElement("div");
    setMathBudget(null);
    new MarkdownSink(other).replace("$z_1$ and $z_2$", true);
    expect(mathCacheSize()).toBeLessThanOrEqual(CACHE_SIZE);
  });
});

describe("in a chat (messages.ts and the chat's re-render path)", () => {
  const mount = (text: string, status: "done" | "running") => {
    const model = new FakeModel({ conversation: [message("a", { text, status })] });
    const frames = new FakeFrames();
    const el = document.createElement("div");
    document.body.appendChild(el);
    const cleanup = mountChat(model, el, {
      scheduler: frames,
      now: () => 0,
      idle: null,
      lazy: false,
    });
    return { el, frames, cleanup };
  };

  /** Runs the frames asked for, each in a task of its own, until none is; how many ran. */
  const framesUntilSettled = async (frames: FakeFrames): Promise<number> => {
    let count = 0;
    while (frames.pending > 0 && count < 19) {
      await nextTask();
      frames.frame();
      count++;
    }
    return count;
  };

  it("a finished answer shows at once and gets its formulas typeset over the next frames", async () => {
    const text = mathAnswer(6, "c");
    const { el, frames, cleanup } = mount(text, "done");
    frames.frame();
    const md = el.querySelector(".nbs-md") as HTMLElement;
    expect(md.querySelectorAll("math").length).toBe(PER_TASK);
    expect(md.querySelectorAll(DEFERRED_SELECTOR).length).toBe(13 - PER_TASK);
    expect(md.textContent).toContain("print(1)"); // all of its text is there
    expect(frames.pending).toBe(1); // the next frame is asked for
    const count = 1 + (await framesUntilSettled(frames));
    expect(md.querySelector(DEFERRED_SELECTOR)).toBeNull();
    expect(count).toBe(Math.ceil(13 / PER_TASK));
    expect(html(md)).toBe(unbounded(text));
    cleanup();
  });

  it("a streaming answer's frozen blocks get their formulas typeset while it streams", async () => {
    const text = "Five: $d_1$ $d_2$ $d_3$ $d_4$ $d_5$.\n\n$$\nd_6\n$$\n\nStill writ";
    const { el, frames, cleanup } = mount(text, "running");
    frames.frame();
    const md = el.querySelector(".nbs-md") as HTMLElement;
    expect(md.querySelectorAll(DEFERRED_SELECTOR).length).toBe(6 - PER_TASK);
    await framesUntilSettled(frames);
    expect(md.querySelector(DEFERRED_SELECTOR)).toBeNull();
    expect(md.querySelectorAll("math").length).toBe(6);
    expect(md.textContent).toContain("Still writ");
    cleanup();
  });

  it("a list without a re-render path typesets in frames of its own", async () => {
    const aborted = new AbortController();
    const list = new MessageList(document, {
      highlighter: null,
      markdown: "incremental",
      sized: "batched",
      signal: aborted.signal,
      label: "messages",
      lazy: null,
    });
    document.body.appendChild(list.el);
    const text = mathAnswer(4, "l");
    const entry = message("a", { text, status: "done" });
    list.reconcile(["a"]);
    list.paint({ entry, replaced: true, appended: "", reasoningAppended: "", meta: true }, 0);
    const md = list.el.querySelector(".nbs-md") as HTMLElement;
    expect(md.querySelectorAll(DEFERRED_SELECTOR).length).toBe(9 - PER_TASK);
    await vi.waitFor(() => expect(md.querySelector(DEFERRED_SELECTOR)).toBeNull());
    expect(html(md)).toBe(unbounded(text));
    aborted.abort();
  });
});
