// @vitest-environment jsdom
// The chat UX around the messages: Markdown in replies, highlighting in idle
// time, copy buttons, image placeholders, following the bottom, regenerate and
// clear, Escape, and the status line with its live rate.
import { afterEach, describe, expect, it, vi } from "vitest";
import { type ChatRoot, mountChat } from "../src/chat";
import type { IdleDeadline, IdleScheduler } from "../src/highlight";
import { languages } from "../src/highlight";
import { MarkdownSink } from "../src/incremental";
import type { MessageState } from "../src/protocol";
import { LiveRate } from "../src/status";
import { FakeFrames, FakeModel, message } from "./fakes";

class FakeIdle implements IdleScheduler {
  private readonly callbacks = new Map<number, (d: IdleDeadline) => void>();
  private next = 1;
  request(cb: (d: IdleDeadline) => void): number {
    this.callbacks.set(this.next, cb);
    return this.next++;
  }
  cancel(h: number): void {
    this.callbacks.delete(h);
  }
  get pending(): number {
    return this.callbacks.size;
  }
  /** One idle period with `ms` to spare. */
  run(ms = 50): void {
    const due = [...this.callbacks.values()];
    this.callbacks.clear();
    for (const cb of due) cb({ timeRemaining: () => ms });
  }
}

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
  document.body.textContent = "";
  vi.restoreAllMocks();
});

const mount = (messages: MessageState[] = []) => {
  const model = new FakeModel({ conversation: messages });
  const frames = new FakeFrames();
  const idle = new FakeIdle();
  let t = 0;
  const clock = { advance: (ms: number) => (t += ms) };
  const el = document.createElement("div");
  document.body.appendChild(el);
  cleanups.push(mountChat(model, el, { scheduler: frames, now: () => t, idle }));
  model.drain("hello");
  const $ = <T extends Element = HTMLElement>(sel: string) => el.querySelector(sel) as T;
  const msg = (id: string) => $(`.nbs-message[data-id="${id}"]`);
  const set = (list: MessageState[]) => {
    model.set("conversation", list);
    frames.frame();
  };
  return {
    model,
    frames,
    idle,
    clock,
    el,
    $,
    msg,
    set,
    root: $<ChatRoot>(".nbs-chat"),
    input: $<HTMLTextAreaElement>("textarea.nbs-input"),
    button: (name: string) => $<HTMLButtonElement>(`button.nbs-${name}`),
    status: (id: string) => msg(id)?.querySelector(".nbs-status") as HTMLElement,
  };
};

const CODE = "Intro\n\n```python\ndef f():\n    return 1\n```\n\nAfter.\n";

describe("replies are Markdown", () => {
  it("renders a streamed reply incrementally; code is highlighted in idle time once closed", () => {
    const v = mount([message("a", { status: "running" })]);
    const seq = { n: 0 };
    const delta = (text: string) => {
      v.model.delta("a", ++seq.n, text);
      v.frames.frame();
    };
    delta("Intro\n\n```python\ndef f():\n");
    expect(v.msg("a").querySelector("p")?.textContent).toBe("Intro");
    expect(v.msg("a").querySelector("pre code")?.textContent).toBe("def f():\n");
    v.idle.run();
    expect(v.msg("a").querySelector(".hljs")).toBeNull(); // open: not highlighted
    delta("    return 1\n```\n\nAfter.\n\nMore\n");
    expect(v.idle.pending).toBe(1);
    expect(v.msg("a").querySelector(".hljs")).toBeNull(); // not before idle time
    v.idle.run();
    const code = v.msg("a").querySelector("pre > code.hljs") as HTMLElement;
    expect(code.querySelector(".hljs-keyword")?.textContent).toBe("def");
    expect(code.textContent).toBe("def f():\n    return 1\n");
  });

  it("highlights a finished reply's last block, and only known languages", () => {
    const v = mount([
      message("a", { status: "done", text: "```js\nlet x = 1;\n```\n\n```nolang\nx\n```" }),
    ]);
    v.idle.run(0); // even an idle period with no time left highlights one block
    expect(v.msg("a").querySelectorAll(".hljs").length).toBe(1);
    expect(v.msg("a").querySelector("code.language-nolang")?.classList.contains("hljs")).toBe(
      false,
    );
    expect(languages()).toEqual(expect.arrayContaining(["python", "javascript", "bash", "json"]));
  });

  it("user messages stay plain text", () => {
    const v = mount([message("u", { role: "user", status: "done", text: "**not bold**" })]);
    expect(v.msg("u").querySelector("strong")).toBeNull();
    expect(v.msg("u").querySelector(".nbs-text")?.textContent).toBe("**not bold**");
  });
});

