// @vitest-environment jsdom
// The incremental Markdown renderer (incremental.ts): what it keeps, what it
// renders again, where it cuts. The exhaustive comparisons with a one-shot render
// (every split of the corpus, character by character, a long answer) are in
// incremental.exhaustive.test.ts, which `make test` runs and `make test-fast` leaves out.
import { describe, expect, it } from "vitest";
import { findCut, MarkdownSink, renderBlocks } from "../src/incremental";
import { parse, renderHtml } from "../src/markdown";
import { ALL } from "./corpus";
import { oneShot, oneShotOpen } from "./incremental_helpers";

describe("incremental Markdown equals a one-shot render", () => {
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

describe("a frame sanitizes what changed: the block being written", () => {
  it("the finished blocks of the tail keep their nodes and are not sanitized again", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    // the tail holds a finished paragraph and the one being written (not yet final: no cut)
    sink.append("first [a](/api/kernels) para\n\nsecond");
    const first = el.querySelector("p");
    expect(first?.querySelector("a")?.hasAttribute("href")).toBe(false);
    const calls = sink.sanitizeCalls;
    for (const word of [" grows", " and", " grows"]) {
      sink.append(word);
      expect(el.innerHTML).toBe(oneShotOpen(sink.source));
    }
    expect(sink.sanitizeCalls - calls).toBe(3); // one call a frame: the last block
    expect(el.querySelector("p")).toBe(first);
    // the first paragraph freezes: its nodes are the chunk's, with no call for them
    const before = sink.sanitizeCalls;
    sink.append("\n\nthird\n");
    expect(sink.sanitizeCalls - before).toBe(1); // "third", the new last block
    expect(el.querySelector("p")).toBe(first);
    sink.finish();
    expect(el.innerHTML).toBe(oneShot(sink.source));
  });

  it("a block whose HTML changes is sanitized again (a definition arriving later)", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    sink.append("See [x][r] and [y][s].\n\n");
    expect(el.querySelector("a")).toBeNull();
    const calls = sink.sanitizeCalls;
    sink.append("[r]: https://x.example/\n[s]: /relative\n");
    expect(sink.sanitizeCalls - calls).toBe(1);
    expect(el.innerHTML).toBe(oneShotOpen(sink.source));
    const links = [...el.querySelectorAll("a")];
    expect(links.map((a) => a.getAttribute("href"))).toEqual(["https://x.example/", null]);
    sink.append("\nnext");
    expect(el.querySelectorAll("a")[0]).toBe(links[0]); // unchanged since: kept
    sink.finish();
    expect(el.innerHTML).toBe(oneShot(sink.source));
  });

  it("renderBlocks: the blocks' HTML joined is the HTML of the whole", () => {
    for (const text of [
      ALL,
      "",
      "para",
      "- a\n- b\n\n> q\n\n---\n\n```\nx\n```\n\n| a |\n|---|\n| 1 |",
    ]) {
      const env = {};
      const blocks = renderBlocks(parse(text, env), env);
      expect(blocks.join("")).toBe(renderHtml(text));
      expect(blocks.every((b) => b !== "")).toBe(true);
    }
  });

  it("a streamed answer costs about one call a frame", () => {
    const el = document.createElement("div");
    const sink = new MarkdownSink(el);
    const pieces = ALL.match(/[\s\S]{1,7}/g) ?? [];
    for (const p of pieces) {
      sink.append(p);
    }
    sink.finish();
    expect(el.innerHTML).toBe(oneShot(ALL));
    // a second call only where a block closed in the frame and changed in it
    expect(sink.sanitizeCalls).toBeLessThan(pieces.length * 1.15);
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
