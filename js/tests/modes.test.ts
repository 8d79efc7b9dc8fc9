// @vitest-environment jsdom
// The layouts other than the chat: "stream" (StreamView, nbstream.stream()) and
// "compare" (Compare). Same buffer, frame loop and rendering as the chat; only
// the layout and the commands differ.
import { afterEach, describe, expect, it } from "vitest";
import { type ChatRoot, mountChat } from "../src/chat";
import widget from "../src/index";
import type { ChatTraits, MessageState } from "../src/protocol";
import { FakeFrames, FakeModel, message } from "./fakes";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
  document.body.textContent = "";
});

const mount = (messages: MessageState[], traits: Partial<ChatTraits>) => {
  const model = new FakeModel({ conversation: messages, ...traits });
  const frames = new FakeFrames();
  const el = document.createElement("div");
  document.body.appendChild(el);
  cleanups.push(mountChat(model, el, { scheduler: frames, now: () => 0, idle: null }));
  const $ = <T extends Element = HTMLElement>(sel: string, from: ParentNode = el) =>
    from.querySelector(sel) as T;
  const set = (list: MessageState[]) => {
    model.set("conversation", list);
    frames.frame();
  };
  return { model, frames, el, $, set, root: $<ChatRoot>(".nbs-chat") };
};

const key = (target: HTMLElement, k: string, init: KeyboardEventInit = {}) => {
  const ev = new KeyboardEvent("keydown", { key: k, bubbles: true, cancelable: true, ...init });
  target.dispatchEvent(ev);
  return ev;
};

describe("mode stream", () => {
  const prompt = message("m1", { role: "user", status: "done", text: "Write a haiku" });

  it("has no input box, shows the prompt and the one answer", () => {
    const v = mount([prompt, message("m2", { status: "running" })], {
      mode: "stream",
      source_label: "scripted",
    });
    expect(v.root.dataset.mode).toBe("stream");
    expect(v.root.classList.contains("nbs-mode-stream")).toBe(true);
    expect(v.el.querySelector("textarea, .nbs-input, .nbs-form, .nbs-send")).toBeNull();
    expect(v.el.querySelector(".nbs-regenerate, .nbs-clear")).toBeNull();
    const ids = [...v.el.querySelectorAll(".nbs-message")].map((m) => m.getAttribute("data-id"));
    expect(ids).toEqual(["m1", "m2"]);
    expect(v.$('.nbs-message[data-role="user"] .nbs-text').textContent).toBe("Write a haiku");
  });

  it("streams deltas into the answer, one DOM update per frame", () => {
    const v = mount([prompt, message("m2", { status: "running" })], { mode: "stream" });
    v.model.delta("m2", 1, "Old pond, ");
    v.model.delta("m2", 2, "a frog jumps in; ");
    expect(v.frames.pending).toBe(1);
    v.frames.frame();
    v.model.delta("m2", 3, "**splash**.");
    v.frames.frame();
    const answer = v.$('.nbs-message[data-id="m2"]');
    expect(answer.querySelector(".nbs-text")?.textContent?.trim()).toBe(
      "Old pond, a frog jumps in; splash.",
    );
    expect(answer.querySelector("strong")?.textContent).toBe("splash");
    expect(v.root.__nbstream.renders).toBe(2);
    // the first delta rendered is acked at once; the rest by the next round of
    // acks, one gap later (sparse acks: frame.ts, tests/ack.test.ts)
    expect(v.model.drain("acks").flatMap((m) => m.acks.map((a) => a.seq))).toEqual([2]);
  });

  it("shows Stop only while the answer is live; Stop and Escape stop it", () => {
    const v = mount([message("m1", { status: "running" })], { mode: "stream" });
    const stop = v.$<HTMLButtonElement>("button.nbs-stop");
    const header = v.$(".nbs-header");
    expect(stop.hidden).toBe(false);
    expect(header.hidden).toBe(false); // no title, but the Stop button lives there
    v.model.drain("hello");
    stop.click();
    expect(v.model.drain("stop")).toEqual([{ kind: "stop" }]);
    key(v.$(".nbs-messages"), "Escape");
    expect(v.model.drain("stop")).toEqual([{ kind: "stop" }]);
    v.set([message("m1", { status: "stopped", text: "partial", seq: 1 })]);
    expect(stop.hidden).toBe(true);
    expect(header.hidden).toBe(true);
    expect(key(v.$(".nbs-messages"), "Escape").defaultPrevented).toBe(false);
    expect(v.model.drain("stop")).toEqual([]);
  });

  it("has a copy button on the answer and a status line with the kernel's figures", () => {
    const v = mount(
      [message("m1", { status: "done", text: "All *done*", seq: 2, stats: { tokens: 2 } })],
      { mode: "stream", title: "Summary" },
    );
    const answer = v.$('.nbs-message[data-id="m1"]');
    expect(answer.querySelector<HTMLButtonElement>("button.nbs-copy-msg")?.hidden).toBe(false);
    expect(answer.querySelector(".nbs-status")?.textContent).toBe("done · 2 tokens");
    expect(v.$(".nbs-title").textContent).toBe("Summary");
    expect(v.$<HTMLButtonElement>("button.nbs-stop").hidden).toBe(true);
  });
});