describe("a renderer that fails", () => {
  it("falls back to plain text for that message, and the chat goes on", () => {
    const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const v = mount([message("a", { status: "running" }), message("b", { status: "running" })]);
    vi.spyOn(MarkdownSink.prototype, "append").mockImplementationOnce(() => {
      throw new Error("boom");
    });
    v.model.delta("a", 1, "**one** ");
    v.frames.frame();
    v.model.delta("a", 2, "two");
    v.model.delta("b", 1, "**fine**");
    v.frames.frame();
    expect(error).toHaveBeenCalledTimes(1);
    expect(v.msg("a").querySelector(".nbs-text")?.textContent).toBe("**one** two");
    expect(v.msg("a").querySelector(".nbs-md, strong")).toBeNull();
    expect(v.msg("b").querySelector("strong")?.textContent).toBe("fine");
    expect(v.root.__nbstream.chars).toBe("**one** two".length + "**fine**".length);
  });
});

describe("copy buttons", () => {
  it("copy a code block's code and a reply's Markdown, then say so for a moment", async () => {
    vi.useFakeTimers();
    const writes: string[] = [];
    Object.defineProperty(navigator, "clipboard", {
      configurable: true,
      value: {
        writeText: (s: string) => {
          writes.push(s);
          return Promise.resolve();
        },
      },
    });
    try {
      const v = mount([message("a", { status: "done", text: CODE })]);
      const codeButton = v.msg("a").querySelector("button.nbs-copy-code") as HTMLButtonElement;
      expect(codeButton.getAttribute("aria-label")).toBe("Copy code");
      codeButton.click();
      await vi.waitFor(() => expect(writes).toEqual(["def f():\n    return 1\n"]));
      await vi.waitFor(() => expect(codeButton.classList.contains("nbs-copied")).toBe(true));
      expect(codeButton.getAttribute("aria-label")).toBe("Copied");
      expect(codeButton.textContent).toBe(""); // its label is CSS-generated
      const copyMsg = v.msg("a").querySelector("button.nbs-copy-msg") as HTMLButtonElement;
      expect(copyMsg.hidden).toBe(false);
      copyMsg.click();
      await vi.waitFor(() => expect(writes[1]).toBe(CODE));
      await vi.waitFor(() => expect(copyMsg.textContent).toBe("Copied"));
      vi.advanceTimersByTime(2000);
      expect(codeButton.classList.contains("nbs-copied")).toBe(false);
      expect(codeButton.getAttribute("aria-label")).toBe("Copy code");
      expect(copyMsg.textContent).toBe("Copy");
    } finally {
      vi.useRealTimers();
      Reflect.deleteProperty(navigator, "clipboard");
    }
  });
});

describe("images", () => {
  it("load only when the user clicks their placeholder, without a referrer", () => {
    const v = mount([
      message("a", {
        status: "done",
        text: "![chart](https://img.example/c.png) and ![x](data:image/gif;base64,R0lGOD)\n",
      }),
    ]);
    expect(v.el.querySelector("img")).toBeNull();
    const [first, second] = v.el.querySelectorAll<HTMLButtonElement>("button.nbs-img");
    first?.click();
    const img = v.el.querySelector("img.nbs-img-loaded") as HTMLImageElement;
    expect(img.getAttribute("src")).toBe("https://img.example/c.png");
    expect(img.alt).toBe("chart");
    expect(img.referrerPolicy).toBe("no-referrer");
    second?.click();
    expect(v.el.querySelectorAll("img").length).toBe(2);
  });
});

describe("following the bottom", () => {
  it("stops following when the user scrolls up, offers a jump, and follows again", () => {
    const v = mount([message("a")]);
    const list = v.$(".nbs-messages");
    const jump = v.button("jump");
    let height = 1000;
    Object.defineProperty(list, "scrollHeight", { get: () => height });
    Object.defineProperty(list, "clientHeight", { get: () => 400 });
    let seq = 0;
    const grow = () => {
      height += 100;
      v.model.delta("a", ++seq, "more\n\n");
      v.frames.frame();
    };
    // jsdom has no layout: the reply starts at the list's top, so it is taller
    // than the list, which stops at its top (scroll.test.ts covers that rule)
    grow();
    expect(list.scrollTop).toBe(0);
    expect(jump.hidden).toBe(false);
    jump.click(); // and from there on follows it to its end
    grow();
    expect(list.scrollTop).toBe(1200);
    expect(jump.hidden).toBe(true);
    list.scrollTop = 300;
    list.dispatchEvent(new Event("scroll"));
    expect(jump.hidden).toBe(false);
    grow();
    expect(list.scrollTop).toBe(300);
    jump.click();
    expect(list.scrollTop).toBe(height);
    expect(jump.hidden).toBe(true);
    grow();
    expect(list.scrollTop).toBe(height);
    // text that grew before the view scrolled does not count as the user scrolling
    list.dispatchEvent(new Event("scroll"));
    grow();
    expect(list.scrollTop).toBe(height);
  });
});

