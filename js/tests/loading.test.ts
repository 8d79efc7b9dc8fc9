// @vitest-environment jsdom
// A loading reply's progress (the meta's `progress`, nbstream/core/loading.py): the
// label, the guard on what the wire carries, and the status line of a view fed
// per-message keys as the kernel sends them.
import { afterEach, describe, expect, it } from "vitest";
import { Conversation } from "../src/buffer";
import { mountChat } from "../src/chat";
import { toMessageMeta } from "../src/protocol";
import { loadingLabel, statusLabel } from "../src/status";
import { FakeFrames, FakeModel, message } from "./fakes";

const PREPARING = "preparing the model (first run, once)";

describe("loadingLabel", () => {
  it("says what the source reported, with the floored percentage where it said how far", () => {
    expect(loadingLabel(undefined)).toBe("loading model…");
    expect(loadingLabel({ text: PREPARING, fraction: 0 })).toBe(`${PREPARING}… 0%`);
    expect(loadingLabel({ text: PREPARING, fraction: 0.427 })).toBe(`${PREPARING}… 42%`);
    expect(loadingLabel({ text: PREPARING, fraction: 0.29 })).toBe(`${PREPARING}… 29%`);
    expect(loadingLabel({ text: PREPARING, fraction: 0.999 })).toBe(`${PREPARING}… 99%`);
    expect(loadingLabel({ text: PREPARING, fraction: 1 })).toBe(`${PREPARING}… 100%`);
    expect(loadingLabel({ text: "loading model", fraction: null })).toBe("loading model…");
    // a source that wrote its own ellipsis does not get two
    expect(loadingLabel({ text: "waiting for the server…", fraction: null })).toBe(
      "waiting for the server…",
    );
    expect(loadingLabel({ text: "downloading...", fraction: 0.5 })).toBe("downloading… 50%");
  });

  it("is the status label of a loading message only", () => {
    const progress = { text: PREPARING, fraction: 0.42 };
    expect(statusLabel(message("a", { status: "loading", progress }))).toBe(`${PREPARING}… 42%`);
    expect(statusLabel(message("a", { status: "loading" }))).toBe("loading model…");
    expect(statusLabel(message("a", { status: "running", progress }))).toBe(
      "waiting for first token…",
    );
  });
});

describe("the wire's progress", () => {
  const meta = (progress: unknown) =>
    toMessageMeta({ role: "assistant", seq: 0, status: "loading", stats: {}, progress });

  it("is taken when well formed, dropped or clamped to unknown otherwise", () => {
    expect(meta({ text: PREPARING, fraction: 0.5 })?.progress).toEqual({
      text: PREPARING,
      fraction: 0.5,
    });
    expect(meta({ text: "loading model", fraction: null })?.progress).toEqual({
      text: "loading model",
      fraction: null,
    });
    expect(meta({ text: "x", fraction: 7 })?.progress).toEqual({ text: "x", fraction: null });
    expect(meta({ text: "x", fraction: "half" })?.progress).toEqual({ text: "x", fraction: null });
    expect(meta({ text: "x".repeat(500), fraction: 0.1 })?.progress?.text.length).toBe(200);
    for (const bad of [undefined, null, "42%", { fraction: 0.4 }, { text: "  " }, { text: 3 }]) {
      expect(meta(bad)).not.toBeNull();
      expect(meta(bad)?.progress).toBeUndefined();
    }
  });

  it("marks the message's chrome changed when it moves, not when it is sent again", () => {
    const conv = new Conversation();
    const m = (fraction: number | null) => ({
      role: "assistant" as const,
      seq: 0,
      status: "loading" as const,
      stats: {},
      progress: { text: PREPARING, fraction },
    });
    conv.applyMeta("m1", m(0.1));
    expect(conv.take()?.messages.map((c) => c.meta)).toEqual([true]);
    conv.applyMeta("m1", m(0.1));
    expect(conv.take()).toBeNull();
    conv.applyMeta("m1", m(0.2));
    expect(conv.take()?.messages.map((c) => [c.meta, c.entry.progress?.fraction])).toEqual([
      [true, 0.2],
    ]);
    conv.applyMeta("m1", { role: "assistant", seq: 0, status: "running", stats: {} });
    const change = conv.take()?.messages[0];
    expect(change?.entry.status).toBe("running");
    expect(change?.entry.progress).toBeUndefined();
  });
});

// ------------------------------------------------------------------ the view
let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
  document.body.textContent = "";
});

describe("the status line of a loading reply", () => {
  it("follows the kernel's reports, then gives way to the answer", () => {
    const model = new FakeModel();
    const reply = (status: string, extra: Record<string, unknown> = {}) => ({
      role: "assistant",
      seq: 0,
      status,
      stats: {},
      ...extra,
    });
    model.update({
      last_id: 2,
      m1: { role: "user", seq: 0, status: "done", stats: {}, text: "Hi" },
      m2: reply("loading"),
      live: {},
    });
    const frames = new FakeFrames();
    const el = document.createElement("div");
    document.body.appendChild(el);
    cleanups.push(mountChat(model, el, { scheduler: frames, now: () => 0, idle: null }));
    const status = () => el.querySelector<HTMLElement>('.nbs-message[data-id="m2"] .nbs-status');
    frames.frame();
    expect(status()?.textContent).toBe("loading model…");
    expect(status()?.classList.contains("nbs-waiting")).toBe(true);
    for (const [fraction, shown] of [
      [0, "0%"],
      [0.418, "41%"],
      [0.9, "90%"],
    ] as const) {
      model.update({ m2: reply("loading", { progress: { text: PREPARING, fraction } }) });
      frames.frame();
      expect(status()?.textContent).toBe(`${PREPARING}… ${shown}`);
      expect(status()?.classList.contains("nbs-waiting")).toBe(true);
    }
    model.update({ m2: reply("loading", { progress: { text: "loading model", fraction: null } }) });
    frames.frame();
    expect(status()?.textContent).toBe("loading model…");
    model.update({ m2: reply("running") });
    frames.frame();
    expect(status()?.textContent).toBe("waiting for first token…");
    model.update({ "m2.1": "Hello!", m2: reply("done", { seq: 1, finish_reason: "stop" }) });
    frames.frame();
    expect(el.querySelector('.nbs-message[data-id="m2"] .nbs-text')?.textContent?.trim()).toBe(
      "Hello!",
    );
    expect(status()?.textContent).not.toContain(PREPARING);
  });
});
