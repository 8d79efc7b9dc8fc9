// Sparse acks: how often the view acknowledges what it rendered (frame.ts).
import { describe, expect, it } from "vitest";
import { ACK_EVERY_DELTAS, ACK_GAP_MS, FrameLoop, newCounters, type Timer } from "../src/frame";
import type { AckMsg } from "../src/protocol";
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
  advance(ms: number): void {
    this.t += ms;
    for (const [h, timer] of [...this.timers]) {
      if (timer.at <= this.t) {
        this.timers.delete(h);
        timer.cb();
      }
    }
  }
}

/** A loop whose every frame renders `owe()` (a list of id/seq) taking 2 ms. */
function setup(ackGapMs?: number) {
  const frames = new FakeFrames();
  const time = new FakeTime();
  const acks: AckMsg[] = [];
  const counters = newCounters();
  let owe: { id: string; seq: number }[] = [];
  const loop = new FrameLoop({
    scheduler: frames,
    now: () => time.t,
    render: () => {
      time.t += 2; // the frame's DOM work
      return owe;
    },
    ack: (m) => acks.push(m),
    counters,
    timer: time,
    ...(ackGapMs === undefined ? {} : { ackGapMs }),
  });
  /** a frame that renders delta `seq` of each id, then `ms` until the next */
  const frame = (seqs: Record<string, number>, ms = 16) => {
    owe = Object.entries(seqs).map(([id, seq]) => ({ id, seq }));
    loop.request();
    frames.frame();
    time.advance(ms - 2);
  };
  return { frames, time, acks, counters, loop, frame };
}

describe("sparse acks", () => {
  it("acks a message's first delta at once, then at most one round per gap", () => {
    const { acks, frame } = setup();
    frame({ a: 1 });
    expect(acks).toEqual([{ kind: "ack", id: "a", seq: 1, render_ms: 2 }]);
    // the kernel's 25 deltas/s, one per frame, for 2.4 s: the old way sent 60 acks
    for (let seq = 2; seq <= 61; seq++) frame({ a: seq }, 40);
    expect(acks.length).toBeGreaterThanOrEqual(Math.floor(2400 / (ACK_GAP_MS + 40)));
    expect(acks.length).toBeLessThanOrEqual(1 + Math.ceil(2400 / ACK_GAP_MS));
    // seqs only grow, and the newest rendered is acked within the gap
    const seqs = acks.map((m) => m.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
  });

  it("a fast stream is acked every ACK_EVERY_DELTAS deltas", () => {
    const { acks, frame } = setup();
    for (let seq = 1; seq <= 1 + 4 * ACK_EVERY_DELTAS; seq++) frame({ a: seq });
    expect(acks.map((m) => m.seq)).toEqual([0, 1, 2, 3, 4].map((k) => 1 + k * ACK_EVERY_DELTAS));
  });

  it("acks after ACK_EVERY_DELTAS deltas even inside the gap, so the kernel's window never runs dry", () => {
    const { acks, frame } = setup(10_000);
    frame({ a: 1 });
    frame({ a: ACK_EVERY_DELTAS });
    expect(acks.map((m) => m.seq)).toEqual([1]);
    frame({ a: 1 + ACK_EVERY_DELTAS });
    expect(acks.map((m) => m.seq)).toEqual([1, 1 + ACK_EVERY_DELTAS]);
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

  it("pays every message it owes in one round", () => {
    const { acks, frame, time } = setup();
    frame({ a: 1, b: 1 });
    frame({ a: 2 });
    frame({ b: 4 });
    time.advance(ACK_GAP_MS);
    expect(acks.map((m) => `${m.id}${m.seq}`)).toEqual(["a1", "b1", "a2", "b4"]);
  });

  it("a gap of 0 acks every frame (the previous way)", () => {
    const { acks, frame } = setup(0);
    for (let seq = 1; seq <= 10; seq++) frame({ a: seq });
    expect(acks.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it("a seq lower than the last acked (a new view's numbering) is acked at once", () => {
    const { acks, frame } = setup();
    frame({ a: 5 });
    frame({ a: 1 });
    expect(acks.map((m) => m.seq)).toEqual([5, 1]);
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