describe("mode compare", () => {
  const panes = [{ label: "small" }, { label: "large" }];
  const round = (over: Partial<MessageState> = {}): MessageState[] => [
    message("m1", { role: "user", status: "done", text: "Why is the sky blue?" }),
    message("m2", { pane: 0, ...over }),
    message("m3", { pane: 1, ...over }),
  ];
  const pane = (v: ReturnType<typeof mount>, i: number) =>
    v.$<HTMLElement>(`.nbs-pane[data-pane="${i}"]`);
  const texts = (el: HTMLElement) =>
    [...el.querySelectorAll(".nbs-message")].map((m) => [
      m.getAttribute("data-id"),
      m.querySelector(".nbs-text")?.textContent?.trim(),
    ]);

  it("lays out one labelled column per pane and one shared input box", () => {
    const v = mount(round(), { mode: "compare", panes, placeholder: "Ask all" });
    expect(v.root.dataset.mode).toBe("compare");
    const columns = v.el.querySelectorAll(".nbs-panes > .nbs-pane");
    expect(columns.length).toBe(2);
    expect([...columns].map((c) => c.querySelector(".nbs-pane-label")?.textContent)).toEqual([
      "small",
      "large",
    ]);
    expect(pane(v, 1).getAttribute("aria-label")).toBe("large");
    expect(v.$(".nbs-panes").style.getPropertyValue("--nbs-pane-count")).toBe("2");
    expect(v.el.querySelectorAll("textarea.nbs-input").length).toBe(1);
    expect(v.$<HTMLTextAreaElement>("textarea.nbs-input").placeholder).toBe("Ask all");
    expect(v.el.querySelectorAll("button.nbs-pane-stop").length).toBe(2);
    expect(v.$("button.nbs-stop").textContent).toBe("Stop all");
    expect(v.el.querySelector(".nbs-regenerate")).toBeNull();
  });

  it("routes each pane's deltas to its own column; the prompt shows in both", () => {
    const v = mount(round(), { mode: "compare", panes });
    v.model.delta("m2", 1, "Rayleigh ");
    v.model.delta("m3", 1, "Because ");
    v.model.delta("m2", 2, "scattering.");
    v.frames.frame();
    v.model.delta("m3", 2, "of air.");
    v.frames.frame();
    expect(texts(pane(v, 0))).toEqual([
      ["m1", "Why is the sky blue?"],
      ["m2", "Rayleigh scattering."],
    ]);
    expect(texts(pane(v, 1))).toEqual([
      ["m1", "Why is the sky blue?"],
      ["m3", "Because of air."],
    ]);
    expect(pane(v, 0).querySelector('[data-id="m3"]')).toBeNull();
    expect(pane(v, 1).querySelector('[data-id="m2"]')).toBeNull();
    expect(pane(v, 1).querySelector('[data-id="m3"]')?.getAttribute("data-pane")).toBe("1");
  });

  it("shows each pane's own status in its head, and stops one pane or all", () => {
    const v = mount(round(), { mode: "compare", panes });
    v.model.drain("hello");
    const [stop0, stop1] = [0, 1].map((i) =>
      pane(v, i).querySelector<HTMLButtonElement>("button.nbs-pane-stop"),
    );
    const stopAll = v.$<HTMLButtonElement>("button.nbs-stop");
    expect([stop0?.disabled, stop1?.disabled, stopAll.disabled]).toEqual([false, false, false]);
    expect(pane(v, 0).querySelector(".nbs-pane-status")?.textContent).toBe(
      "waiting for first token…",
    );
    stop1?.click();
    expect(v.model.drain("stop")).toEqual([{ kind: "stop", pane: 1 }]);
    // pane 1 stops; pane 0 streams on
    v.set([
      ...round().slice(0, 2),
      message("m3", { pane: 1, status: "stopped", text: "Bec", seq: 1 }),
    ]);
    v.model.delta("m2", 1, "Rayleigh");
    v.frames.frame();
    expect(pane(v, 1).dataset.status).toBe("stopped");
    expect(pane(v, 1).querySelector(".nbs-pane-status")?.textContent).toBe("stopped");
    expect(pane(v, 0).dataset.status).toBe("running");
    expect(pane(v, 0).querySelector(".nbs-pane-status")?.textContent).toBe("streaming");
    expect([stop0?.disabled, stop1?.disabled, stopAll.disabled]).toEqual([false, true, false]);
    stop1?.click(); // nothing live there: nothing sent
    expect(v.model.drain("stop")).toEqual([]);
    stopAll.click();
    expect(v.model.drain("stop")).toEqual([{ kind: "stop" }]);
    key(v.$("textarea.nbs-input"), "Escape");
    expect(v.model.drain("stop")).toEqual([{ kind: "stop" }]);
    v.set([
      ...round().slice(0, 1),
      message("m2", { pane: 0, status: "done", text: "Rayleigh", seq: 1 }),
      message("m3", { pane: 1, status: "stopped", text: "Bec", seq: 1 }),
    ]);
    expect([stop0?.disabled, stop1?.disabled, stopAll.disabled]).toEqual([true, true, true]);
    expect(key(v.$("textarea.nbs-input"), "Escape").defaultPrevented).toBe(false);
  });

  it("Enter sends the prompt once, for every pane", () => {
    const v = mount([], { mode: "compare", panes });
    v.model.drain("hello");
    const input = v.$<HTMLTextAreaElement>("textarea.nbs-input");
    input.value = "Compare these";
    input.dispatchEvent(new Event("input"));
    key(input, "Enter");
    expect(v.model.sent).toEqual([{ kind: "send", text: "Compare these" }]);
    expect(input.value).toBe("");
  });

  it("adds a pane that a message names before the panes trait does, with the prompts", () => {
    const v = mount(round(), { mode: "compare", panes });
    v.set([...round(), message("m4", { pane: 2, text: "third", seq: 1 })]);
    expect(v.el.querySelectorAll(".nbs-pane").length).toBe(3);
    expect(texts(pane(v, 2))).toEqual([
      ["m1", "Why is the sky blue?"],
      ["m4", "third"],
    ]);
    expect(pane(v, 2).querySelector(".nbs-pane-label")?.textContent).toBe("Pane 3");
    v.model.set("panes", [...panes, { label: "huge" }]);
    expect(pane(v, 2).querySelector(".nbs-pane-label")?.textContent).toBe("huge");
  });

  it("a later panes trait adds columns that show the prompts at once", () => {
    const v = mount(round(), { mode: "compare", panes: [] });
    v.frames.frame();
    expect(v.el.querySelectorAll(".nbs-pane").length).toBe(2);
    v.model.set("panes", [...panes, { label: "third" }]);
    expect(v.el.querySelectorAll(".nbs-pane").length).toBe(3);
    expect(texts(pane(v, 2))).toEqual([["m1", "Why is the sky blue?"]]);
  });

  it("a reply without a pane goes to the first", () => {
    const v = mount(
      [message("m1", { role: "user", status: "done", text: "q" }), message("m2", { text: "a" })],
      { mode: "compare", panes },
    );
    expect(texts(pane(v, 0))).toEqual([
      ["m1", "q"],
      ["m2", "a"],
    ]);
    expect(texts(pane(v, 1))).toEqual([["m1", "q"]]);
  });

  it("a saved compare renders at once, and cleans up", () => {
    const model = new FakeModel({
      mode: "compare",
      panes,
      conversation: round({ status: "done", text: "answer", seq: 3 }),
    });
    const el = document.createElement("div");
    const cleanup = widget.render({ model, el } as never) as () => void;
    expect(el.querySelectorAll(".nbs-pane .nbs-md").length).toBe(2);
    expect(el.querySelector('.nbs-pane[data-pane="1"] [data-id="m3"]')?.textContent).toContain(
      "answer",
    );
    cleanup();
    expect(el.children.length).toBe(0);
    expect(model.listenerCount()).toBe(0);
  });
});

describe("mode", () => {
  it("an unknown mode lays out as a chat", () => {
    const v = mount([], { mode: "something-new" });
    expect(v.root.dataset.mode).toBe("chat");
    expect(v.el.querySelector("textarea.nbs-input")).not.toBeNull();
  });
});