describe("actions and their disabled states", () => {
  it("Send is enabled only with something to send", () => {
    const v = mount();
    const send = v.button("send");
    expect(send.disabled).toBe(true);
    v.input.value = "hi";
    v.input.dispatchEvent(new Event("input"));
    expect(send.disabled).toBe(false);
    send.click();
    expect(v.model.drain("send")).toEqual([{ kind: "send", text: "hi" }]);
    expect(send.disabled).toBe(true);
  });

  it("Regenerate needs a finished reply; Clear needs a conversation", () => {
    const v = mount();
    const regenerate = v.button("regenerate");
    const clear = v.button("clear");
    expect([regenerate.disabled, clear.disabled]).toEqual([true, true]);
    v.set([message("u", { role: "user", status: "done" }), message("a", { status: "running" })]);
    expect([regenerate.disabled, clear.disabled]).toEqual([true, false]);
    v.set([message("u", { role: "user", status: "done" }), message("a", { status: "done" })]);
    expect([regenerate.disabled, clear.disabled]).toEqual([false, false]);
    regenerate.click();
    clear.click();
    expect(v.model.sent).toEqual([{ kind: "regenerate" }, { kind: "clear" }]);
    expect(regenerate.getAttribute("aria-label")).toBe("Regenerate the last answer");
    expect(clear.getAttribute("aria-label")).toBe("Clear the conversation");
    v.set([]);
    expect([regenerate.disabled, clear.disabled]).toEqual([true, true]);
    expect(v.el.querySelectorAll(".nbs-message").length).toBe(0);
    expect(v.root.__nbstream.chars).toBe(0);
  });

  it("Escape anywhere in the widget stops the running reply", () => {
    const v = mount([message("a", { status: "running" })]);
    const list = v.$(".nbs-messages");
    const ev = new KeyboardEvent("keydown", { key: "Escape", bubbles: true, cancelable: true });
    list.dispatchEvent(ev);
    expect(ev.defaultPrevented).toBe(true);
    expect(v.model.drain("stop")).toEqual([{ kind: "stop" }]);
  });

  it("every button has a label", () => {
    const v = mount([message("a", { status: "done", text: CODE })]);
    for (const b of v.el.querySelectorAll("button")) {
      expect(b.getAttribute("aria-label") || b.textContent).toBeTruthy();
    }
  });
});

describe("status line", () => {
  it("shows a working indicator, then a live rate, then the kernel's figures", () => {
    const v = mount([message("a", { status: "queued" })]);
    expect(v.status("a").classList.contains("nbs-waiting")).toBe(true);
    v.set([message("a", { status: "loading" })]);
    expect(v.status("a").textContent).toBe("loading model…");
    v.set([message("a", { status: "running" })]);
    expect(v.status("a").textContent).toBe("waiting for first token…");
    expect(v.status("a").classList.contains("nbs-waiting")).toBe(true);
    for (let s = 1; s <= 20; s++) {
      v.clock.advance(100);
      v.model.delta("a", s, "x".repeat(25)); // 250 chars/s
      v.frames.frame();
    }
    expect(v.status("a").classList.contains("nbs-waiting")).toBe(false);
    expect(v.status("a").textContent).toBe("streaming · ≈ 250 chars/s");
    expect(v.$(".nbs-live").textContent).toBe("waiting for first token…"); // no flood
    v.set([
      message("a", {
        status: "done",
        text: "x".repeat(500),
        seq: 20,
        stats: { ttft_ms: 80, pieces: 100, pieces_per_s: 50 },
      }),
    ]);
    expect(v.status("a").textContent).toBe("done · TTFT 80 ms · 100 pieces · 50.0 pieces/s");
    expect(v.$(".nbs-live").textContent).toBe("done · TTFT 80 ms · 100 pieces · 50.0 pieces/s");
  });

  it("the live rate covers the last two seconds", () => {
    const r = new LiveRate();
    expect(r.perSecond()).toBeNull();
    r.add(0, 10);
    r.add(100, 10);
    expect(r.perSecond()).toBeNull(); // under 250 ms of data
    for (let t = 200; t <= 5000; t += 100) r.add(t, t < 3000 ? 10 : 50);
    expect(r.perSecond()).toBeCloseTo(500, 0);
  });
});
