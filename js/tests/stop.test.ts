// @vitest-environment jsdom
// One meaning of Stop: in every layout, the Stop button and Escape ask the kernel to
// stop the widget (its running reply and its queued ones), never one reply by id, so
// a queued reply does not start after the user pressed Stop.
import { afterEach, describe, expect, it } from "vitest";
import { mountChat } from "../src/chat";
import type { ChatTraits, MessageState } from "../src/protocol";
import { FakeFrames, FakeModel, message } from "./fakes";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
  document.body.textContent = "";
});

const mount = (messages: MessageState[], traits: Partial<ChatTraits> = {}) => {
  const model = new FakeModel({ conversation: messages, ...traits });
  const frames = new FakeFrames();
  const el = document.createElement("div");
  document.body.appendChild(el);
  cleanups.push(mountChat(model, el, { scheduler: frames, now: () => 0, idle: null }));
  frames.frame();
  return { model, frames, el };
};

const pressEscape = (target: Element) => {
  const ev = new KeyboardEvent("keydown", { key: "Escape", bubbles: true, cancelable: true });
  target.dispatchEvent(ev);
  return ev;
};

const runningAndQueued = [
  message("m1", { role: "user", status: "done", text: "first" }),
  message("m2", { status: "running", text: "An", seq: 1 }),
  message("m3", { role: "user", status: "done", text: "second" }),
  message("m4", { status: "queued" }),
];

describe("Stop with a reply queued", () => {
  it("the chat's Stop button sends one stop for the whole widget", () => {
    const v = mount(runningAndQueued);
    const stop = v.el.querySelector<HTMLButtonElement>("button.nbs-stop");
    expect(stop).not.toBeNull();
    stop?.click();
    expect(v.model.drain("stop")).toEqual([{ kind: "stop" }]);
  });

  it("Escape sends the same stop", () => {
    const v = mount(runningAndQueued);
    const ev = pressEscape(v.el.querySelector(".nbs-messages") ?? v.el);
    expect(ev.defaultPrevented).toBe(true);
    expect(v.model.drain("stop")).toEqual([{ kind: "stop" }]);
  });

  it("only a queued reply left is still stopped", () => {
    const v = mount([
      message("m1", { role: "user", status: "done", text: "first" }),
      message("m2", { status: "queued" }),
    ]);
    pressEscape(v.el.querySelector(".nbs-messages") ?? v.el);
    expect(v.model.drain("stop")).toEqual([{ kind: "stop" }]);
  });

  it("nothing live: nothing is sent", () => {
    const v = mount([message("m2", { status: "stopped", text: "An", seq: 1 })]);
    expect(pressEscape(v.el.querySelector(".nbs-messages") ?? v.el).defaultPrevented).toBe(false);
    expect(v.model.drain("stop")).toEqual([]);
  });
});
