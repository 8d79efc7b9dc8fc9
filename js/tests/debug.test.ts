// @vitest-environment jsdom
// The widget's `debug` trait (nbstream/widgets/protocol.py ViewDebug, set from
// Python): the switches benchmarks use to measure the previous ways side by side
// with the shipped ones. A view reads them when it renders; an unknown or
// malformed switch leaves it as shipped.
import { afterEach, describe, expect, it } from "vitest";
import { debugMountOptions, mountChat } from "../src/chat";
import { ACK_GAP_MS } from "../src/frame";
import { ATTACH_FIRST, OPENING_CLASS } from "../src/lazy";
import { type ChatTraits, toViewDebug } from "../src/protocol";
import { FakeFrames, FakeModel } from "./fakes";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
  document.body.textContent = "";
});

describe("toViewDebug", () => {
  it("keeps the switches it knows, of the right values, and nothing else", () => {
    expect(toViewDebug(undefined)).toEqual({});
    expect(toViewDebug("full")).toEqual({});
    const all = {
      markdown: "full",
      acks: "every-frame",
      ack_gap_ms: 250,
      sized: "at-once",
      lazy: "off",
      frames: "per-view",
    };
    expect(toViewDebug(all)).toEqual(all);
    expect(
      toViewDebug({
        markdown: "fast",
        acks: 1,
        ack_gap_ms: -5,
        sized: null,
        lazy: false,
        frames: "x",
      }),
    ).toEqual({});
    expect(toViewDebug({ ack_gap_ms: Number.POSITIVE_INFINITY })).toEqual({});
  });

  it("maps to the mount options of the previous ways", () => {
    expect(debugMountOptions({})).toEqual({});
    expect(debugMountOptions({ markdown: "full", sized: "at-once" })).toEqual({
      markdown: "full",
      sized: "at-once",
    });
    expect(debugMountOptions({ acks: "every-frame", ack_gap_ms: 250 })).toEqual({ ackGapMs: 0 });
    expect(debugMountOptions({ ack_gap_ms: 250 })).toEqual({ ackGapMs: 250 });
    expect(debugMountOptions({ lazy: "off" })).toEqual({ lazy: false });
    expect(debugMountOptions({ lazy: "on" })).toEqual({}); // as shipped: where the browser can
    // the page's one frame loop as shipped; "per-view": a loop of the view's own
    expect(debugMountOptions({ frames: "shared" })).toEqual({});
    expect(debugMountOptions({ frames: "per-view" })).toEqual({ frames: "per-view" });
  });
});

const user = (text: string) => ({ role: "user", seq: 0, status: "done", stats: {}, text });
const reply = (seq: number) => ({ role: "assistant", seq, status: "running", stats: {} });

/** A view of a widget whose `debug` trait is `debug`, mounted as index.ts mounts it. */
function mount(debug: unknown) {
  const model = new FakeModel({ debug } as Partial<ChatTraits>);
  model.update({ last_id: 2, m1: user("q"), m2: reply(0), live: { m2: 0 } });
  const frames = new FakeFrames();
  const el = document.createElement("div");
  document.body.appendChild(el);
  let t = 1000;
  const options = debugMountOptions(toViewDebug(model.get("debug")));
  cleanups.push(mountChat(model, el, { ...options, scheduler: frames, now: () => t, idle: null }));
  model.sent.length = 0; // the hello
  let seq = 0;
  return {
    model,
    /** the next delta arrives, and a frame renders it `ms` later */
    delta(text: string, ms = 16) {
      seq += 1;
      model.update({ [`m2.${seq}`]: text, live: { m2: seq } });
      t += ms;
      frames.frame();
    },
    acks: () => model.sent.filter((m) => m.kind === "acks").length,
    blocks: () => [...el.querySelectorAll('[data-id="m2"] .nbs-md > *')],
  };
}

