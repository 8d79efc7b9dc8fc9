// @vitest-environment jsdom
import { afterEach, describe, expect, it } from "vitest";
import type { Entry } from "../src/buffer";
import { type ChatRoot, mountChat } from "../src/chat";
import widget from "../src/index";
import type { MessageState } from "../src/protocol";
import { statusLabel } from "../src/status";
import { FakeFrames, FakeModel, message } from "./fakes";

const HOSTILE = `<img src=x onerror=alert(1)><script>alert(2)</script><a href="javascript:x" data-commandlinker-command="notebook:run-all-cells">click</a>`;

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
  document.body.textContent = "";
});

const mount = (messages: MessageState[] = [], traits: Record<string, string> = {}) => {
  const model = new FakeModel({ conversation: messages, ...traits });
  const frames = new FakeFrames();
  const el = document.createElement("div");
  document.body.appendChild(el);
  const cleanup = mountChat(model, el, { scheduler: frames, now: () => 0 });
  cleanups.push(cleanup);
  const $ = <T extends Element = HTMLElement>(sel: string) => el.querySelector(sel) as T;
  const msg = (id: string) => $(`.nbs-message[data-id="${id}"]`);
  return {
    model,
    frames,
    el,
    cleanup,
    $,
    msg,
    root: $<ChatRoot>(".nbs-chat"),
    input: $<HTMLTextAreaElement>("textarea.nbs-input"),
    stop: $<HTMLButtonElement>("button.nbs-stop"),
    send: $<HTMLButtonElement>("button.nbs-send"),
    status: (id: string) => msg(id)?.querySelector(".nbs-status")?.textContent,
    text: (id: string) => msg(id)?.querySelector(".nbs-text")?.textContent,
  };
};

const key = (target: HTMLElement, k: string, init: KeyboardEventInit = {}) => {
  const ev = new KeyboardEvent("keydown", { key: k, bubbles: true, cancelable: true, ...init });
  target.dispatchEvent(ev);
  return ev;
};

describe("render", () => {
  it("says hello, and shows the conversation at once with our attributes", () => {
    const v = mount([
      message("u1", { role: "user", status: "done", text: "Hi?" }),
      message("a1", { status: "done", text: "Hello!", seq: 3, stats: { tokens: 3 } }),
    ]);
    expect(v.model.sent).toEqual([{ kind: "hello", view: expect.stringMatching(/^v[0-9a-z]+$/) }]);
    expect(v.root.className).toBe("nbs-chat");
    expect(
      [...v.el.querySelectorAll(".nbs-messages > .nbs-message")].map((m) =>
        m.getAttribute("data-id"),
      ),
    ).toEqual(["u1", "a1"]);
    expect(v.msg("u1")).toMatchObject({ dataset: { role: "user", status: "done" } });
    expect(v.msg("a1")).toMatchObject({ dataset: { role: "assistant", status: "done" } });
    expect(v.text("u1")).toBe("Hi?");
    expect(v.text("a1")?.trim()).toBe("Hello!");
    expect(v.msg("a1").querySelector(".nbs-text.nbs-md")?.innerHTML).toBe("<p>Hello!</p>\n");
    expect(v.msg("u1").querySelector(".nbs-text")?.classList.contains("nbs-md")).toBe(false);
    expect(v.status("a1")).toBe("done · 3 tokens");
    expect(v.frames.pending).toBe(0);
  });

  it("works with no traits at all", () => {
    const model = new FakeModel();
    const el = document.createElement("div");
    const cleanup = widget.render({ model, el } as never) as () => void;
    expect(el.querySelector(".nbs-header")?.hasAttribute("hidden")).toBe(true);
    expect(el.querySelectorAll(".nbs-message").length).toBe(0);
    expect((el.querySelector(".nbs-input") as HTMLTextAreaElement).placeholder).toBe("Message");
    expect(widget.initialize({ model } as never)).toBeUndefined();
    cleanup();
    expect(el.children.length).toBe(0);
  });

  it("shows the title, source label and placeholder, and follows their changes", () => {
    const v = mount([], { title: "Tutor", source_label: "SmolLM2-135M (cpu)", placeholder: "Ask" });
    expect(v.$(".nbs-title").textContent).toBe("Tutor");
    expect(v.$(".nbs-source").textContent).toBe("SmolLM2-135M (cpu)");
    expect(v.$(".nbs-header").hidden).toBe(false);
    expect(v.input.placeholder).toBe("Ask");
    v.model.set("title", "");
    v.model.set("source_label", "");
    v.model.set("placeholder", "");
    expect(v.$(".nbs-header").hidden).toBe(true);
    expect(v.input.placeholder).toBe("Message");
  });
});

