// Sparse acks: how often the view acknowledges what it rendered (frame.ts).
import { describe, expect, it } from "vitest";
import {
  ACK_GAP_MS,
  ACKED_KEPT,
  type AckBudget,
  FrameLoop,
  newCounters,
  PAGE_ACK_ROUNDS_PER_S,
  type Timer,
} from "../src/frame";
import { type AcksMsg, MAX_ACKS } from "../src/protocol";
import { FakeFrames } from "./fakes";

/** A hand-driven clock and timer: `advance` runs the timers that fall due. */
class FakeTime implements Timer {
  t = 1000;
  private next = 1;
  private readonly timers = new Map<number, { at: number; cb: () => void }>();
  set(cb: () => void, ms: number): number {
    const h = this.next++;
    this.timers.set(h, { at: this.t + ms, cb });
    return h;
  }
  clear(h: number): void {
    this.timers.delete(h);
  }
  get pending(): number {
    return this.timers.size;
  }
  /** Moves the clock on by `ms`, running due timers in order, each at its own time. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      let first: [number, { at: number; cb: () => void }] | null = null;
      for (const entry of this.timers) {
        if (entry[1].at <= end && (first === null || entry[1].at < first[1].at)) first = entry;
      }
      if (first === null) break;
      this.timers.delete(first[0]);
      this.t = Math.max(this.t, first[1].at);
      first[1].cb();
    }
    this.t = end;
  }
}

/** A loop whose every frame renders `owe` (a list of id/seq) taking 2 ms. */
function setup(ackGapMs?: number, shared?: { time: FakeTime; budget: AckBudget }) {
  const frames = new FakeFrames();
  const time = shared?.time ?? new FakeTime();
  const budget = shared?.budget ?? { active: new Map() };
  /** the messages sent (one per round) */
  const msgs: AcksMsg[] = [];
  /** every ack they carried, in order, with its round's render time */
  const acks: { id: string; seq: number; render_ms: number | undefined }[] = [];
  const counters = newCounters();
  let owe: { id: string; seq: number }[] = [];
  const loop = new FrameLoop({
    scheduler: frames,
    now: () => time.t,
    render: () => {
      time.t += 2; // the frame's DOM work
      return owe;
    },
    ack: (m) => {
      msgs.push(m);
      for (const a of m.acks) acks.push({ ...a, render_ms: m.render_ms });
    },
    counters,
    timer: time,
    budget,
    ...(ackGapMs === undefined ? {} : { ackGapMs }),
  });
  /** a frame that renders delta `seq` of each id, then `ms` until the next */
  const frame = (seqs: Record<string, number>, ms = 16) => {
    owe = Object.entries(seqs).map(([id, seq]) => ({ id, seq }));
    loop.request();
    frames.frame();
    time.advance(ms - 2);
  };
  return { frames, time, msgs, acks, counters, loop, frame };
}

describe("sparse acks", () => {
  it("acks a message's first delta at once, then at most one round per gap", () => {
    const { acks, frame } = setup();
    frame({ a: 1 });
    expect(acks).toEqual([{ id: "a", seq: 1, render_ms: 2 }]);
    // the kernel's 25 deltas/s, one per frame, for 2.4 s: the old way sent 60 acks
    for (let seq = 2; seq <= 61; seq++) frame({ a: seq }, 40);
    expect(acks.length).toBeGreaterThanOrEqual(Math.floor(2400 / (ACK_GAP_MS + 40)));
    expect(acks.length).toBeLessThanOrEqual(1 + Math.ceil(2400 / ACK_GAP_MS));
    // seqs only grow, and the newest rendered is acked within the gap
    const seqs = acks.map((m) => m.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
  });

  it("a fast stream is acked once per gap, however many deltas", () => {
    const { acks, frame } = setup();
    for (let seq = 1; seq <= 60; seq++) frame({ a: seq }); // 60 deltas/s for 1 s
    expect(acks.length).toBeLessThanOrEqual(1 + Math.ceil(960 / ACK_GAP_MS));
    // the newest rendered was acked within one gap of the end (16 ms frames)
    expect(acks.at(-1)?.seq).toBeGreaterThanOrEqual(60 - Math.ceil(ACK_GAP_MS / 16) - 1);
  });

  it("all the views of a page share a budget of rounds per second", () => {
    const time = new FakeTime();
    const budget = { active: new Map<object, number>() };
    const views = Array.from({ length: 8 }, () => setup(undefined, { time, budget }));
    // 8 views, each rendering a delta of its own message every 40 ms, for 4 s
    for (let seq = 1; seq <= 100; seq++) {
      for (const [i, v] of views.entries()) v.frame({ [`m${i}`]: seq }, 0);
      time.advance(40);
    }
    const total = views.reduce((n, v) => n + v.acks.length, 0);
    // the first acks (one per view) plus the page's budget, not 8 views x 4 rounds/s
    expect(total).toBeLessThanOrEqual(8 + 4 * PAGE_ACK_ROUNDS_PER_S + 1);
    for (const v of views) {
      expect(v.acks.length).toBeGreaterThanOrEqual(3); // every view still acks regularly
    }
    // the streams end: within one gap, every view acked its last delta
    time.advance(8 * (1000 / PAGE_ACK_ROUNDS_PER_S));
    expect(views.map((v) => v.acks.at(-1)?.seq)).toEqual(views.map(() => 100));
  });

  it("always acks the last delta of a stream, by a timer once the gap has passed", () => {
    const { acks, frame, time } = setup();
    frame({ a: 1 });
    frame({ a: 2 });
    frame({ a: 3 }); // the stream ends here: no more frames
    expect(acks.map((m) => m.seq)).toEqual([1]);
    expect(time.pending).toBe(1);
    time.advance(ACK_GAP_MS);
    expect(acks.map((m) => m.seq)).toEqual([1, 3]);
    expect(acks[1]?.render_ms).toBe(2); // mean DOM time of the frames it covers
    expect(time.pending).toBe(0);
    time.advance(10 * ACK_GAP_MS);
    expect(acks.length).toBe(2); // nothing owed: nothing sent
  });

  it("pays every message it owes in one round, one message", () => {
    const { msgs, acks, counters, frame, time } = setup();
    frame({ a: 1, b: 1 });
    frame({ a: 2 });
    frame({ b: 4 });
    time.advance(ACK_GAP_MS);
    expect(msgs).toEqual([
      {
        kind: "acks",
        acks: [
          { id: "a", seq: 1 },
          { id: "b", seq: 1 },
        ],
        render_ms: 2,
      },
      {
        kind: "acks",
        acks: [
          { id: "a", seq: 2 },
          { id: "b", seq: 4 },
        ],
        render_ms: 2,
      },
    ]);
    expect(acks.map((m) => `${m.id}${m.seq}`)).toEqual(["a1", "b1", "a2", "b4"]);
    expect(counters).toMatchObject({ acks: 4, ack_msgs: 2 });
  });

  it("a Compare of 4 panes sends one message per round, naming every pane's stream", () => {
    const { msgs, acks, counters, frame, time } = setup();
    const panes = ["m2", "m3", "m4", "m5"];
    // the kernel's one message per interval carries a delta of each pane: 25/s for 2 s
    for (let seq = 1; seq <= 50; seq++) {
      frame(Object.fromEntries(panes.map((id) => [id, seq])), 40);
    }
    time.advance(ACK_GAP_MS); // the trailing round
    expect(msgs.length).toBeGreaterThanOrEqual(Math.floor(2000 / (ACK_GAP_MS + 40)));
    expect(msgs.length).toBeLessThanOrEqual(1 + Math.ceil(2000 / ACK_GAP_MS) + 1);
    for (const m of msgs) {
      expect(m.kind).toBe("acks");
      expect(m.acks.map((a) => a.id)).toEqual(panes); // every owed stream, in one message
      expect(new Set(m.acks.map((a) => a.seq)).size).toBe(1); // the same frame's seq
    }
    expect(msgs.at(-1)?.acks.map((a) => a.seq)).toEqual([50, 50, 50, 50]); // the end acked
    expect(counters.ack_msgs).toBe(msgs.length);
    expect(counters.acks).toBe(4 * msgs.length);
    expect(acks.length).toBe(counters.acks);
  });

  it("a round owing more than MAX_ACKS goes in messages of at most MAX_ACKS, in order", () => {
    const { msgs, acks, counters, frame } = setup();
    const n = 2 * MAX_ACKS + 3;
    const ids = Array.from({ length: n }, (_, i) => `m${i + 1}`);
    frame(Object.fromEntries(ids.map((id, i) => [id, i + 1]))); // all new: paid at once
    expect(msgs.map((m) => m.acks.length)).toEqual([MAX_ACKS, MAX_ACKS, 3]);
    expect(msgs.every((m) => m.render_ms === 2)).toBe(true);
    expect(acks.map((a) => a.id)).toEqual(ids);
    expect(acks.map((a) => a.seq)).toEqual(ids.map((_, i) => i + 1));
    expect(counters).toMatchObject({ acks: n, ack_msgs: 3 });
  });

  it("a gap of 0 acks every frame (the previous way), still one message a frame", () => {
    const { msgs, acks, frame } = setup(0);
    for (let seq = 1; seq <= 10; seq++) frame({ a: seq, b: seq });
    expect(msgs.length).toBe(10);
    expect(acks.filter((m) => m.id === "a").map((m) => m.seq)).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
    ]);
  });

  it("a seq lower than the last acked (a new view's numbering) is acked at once", () => {
    const { acks, frame } = setup();
    frame({ a: 5 });
    frame({ a: 1 });
    expect(acks.map((m) => m.seq)).toEqual([5, 1]);
  });

  it("remembers the messages acked last, a bounded number: one acked again after it was forgotten is acked at once", () => {
    const { acks, frame, loop } = setup();
    const n = ACKED_KEPT * 4;
    for (let i = 0; i < n; i++) {
      frame({ [`m${i}`]: 1 }); // a day of replies, each acked at once (new)
    }
    const record = (loop as unknown as { acked: Map<string, number> }).acked;
    expect(record.size).toBe(ACKED_KEPT);
    expect([...record.keys()].at(-1)).toBe(`m${n - 1}`);
    const before = acks.length;
    frame({ [`m${n - 1}`]: 2 }); // remembered: waits for its round
    expect(acks.length).toBe(before);
    frame({ m0: 2 }); // forgotten long ago: acked at once, as a new message (the round with it)
    expect(acks.slice(before).map((a) => `${a.id}#${a.seq}`)).toEqual([`m${n - 1}#2`, "m0#2"]);
    expect(record.size).toBe(ACKED_KEPT);
  });

  it("dispose drops the trailing round", () => {
    const { acks, frame, time, loop } = setup();
    frame({ a: 1 });
    frame({ a: 2 });
    loop.dispose();
    time.advance(ACK_GAP_MS);
    expect(acks.map((m) => m.seq)).toEqual([1]);
    expect(time.pending).toBe(0);
  });
});
