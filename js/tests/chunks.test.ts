// @vitest-environment jsdom
// The heavy renderers load on first use (chunks.ts): a chat with no math and no
// code asks for no chunk; the first formula asks for the math chunk and shows
// its source, dimmed, until the chunk arrives, then every message that showed
// one renders again (a finished one and one still streaming); the first closed
// code block that names a language asks for the highlighting chunk and is
// highlighted once it is there; a block with no language asks for nothing; the
// common character references (`&amp;`) need nothing, a rarer one (`&hellip;`)
// shows as written until the entities chunk arrives, then its message renders
// again (a message missing two chunks renders again as each comes); a bare URL or
// address stays text until the linkify chunk arrives, then its message renders
// again with the links (a finished one and one still streaming).
// The host is a fake that records requests; the tests provide the chunks.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mountChat } from "../src/chat";
import {
  type ChunkName,
  chunk,
  hasChunk,
  provideChunk,
  resetChunks,
  setChunkHost,
} from "../src/chunks";
import * as entities from "../src/chunks/entities";
import * as highlight from "../src/chunks/highlight";
import * as linkify from "../src/chunks/linkify";
import * as math from "../src/chunks/math";
import type { IdleDeadline, IdleScheduler } from "../src/highlight";
import { WARM_TEX } from "../src/math";
import { FakeFrames, FakeModel, message } from "./fakes";

class ManualIdle implements IdleScheduler {
  private next = 1;
  readonly pending = new Map<number, (d: IdleDeadline) => void>();
  request(cb: (d: IdleDeadline) => void): number {
    const h = this.next++;
    this.pending.set(h, cb);
    return h;
  }
  cancel(h: number): void {
    this.pending.delete(h);
  }
  run(): void {
    const due = [...this.pending.values()];
    this.pending.clear();
    for (const cb of due) {
      cb({ timeRemaining: () => 50 });
    }
  }
}

let requests: ChunkName[] = [];
const cleanups: (() => void)[] = [];

beforeEach(() => {
  resetChunks();
  requests = [];
  setChunkHost({ request: (name) => requests.push(name) });
});

afterEach(() => {
  for (const c of cleanups.splice(0)) {
    c();
  }
  // leave the next file's tests as setup.ts left them
  provideChunk("math", math);
  provideChunk("highlight", highlight);
  provideChunk("entities", entities);
  provideChunk("linkify", linkify);
});

function chatWith(text: string, status: "done" | "running" = "done") {
  const model = new FakeModel({
    mode: "chat",
    conversation: [message("a1", { text, status, seq: 1 })],
  });
  const el = document.createElement("div");
  document.body.append(el);
  const frames = new FakeFrames();
  const idle = new ManualIdle();
  cleanups.push(mountChat(model, el, { scheduler: frames, now: () => 0, idle, lazy: false }));
  cleanups.push(() => el.remove());
  return { model, el, frames, idle };
}