describe("a widget's debug switches reach its views", () => {
  it("acks: sparse rounds as shipped, an ack per frame with every-frame", () => {
    const shipped = mount({});
    const previous = mount({ acks: "every-frame" });
    for (const v of [shipped, previous]) {
      for (let i = 0; i < 5; i++) v.delta(`w${i} `);
    }
    // 5 frames in 80 ms: the shipped view acks the first delta at once, the rest in a
    // round ACK_GAP_MS later; the previous way acks every frame
    expect(80).toBeLessThan(ACK_GAP_MS);
    expect(shipped.acks()).toBe(1);
    expect(previous.acks()).toBe(5);
  });

  it("ack_gap_ms: another least gap between rounds", () => {
    // frames 130 ms apart, one view streaming (the page's budget: a round per 125 ms)
    const gap = mount({ ack_gap_ms: 20 });
    for (let i = 0; i < 5; i++) gap.delta(`w${i} `, 130);
    expect(gap.acks()).toBe(5);
    for (const c of cleanups) c();
    cleanups = [];
    const shipped = mount({});
    for (let i = 0; i < 5; i++) shipped.delta(`w${i} `, 130);
    expect(shipped.acks()).toBe(1); // at once; the rest wait for a round ACK_GAP_MS later
  });

  it("markdown: full re-renders the whole answer each frame, incremental only its tail", () => {
    const shipped = mount({});
    const full = mount({ markdown: "full" });
    for (const v of [shipped, full]) {
      v.delta("# Title\n\nFirst paragraph.\n\n");
    }
    const before = [shipped.blocks()[0], full.blocks()[0]];
    for (const v of [shipped, full]) {
      v.delta("Second ");
    }
    expect(shipped.blocks()[0]).toBe(before[0]); // the closed heading is kept
    expect(full.blocks()[0]).not.toBe(before[1]); // rebuilt
    expect(full.blocks()[0]?.textContent).toBe("Title");
  });

  it("lazy: off renders a finished history when it is shown, as shipped its end first", () => {
    const history: Record<string, unknown> = { last_id: 120 };
    for (let i = 1; i <= 120; i += 2) {
      history[`m${i}`] = user(`question ${i}`);
      history[`m${i + 1}`] = { role: "assistant", seq: 1, status: "done", stats: {} };
      history[`m${i + 1}.1`] = `## Answer ${i + 1}\n\nSome text.`;
    }
    /** the messages in the DOM when the chat is shown, and how many are placeholders */
    const shown = (debug: unknown): [number, number] => {
      const model = new FakeModel({ debug, ...history } as Partial<ChatTraits>);
      const el = document.createElement("div");
      document.body.appendChild(el);
      // as index.ts mounts it, in a browser that can skip a placeholder's layout
      const options = { lazy: true, ...debugMountOptions(toViewDebug(model.get("debug"))) };
      // a clock that stands still: the end's frame budget (lazy.ts renderTail) never runs
      // out, however slow this machine renders
      const frames = new FakeFrames();
      cleanups.push(
        mountChat(model, el, { ...options, scheduler: frames, idle: null, now: () => 0 }),
      );
      // the frames until the list is shown (a history is built in the first frame, its
      // end rendered in frames of its own)
      const hidden = () =>
        el.querySelector(".nbs-message") === null || el.querySelector(`.${OPENING_CLASS}`) !== null;
      for (let i = 0; i < 10 && hidden(); i++) {
        frames.frame();
      }
      expect(el.querySelector(`.${OPENING_CLASS}`)).toBeNull();
      return [
        el.querySelectorAll(".nbs-message").length,
        el.querySelectorAll(".nbs-deferred").length,
      ];
    };
    // the end, rendered when the list is first shown; the rest in later frames
    expect(shown({})).toEqual([ATTACH_FIRST, 0]);
    expect(shown({ lazy: "on" })).toEqual([ATTACH_FIRST, 0]);
    expect(shown({ lazy: "off" })).toEqual([120, 0]); // everything, rendered
  });

  it("a malformed debug trait renders as shipped", () => {
    const v = mount({ acks: "every-frame!", markdown: 3 });
    for (let i = 0; i < 5; i++) v.delta(`w${i} `);
    expect(v.acks()).toBe(1);
  });
});
