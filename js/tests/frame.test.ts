// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { type ChatRoot, mountChat } from "../src/chat";
import { FrameLoop, newCounters } from "../src/frame";
import type { AcksMsg } from "../src/protocol";
import { FakeFrames, FakeModel, message, steppingClock } from "./fakes";

describe("FrameLoop", () => {
  const setup = (result: { id: string; seq: number }[] | null) => {
    const frames = new FakeFrames();
    const acks: AcksMsg[] = [];
    const counters = newCounters();
    let renders = 0;
    const loop = new FrameLoop({
      scheduler: frames,
      now: steppingClock(2.5),
      render: () => {
        renders++;
        return result;
      },
      ack: (m) => acks.push(m),
      counters,
    });
    return { frames, acks, counters, loop, renders: () => renders };
  };

  it("requests one frame however often it is asked", () => {
    const { frames, loop } = setup([]);
    for (let i = 0; i < 100; i++) loop.request();
    expect(frames.requests).toBe(1);
    expect(loop.pending).toBe(true);
    frames.frame();
    expect(loop.pending).toBe(false);
    loop.request();
    expect(frames.requests).toBe(2);
  });

  it("renders once per frame and acks what the frame rendered, with its time", () => {
    const { frames, acks, counters, loop, renders } = setup([
      { id: "a", seq: 7 },
      { id: "b", seq: 3 },
    ]);
    loop.request();
    loop.request();
    frames.frame();
    expect(renders()).toBe(1);
    expect(acks).toEqual([
      {
        kind: "acks",
        acks: [
          { id: "a", seq: 7 },
          { id: "b", seq: 3 },
        ],
        render_ms: 2.5,
      },
    ]);
    expect(counters).toMatchObject({ frames: 1, renders: 1, acks: 2, ack_msgs: 1 });
    expect(counters).toMatchObject({ render_ms: 2.5, max_render_ms: 2.5 });
  });

  it("counts no render and sends no ack when nothing was pending", () => {
    const { frames, acks, counters, loop } = setup(null);
    loop.request();
    frames.frame();
    expect(acks).toEqual([]);
    expect(counters).toMatchObject({ frames: 1, renders: 0, acks: 0, ack_msgs: 0, render_ms: 0 });
  });

  it("dispose cancels the pending frame and ignores later requests", () => {
    const { frames, loop, renders } = setup([]);
    loop.request();
    loop.dispose();
    expect(frames.cancels).toBe(1);
    expect(frames.pending).toBe(0);
    loop.request();
    expect(frames.pending).toBe(0);
    expect(renders()).toBe(0);
  });
});

describe("frames in a mounted chat", () => {
  const mount = () => {
    const model = new FakeModel({
      conversation: [
        message("u", { role: "user", status: "done", text: "hi" }),
        message("a"),
        message("b"),
      ],
    });
    const frames = new FakeFrames();
    const el = document.createElement("div");
    document.body.appendChild(el);
    const cleanup = mountChat(model, el, { scheduler: frames, now: steppingClock(1) });
    const root = el.querySelector(".nbs-chat") as ChatRoot;
    model.drain("hello");
    return { model, frames, el, root, cleanup };
  };

  it("N deltas between two frames: no DOM work on arrival, one update, one ack per message", () => {
    const { model, frames, el, root, cleanup } = mount();
    const observer = new MutationObserver(() => undefined);
    observer.observe(el, { subtree: true, childList: true, characterData: true, attributes: true });
    for (let seq = 1; seq <= 50; seq++) {
      model.delta("a", seq, `a${seq} `);
      if (seq <= 20) model.delta("b", seq, `b${seq} `);
    }
    expect(observer.takeRecords()).toEqual([]);
    expect(frames.pending).toBe(1);
    expect(root.__nbstream).toMatchObject({ deltas: 70, renders: 0 });

    frames.frame();
    expect(observer.takeRecords().length).toBeGreaterThan(0);
    expect(root.__nbstream).toMatchObject({ frames: 1, renders: 1, acks: 2, ack_msgs: 1 });
    expect(model.drain("acks")).toEqual([
      {
        kind: "acks",
        acks: [
          { id: "a", seq: 50 },
          { id: "b", seq: 20 },
        ],
        render_ms: 1,
      },
    ]);
    // assistant text is Markdown: one paragraph, trailing space trimmed
    const text = (id: string) =>
      el.querySelector(`[data-id="${id}"] .nbs-text`)?.textContent?.trim();
    expect(text("a")).toBe(Array.from({ length: 50 }, (_, i) => `a${i + 1}`).join(" "));
    expect(text("b")).toBe(Array.from({ length: 20 }, (_, i) => `b${i + 1}`).join(" "));
    const raw = (id: string, n: number) => Array.from({ length: n }, (_, i) => `${id}${i + 1} `);
    const shown = "hi".length + raw("a", 50).join("").length + raw("b", 20).join("").length;
    expect(root.__nbstream.chars).toBe(shown);

    // Nothing pending: no frame is requested, and none touches the DOM.
    expect(frames.pending).toBe(0);
    frames.frame();
    expect(observer.takeRecords()).toEqual([]);
    expect(root.__nbstream.renders).toBe(1);
    observer.disconnect();
    cleanup();
  });

  it("stale and gapped deltas request no frame", () => {
    const { model, frames, root, cleanup } = mount();
    model.delta("a", 1, "x");
    frames.frame();
    model.drain("acks");
    model.delta("a", 1, "x");
    model.delta("a", 3, "z");
    expect(frames.pending).toBe(0);
    expect(model.drain("resync")).toEqual([{ kind: "resync", id: "a", have: 1 }]);
    expect(root.__nbstream).toMatchObject({ deltas: 3, resyncs: 1, renders: 1 });
    cleanup();
  });

  it("a state change alone renders in a frame and sends no ack", () => {
    const { model, frames, el, root, cleanup } = mount();
    model.set("conversation", [
      message("u", { role: "user", status: "done", text: "hi" }),
      message("a", { status: "done", text: "ok", seq: 1 }),
      message("b"),
    ]);
    expect(el.querySelector('[data-id="a"]')?.getAttribute("data-status")).toBe("running");
    frames.frame();
    expect(el.querySelector('[data-id="a"]')?.getAttribute("data-status")).toBe("done");
    expect(model.drain("acks")).toEqual([]);
    expect(root.__nbstream.renders).toBe(1);
    cleanup();
  });
});