describe("untrusted text", () => {
  it("hostile text in state, deltas and error details stays literal text", () => {
    const v = mount([message("a", { text: HOSTILE, seq: 1 })], { title: HOSTILE });
    v.model.delta("a", 2, HOSTILE);
    v.frames.frame();
    v.model.set("conversation", [
      message("a", {
        text: HOSTILE + HOSTILE,
        seq: 2,
        status: "error",
        error: HOSTILE,
        detail: HOSTILE,
      }),
    ]);
    v.frames.frame();
    // raw HTML in the Markdown is escaped: shown as the text it is
    expect(v.text("a")?.trim()).toBe(HOSTILE + HOSTILE);
    expect(v.status("a")).toBe(`error: ${HOSTILE}`);
    expect(v.msg("a").querySelector("details pre")?.textContent).toBe(HOSTILE);
    expect(v.$(".nbs-title").textContent).toBe(HOSTILE);
    expect(
      v.el.querySelector("img, script, a, [onerror], [data-commandlinker-command]"),
    ).toBeNull();
    const tags = new Set([...v.el.querySelectorAll("*")].map((e) => e.tagName));
    expect([...tags].sort()).toEqual([
      "BUTTON",
      "DETAILS",
      "DIV",
      "INPUT", // the composer's file picker (hidden; composer.ts)
      "P",
      "PRE",
      "SPAN",
      "SUMMARY",
      "TEXTAREA",
    ]);
  });
});

describe("input", () => {
  it("Enter sends the text and clears the input; Shift+Enter does not", () => {
    const v = mount();
    v.model.drain("hello");
    v.input.value = "first line";
    const shift = key(v.input, "Enter", { shiftKey: true });
    expect(shift.defaultPrevented).toBe(false);
    expect(v.model.sent).toEqual([]);
    v.input.value = "  first line\nsecond  ";
    const enter = key(v.input, "Enter");
    expect(enter.defaultPrevented).toBe(true);
    expect(v.model.drain("send")).toEqual([{ kind: "send", text: "first line\nsecond" }]);
    expect(v.input.value).toBe("");
  });

  it("Enter and Shift+Enter do not reach JupyterLab's shortcuts", () => {
    const v = mount();
    let reached = 0;
    v.el.addEventListener("keydown", () => reached++);
    v.input.value = "x";
    key(v.input, "Enter", { shiftKey: true });
    key(v.input, "Enter");
    expect(reached).toBe(0);
  });

  it("does not send empty input, or while an input method composes", () => {
    const v = mount();
    v.model.drain("hello");
    v.input.value = "  \n ";
    key(v.input, "Enter");
    v.send.click();
    v.input.value = "かな";
    key(v.input, "Enter", { isComposing: true });
    expect(v.model.sent).toEqual([]);
    expect(v.input.value).toBe("かな");
  });

  it("the Send button sends, and sending is allowed while a reply runs", () => {
    const v = mount([message("a", { status: "running" })]);
    v.model.drain("hello");
    v.input.value = "queue me";
    v.input.dispatchEvent(new Event("input"));
    v.send.click();
    expect(v.model.drain("send")).toEqual([{ kind: "send", text: "queue me" }]);
    expect(v.send.getAttribute("aria-label")).toBeTruthy();
    expect(v.send.textContent).toBe("Send");
  });

  it("Escape stops the widget (running and queued), and passes through when nothing runs", () => {
    const v = mount([
      message("a", { status: "done" }),
      message("b", { status: "running" }),
      message("c", { status: "queued" }),
    ]);
    v.model.drain("hello");
    const esc = key(v.input, "Escape");
    expect(esc.defaultPrevented).toBe(true);
    expect(v.model.drain("stop")).toEqual([{ kind: "stop" }]);
    v.model.set("conversation", [
      message("a", { status: "done" }),
      message("b", { status: "stopped" }),
      message("c", { status: "done" }),
    ]);
    const idle = key(v.input, "Escape");
    expect(idle.defaultPrevented).toBe(false);
    expect(v.model.sent).toEqual([]);
  });

  it("Stop is enabled only while a reply is queued, loading or running", () => {
    const v = mount([message("u", { role: "user", status: "done" })]);
    expect(v.stop.disabled).toBe(true);
    for (const status of ["queued", "loading", "running"] as const) {
      v.model.set("conversation", [
        message("u", { role: "user", status: "done" }),
        message("a", { status }),
      ]);
      v.frames.frame();
      expect(v.stop.disabled).toBe(false);
    }
    v.model.drain("hello");
    v.stop.click();
    expect(v.model.drain("stop")).toEqual([{ kind: "stop" }]);
    for (const status of ["done", "stopped", "error", "timeout"] as const) {
      v.model.set("conversation", [message("a", { status })]);
      v.frames.frame();
      expect(v.stop.disabled).toBe(true);
    }
    expect(v.stop.textContent).toBe("Stop");
  });
});