describe("chunks", () => {
  it("a chat with no math and no code asks for no chunk", () => {
    const { el, idle } = chatWith(
      "## Plain\n\nJust **text**, a list:\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    );
    idle.run();
    expect(el.querySelector(".nbs-md h2")?.textContent).toBe("Plain");
    expect(requests).toEqual([]);
    expect(
      hasChunk("math") || hasChunk("highlight") || hasChunk("entities") || hasChunk("linkify"),
    ).toBe(false);
  });

  it("the common character references need no chunk", () => {
    const { el } = chatWith("Fish &amp; chips, a&nbsp;b, &lt;tag&gt;, &quot;q&quot; &apos;s&apos;");
    expect(el.querySelector(".nbs-md")?.textContent?.trim()).toBe(
      "Fish & chips, a\u00a0b, <tag>, \"q\" 's'",
    );
    expect(requests).toEqual([]);
  });

  it("a rarer character reference shows as written until the entities chunk comes", () => {
    const { el, frames } = chatWith("Wait&hellip; then &rarr; [a link](https://x.org/&alpha;)");
    expect(requests).toEqual(["entities"]);
    const md = () => el.querySelector(".nbs-md") as HTMLElement;
    expect(md().textContent?.trim()).toBe("Wait&hellip; then &rarr; a link");
    provideChunk("entities", entities);
    frames.frame(); // rendered again in the next frame
    expect(md().textContent?.trim()).toBe("Wait\u2026 then \u2192 a link");
    expect(md().querySelector("a")?.getAttribute("href")).toBe("https://x.org/%CE%B1");
    expect(requests).toEqual(["entities"]);
  });

  it("a bare URL and an address stay text until the linkify chunk comes, then link", () => {
    const { el, frames } = chatWith(
      "Docs at https://example.org/docs, or write to help@example.org.",
    );
    expect(requests).toEqual(["linkify"]);
    const md = () => el.querySelector(".nbs-md") as HTMLElement;
    expect(md().querySelector("a")).toBeNull();
    expect(md().textContent?.trim()).toBe(
      "Docs at https://example.org/docs, or write to help@example.org.",
    );
    provideChunk("linkify", linkify);
    frames.frame(); // rendered again in the next frame
    const links = [...md().querySelectorAll("a")].map((a) => a.getAttribute("href"));
    expect(links).toEqual(["https://example.org/docs", "mailto:help@example.org"]);
    expect(md().textContent?.trim()).toBe(
      "Docs at https://example.org/docs, or write to help@example.org.",
    );
    expect(requests).toEqual(["linkify"]);
  });

  it("an address alone asks for the linkify chunk and links once it comes", () => {
    const { el, frames } = chatWith("Write to help@example.org.");
    expect(requests).toEqual(["linkify"]);
    expect(el.querySelector(".nbs-md a")).toBeNull();
    provideChunk("linkify", linkify);
    frames.frame(); // rendered again in the next frame
    expect(el.querySelector(".nbs-md a")?.getAttribute("href")).toBe("mailto:help@example.org");
  });

  it("a reply streaming when the linkify chunk arrives links and streams on", () => {
    const { model, el, frames } = chatWith("See https://example.org/a then", "running");
    expect(el.querySelector(".nbs-md a")).toBeNull();
    provideChunk("linkify", linkify);
    frames.frame(); // rendered again in the next frame
    expect(el.querySelector(".nbs-md a")?.getAttribute("href")).toBe("https://example.org/a");
    model.delta("a1", 2, " https://example.org/b too");
    frames.frame();
    const links = [...el.querySelectorAll(".nbs-md a")].map((a) => a.getAttribute("href"));
    expect(links).toEqual(["https://example.org/a", "https://example.org/b"]);
  });

  it("a message missing two chunks renders again as each arrives", () => {
    const { el, frames } = chatWith("So $x^2$&hellip;");
    expect(requests.sort()).toEqual(["entities", "math"]);
    provideChunk("entities", entities);
    frames.frame(); // rendered again in the next frame
    const md = () => el.querySelector(".nbs-md") as HTMLElement;
    expect(md().textContent?.trim()).toBe("So $x^2$\u2026");
    expect(md().querySelector(".nbs-math-pending")).not.toBeNull();
    provideChunk("math", math);
    frames.frame(); // rendered again in the next frame
    expect(md().querySelector("math")).not.toBeNull();
    expect(md().textContent?.trim().endsWith("\u2026")).toBe(true);
  });

  it("the first formula asks for the math chunk once, shows its source until it comes, then renders", () => {
    const { el, frames } = chatWith("Inline $a_{31}^2$ and display:\n\n$$\\frac{b_{31}}{c}$$\n");
    expect(requests).toEqual(["math"]);
    const md = el.querySelector(".nbs-md") as HTMLElement;
    expect(md.querySelector("math")).toBeNull();
    const pending = [...md.querySelectorAll(".nbs-math-pending")].map((e) => e.textContent);
    expect(pending).toEqual(["$a_{31}^2$", "$$\\frac{b_{31}}{c}$$"]);
    expect(md.querySelector(".nbs-math-source")).toBeNull(); // never shown as a failed formula
    provideChunk("math", math);
    frames.frame(); // rendered again in the next frame
    const after = el.querySelector(".nbs-md") as HTMLElement;
    expect(after.querySelectorAll("math").length).toBe(2);
    expect(after.querySelector("mfrac")).not.toBeNull();
    expect(after.querySelector(".nbs-math-pending")).toBeNull();
    expect(requests).toEqual(["math"]);
  });

  it("the math chunk's first formula is typeset when it arrives, before the frame that renders again", () => {
    const { el, frames } = chatWith("Display:\n\n$$\\frac{b_{33}}{c}$$\n");
    const calls: [string, boolean][] = [];
    const spy = {
      renderTeX: (tex: string, display: boolean) => {
        calls.push([tex, display]);
        return math.renderTeX(tex, display);
      },
    };
    provideChunk("math", spy);
    // Temml's code compiled in the chunk's own task, on a formula of its own
    expect(calls).toEqual([[WARM_TEX, true]]);
    expect(el.querySelector(".nbs-md math")).toBeNull();
    frames.frame();
    expect(calls).toEqual([
      [WARM_TEX, true],
      ["\\frac{b_{33}}{c}", true],
    ]);
    expect(el.querySelector(".nbs-md mfrac")).not.toBeNull();
  });

  it("a reply streaming when the math chunk arrives renders again and streams on", () => {
    const { model, el, frames } = chatWith("Growing $x_{32}+1$ then", "running");
    expect(el.querySelector(".nbs-md .nbs-math-pending")?.textContent).toBe("$x_{32}+1$");
    provideChunk("math", math);
    frames.frame(); // rendered again in the next frame
    expect(el.querySelector(".nbs-md math")).not.toBeNull();
    model.delta("a1", 2, " more text");
    frames.frame();
    const text = el.querySelector(".nbs-md")?.textContent ?? "";
    expect(text).toContain("then more text");
    expect(el.querySelectorAll(".nbs-md math").length).toBe(1);
  });

  it("a chunk arriving between a delta and the frame that shows it shows that text once", () => {
    // the entry already holds the delta's text when the chunk arrives: rendering it
    // whole then, and appending the delta in the frame, showed it twice
    const { model, el, frames } = chatWith("Growing $x_{34}+1$ then", "running");
    model.delta("a1", 2, " once more");
    provideChunk("math", math);
    frames.frame();
    const md = el.querySelector(".nbs-md") as HTMLElement;
    expect(md.querySelectorAll("math").length).toBe(1);
    expect(md.textContent?.split("once more").length).toBe(2);
    expect(md.textContent?.trim().endsWith("then once more")).toBe(true);
    model.delta("a1", 3, " and on");
    frames.frame();
    expect(md.textContent?.split("once more").length).toBe(2);
    expect(md.textContent?.trim().endsWith("then once more and on")).toBe(true);
  });

  it("a closed code block naming a language asks for the highlighting chunk and waits for it", () => {
    const { el, idle, frames } = chatWith(
      "Code:\n\n```python\ndef f(x):\n    return x\n```\n\n```\nno language\n```\n",
    );
    expect(requests).toEqual(["highlight"]);
    idle.run();
    expect(el.querySelector("code.hljs")).toBeNull(); // not before the chunk
    provideChunk("highlight", highlight);
    frames.frame(); // rendered again in the next frame
    idle.run();
    const code = el.querySelector("code.language-python") as HTMLElement;
    expect(code.classList.contains("hljs")).toBe(true);
    expect(code.querySelector(".hljs-keyword")?.textContent).toBe("def");
    expect(el.querySelectorAll("code.hljs").length).toBe(1); // the unnamed block stays plain
  });

  it("a code block with no language asks for nothing", () => {
    chatWith("```\nplain block\n```\n\n    indented code\n");
    expect(requests).toEqual([]);
  });

  it("a chunk asked for before its host is set is asked for once the host is there", () => {
    resetChunks();
    expect(chunk("math")).toBeNull();
    const later: ChunkName[] = [];
    setChunkHost({ request: (name) => later.push(name) });
    expect(later).toEqual(["math"]);
  });
});
