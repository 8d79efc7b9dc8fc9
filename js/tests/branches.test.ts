// @vitest-environment jsdom
// Branches in the view: the branch through `current` is shown, `‹ 2 / 3 ›` switches
// (by asking the kernel), Edit asks a question anew, and an older state (no parents)
// shows every message as before.
import { afterEach, describe, expect, it } from "vitest";
import { visibleBranch } from "../src/branches";
import { mountChat } from "../src/chat";
import { FakeFrames, FakeModel } from "./fakes";

describe("visibleBranch", () => {
  it("an older state (no parents) is a chain: every message, no switch", () => {
    const b = visibleBranch([{ id: "m1" }, { id: "m2" }, { id: "m3" }], null);
    expect(b.order).toEqual(["m1", "m2", "m3"]);
    expect(b.siblings.size).toBe(0);
  });

  it("the path to current, with each message's place among its alternatives", () => {
    const nodes = [
      { id: "m1", parent: null },
      { id: "m2", parent: "m1" },
      { id: "m3", parent: "m2" },
      { id: "m4", parent: "m3" },
      { id: "m5", parent: "m2" }, // an edited m3
      { id: "m6", parent: "m5" },
      { id: "m7", parent: "m5" }, // a regenerated m6
    ];
    const b = visibleBranch(nodes, "m6");
    expect(b.order).toEqual(["m1", "m2", "m5", "m6"]);
    expect(b.siblings.get("m5")).toEqual({ index: 2, count: 2, prev: "m3", next: null });
    expect(b.siblings.get("m6")).toEqual({ index: 1, count: 2, prev: null, next: "m7" });
    expect(b.siblings.has("m1")).toBe(false);
    expect(visibleBranch(nodes, "m4").order).toEqual(["m1", "m2", "m3", "m4"]);
    // current not known (yet): the newest message's branch
    expect(visibleBranch(nodes, "m99").order).toEqual(["m1", "m2", "m5", "m7"]);
    // roots are siblings too (the first question edited)
    const roots = visibleBranch([...nodes, { id: "m8", parent: null }], "m8");
    expect(roots.order).toEqual(["m8"]);
    expect(roots.siblings.get("m8")).toEqual({ index: 2, count: 2, prev: "m1", next: null });
  });
});

describe("the chat view", () => {
  let cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanups) c();
    cleanups = [];
    document.body.textContent = "";
  });

  const user = (text: string, parent: string | null) => ({
    role: "user",
    seq: 0,
    status: "done",
    stats: {},
    text,
    parent,
  });
  const answer = (parent: string, status = "done", seq = 1) => ({
    role: "assistant",
    seq,
    status,
    stats: {},
    parent,
    ...(status === "done" ? { finish_reason: "stop" } : {}),
  });

  const mount = (state: Record<string, unknown>) => {
    const model = new FakeModel(state as never);
    const frames = new FakeFrames();
    const el = document.createElement("div");
    document.body.appendChild(el);
    cleanups.push(mountChat(model, el, { scheduler: frames, now: () => 0, idle: null }));
    const ids = () =>
      [...el.querySelectorAll<HTMLElement>(".nbs-message")].map((m) => m.dataset.id);
    const msg = (id: string) => el.querySelector(`.nbs-message[data-id="${id}"]`) as HTMLElement;
    const text = (id: string) => msg(id).querySelector(".nbs-text")?.textContent?.trim();
    const pos = (id: string) => msg(id).querySelector(".nbs-branch-pos")?.textContent ?? null;
    return { model, frames, el, ids, msg, text, pos };
  };

  // q (m1) answered twice: m2, then regenerated m3, which shows
  const regenerated = () => ({
    last_id: 3,
    live: {},
    removed: 0,
    current: "m3",
    m1: user("q", null),
    m2: answer("m1"),
    "m2.1": "first answer",
    m3: answer("m1"),
    "m3.1": "second answer",
  });

  it("shows the branch through current, and ‹ › asks the kernel to switch", () => {
    const v = mount(regenerated());
    expect(v.ids()).toEqual(["m1", "m3"]);
    expect(v.text("m3")).toBe("second answer");
    expect(v.pos("m3")).toBe("2 / 2");
    expect(v.pos("m1")).toBeNull();
    const prev = v.msg("m3").querySelector("button.nbs-branch-prev") as HTMLButtonElement;
    const next = v.msg("m3").querySelector("button.nbs-branch-next") as HTMLButtonElement;
    expect([prev.disabled, next.disabled]).toEqual([false, true]);
    prev.click();
    expect(v.model.sent.at(-1)).toEqual({ kind: "switch", id: "m2" });
    // the kernel's answer: the other branch, painted whole
    v.model.update({ current: "m2" });
    v.frames.frame();
    expect(v.ids()).toEqual(["m1", "m2"]);
    expect(v.text("m2")).toBe("first answer");
    expect(v.pos("m2")).toBe("1 / 2");
  });

  it("a reply streaming in the branch not shown appears whole when switched to", () => {
    const state = regenerated();
    const v = mount({ ...state, m2: answer("m1", "running", 1), live: { m2: 1 } });
    v.model.update({ "m2.2": " goes on", m2: answer("m1", "running", 2), live: { m2: 2 } });
    v.frames.frame();
    expect(v.ids()).toEqual(["m1", "m3"]);
    v.model.update({ "m2.3": " and ends", m2: answer("m1", "done", 3), live: {} });
    v.frames.frame();
    v.model.update({ current: "m2" });
    v.frames.frame();
    expect(v.text("m2")).toBe("first answer goes on and ends");
    expect(v.msg("m2").dataset.status).toBe("done");
  });

  it("Edit puts the question in the input box; Send asks it as a new branch", () => {
    const v = mount(regenerated());
    const edit = v.msg("m1").querySelector("button.nbs-edit") as HTMLButtonElement;
    expect(v.msg("m1").querySelector(".nbs-footer")?.hasAttribute("hidden")).toBe(false);
    edit.click();
    const input = v.el.querySelector("textarea.nbs-input") as HTMLTextAreaElement;
    const editing = v.el.querySelector(".nbs-editing") as HTMLElement;
    expect(input.value).toBe("q");
    expect(editing.hidden).toBe(false);
    input.value = "q, but better";
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    expect(v.model.sent.at(-1)).toEqual({ kind: "edit", id: "m1", text: "q, but better" });
    expect(editing.hidden).toBe(true);
    expect(input.value).toBe("");
    // Cancel leaves edit mode; the next Send is a plain question
    edit.click();
    (v.el.querySelector("button.nbs-edit-cancel") as HTMLButtonElement).click();
    expect([editing.hidden, input.value]).toEqual([true, ""]);
    input.value = "another";
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    expect(v.model.sent.at(-1)).toEqual({ kind: "send", text: "another" });
  });

  it("a state with no parents (an older nbstream) shows every message, with no switch", () => {
    const v = mount({
      last_id: 2,
      live: {},
      removed: 0,
      m1: { role: "user", seq: 0, status: "done", stats: {}, text: "q" },
      m2: { role: "assistant", seq: 1, status: "done", stats: {} },
      "m2.1": "a",
    });
    expect(v.ids()).toEqual(["m1", "m2"]);
    expect(v.el.querySelectorAll(".nbs-branch").length).toBe(0);
  });
});