describe("status", () => {
  const entry = (over: Partial<MessageState>): Entry => message("m", over);

  it.each([
    [{ status: "queued" }, "queued"],
    [{ status: "loading" }, "loading model…"],
    [{ status: "running" }, "waiting for first token…"],
    [{ status: "running", text: "x" }, "streaming"],
    [{ status: "done" }, "done"],
    [
      { status: "done", stats: { tokens: 42, tokens_per_s: 19.96 } },
      "done · 42 tokens · 20.0 tokens/s",
    ],
    [
      { status: "done", stats: { ttft_ms: 123.4, pieces: 1234, pieces_per_s: 250.4 } },
      "done · TTFT 123 ms · 1,234 pieces · 250 pieces/s",
    ],
    [{ status: "done", stats: { ttft_ms: 2345, pieces: 1 } }, "done · TTFT 2.35 s · 1 piece"],
    [
      { status: "stopped", stats: { pieces: 7, pieces_per_s: 3.5 } },
      "stopped · 7 pieces · 3.5 pieces/s",
    ],
    [{ status: "done", stats: { tokens: 1, tokens_per_s: "fast" } }, "done · 1 token"],
    [{ status: "stopped", text: "part" }, "stopped"],
    [{ status: "error", error: "ValueError: bad" }, "error: ValueError: bad"],
    [{ status: "error" }, "error"],
    [{ status: "timeout", error: "no token for 30 s" }, "timeout: no token for 30 s"],
    [{ status: "paused" as never }, "paused"],
    [{ role: "user", status: "done" }, ""],
  ] as [Partial<MessageState>, string][])("%o -> %s", (over, label) => {
    expect(statusLabel(entry(over))).toBe(label);
  });

  it("labels follow the reply through its life; details only for errors", () => {
    const v = mount([message("a", { status: "queued" })]);
    expect(v.status("a")).toBe("queued");
    expect(v.msg("a").getAttribute("aria-busy")).toBe("true");
    v.model.set("conversation", [message("a", { status: "running" })]);
    v.frames.frame();
    expect(v.status("a")).toBe("waiting for first token…");
    v.model.delta("a", 1, "Hel");
    v.frames.frame();
    expect(v.status("a")).toBe("streaming");
    v.model.set("conversation", [
      message("a", {
        status: "error",
        text: "Hel",
        seq: 1,
        error: "RuntimeError: boom",
        detail: "Traceback…",
      }),
    ]);
    v.frames.frame();
    expect(v.status("a")).toBe("error: RuntimeError: boom");
    expect(v.msg("a").dataset.status).toBe("error");
    expect(v.msg("a").hasAttribute("aria-busy")).toBe(false);
    const details = v.msg("a").querySelector("details.nbs-detail") as HTMLDetailsElement;
    expect(details.open).toBe(false);
    expect(details.querySelector("pre")?.textContent).toBe("Traceback…");
  });

  it("announces status changes politely, not tokens, and not the history", () => {
    const v = mount([
      message("old", { status: "done", text: "x" }),
      message("a", { status: "queued" }),
    ]);
    const live = v.$(".nbs-live");
    expect(live.getAttribute("aria-live")).toBe("polite");
    expect(live.textContent).toBe("");
    v.model.set("conversation", [
      message("old", { status: "done", text: "x" }),
      message("a", { status: "running" }),
    ]);
    v.frames.frame();
    expect(live.textContent).toBe("waiting for first token…");
    for (let s = 1; s <= 5; s++) {
      v.model.delta("a", s, "tok ");
      v.frames.frame();
    }
    expect(live.textContent).toBe("waiting for first token…");
    v.model.set("conversation", [
      message("old", { status: "done", text: "x" }),
      message("a", { status: "done", text: "tok tok tok tok tok ", seq: 5, stats: { tokens: 5 } }),
    ]);
    v.frames.frame();
    expect(live.textContent).toBe("done · 5 tokens");
    expect(v.$(".nbs-messages").getAttribute("aria-live")).toBeNull();
  });

  it("announces the first reply of an empty chat", () => {
    const v = mount();
    v.model.set("conversation", [
      message("u", { role: "user", status: "done" }),
      message("a", { status: "queued" }),
    ]);
    v.frames.frame();
    expect(v.$(".nbs-live").textContent).toBe("queued");
  });
});

describe("list", () => {
  it("adds, removes and reorders message elements, keeping existing ones", () => {
    const v = mount([message("a", { text: "A" }), message("b", { text: "B" })]);
    const a = v.msg("a");
    v.model.set("conversation", [message("c", { text: "C" }), message("a", { text: "A" })]);
    v.frames.frame();
    const ids = [...v.el.querySelectorAll(".nbs-message")].map((m) => m.getAttribute("data-id"));
    expect(ids).toEqual(["c", "a"]);
    expect(v.msg("a")).toBe(a);
    expect(v.msg("b")).toBeNull();
  });

  it("sticks to the bottom while streaming unless the user scrolled up", () => {
    const v = mount([message("a")]);
    const list = v.$(".nbs-messages");
    let height = 1000;
    Object.defineProperty(list, "scrollHeight", { get: () => height });
    Object.defineProperty(list, "clientHeight", { get: () => 400 });
    const grow = (seq: number) => {
      height += 100;
      v.model.delta("a", seq, "more\n");
      v.frames.frame();
    };
    grow(1);
    // jsdom has no layout: the reply starts at the list's top and is taller than
    // the list, which stops there once (scroll.test.ts); back at the bottom, it follows
    expect(list.scrollTop).toBe(0);
    list.scrollTop = height - 400 - 10;
    list.dispatchEvent(new Event("scroll"));
    grow(2);
    expect(list.scrollTop).toBe(1200);
    list.scrollTop = 300; // the user scrolls up
    list.dispatchEvent(new Event("scroll"));
    grow(3);
    expect(list.scrollTop).toBe(300);
    list.scrollTop = height - 400 - 10; // back near the bottom
    list.dispatchEvent(new Event("scroll"));
    grow(4);
    expect(list.scrollTop).toBe(height);
  });
});

describe("cleanup", () => {
  it("removes the listeners, cancels the frame and the DOM", () => {
    const v = mount([message("a")]);
    expect(v.model.listenerCount()).toBe(10); // with attachment_policy (#21) and comm_live_update (connection.ts)
    v.model.delta("a", 1, "x");
    expect(v.frames.pending).toBe(1);
    v.cleanup();
    cleanups = [];
    // removed from the page: the kernel hears it, with the id of the hello
    const hello = v.model.sent[0] as { view: string };
    expect(v.model.sent.at(-1)).toEqual({ kind: "bye", view: hello.view });
    expect(v.model.listenerCount()).toBe(0);
    expect(v.frames.pending).toBe(0);
    expect(v.el.children.length).toBe(0);
    v.model.delta("a", 2, "y");
    expect(v.frames.pending).toBe(0);
  });

  it("says bye when its notebook closes, while the kernel can still hear it, and only once", () => {
    // JupyterLab's notebook widget manager: its document context's session is disposed
    // when the notebook tab closes, before the page's kernel connection (connection.ts)
    const slots = new Set<() => void>();
    const disposed = {
      connect: (slot: () => void) => slots.add(slot) !== null,
      disconnect: (slot: () => void) => slots.delete(slot),
    };
    const model = new FakeModel({ conversation: [message("a")] });
    Object.assign(model.widget_manager, { context: { sessionContext: { disposed } } });
    const el = document.createElement("div");
    document.body.appendChild(el);
    const cleanup = mountChat(model, el, { scheduler: new FakeFrames(), now: () => 0 });
    const hello = model.sent[0] as { kind: string; view: string };
    expect(hello.kind).toBe("hello");
    expect(slots.size).toBe(1);
    for (const slot of [...slots]) slot();
    expect(model.sent.filter((m) => m.kind === "bye")).toEqual([{ kind: "bye", view: hello.view }]);
    cleanup(); // the view removed after it: nothing more to say
    expect(model.sent.filter((m) => m.kind === "bye")).toHaveLength(1);
    expect(slots.size).toBe(0);
  });

  it("says a page's bye when its page unloads (a tab closed or a reload), then its own when removed", () => {
    const v = mount([message("a")]);
    const hello = v.model.sent[0] as { view: string };
    window.dispatchEvent(new Event("pagehide"));
    expect(v.model.sent.filter((m) => m.kind === "bye")).toEqual([
      { kind: "bye", view: hello.view, leaving: "page" },
    ]);
    v.cleanup();
    cleanups = [];
    expect(v.model.sent.filter((m) => m.kind === "bye")).toEqual([
      { kind: "bye", view: hello.view, leaving: "page" },
      { kind: "bye", view: hello.view },
    ]);
    window.dispatchEvent(new Event("pagehide")); // removed: its listener is gone
    expect(v.model.sent.filter((m) => m.kind === "bye")).toHaveLength(2);
  });

  it("ignores custom messages that are not deltas", () => {
    const v = mount([message("a")]);
    v.model.custom({ kind: "delta", id: "a", seq: 0, text: "x" });
    v.model.custom({ kind: "delta", id: "a", seq: 1 });
    v.model.custom({ kind: "other" });
    v.model.custom("text");
    expect(v.root.__nbstream.deltas).toBe(0);
    expect(v.frames.pending).toBe(0);
  });
});
