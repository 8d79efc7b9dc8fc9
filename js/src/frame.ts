/**
 * Per-frame batching: the rhythm of the view.
 *
 * Owns the one pending animation-frame request. Anything that changes the
 * conversation calls {@link FrameLoop.request}; however many deltas arrive
 * before the next frame, that frame runs `render` once, so the DOM is updated
 * at most once per frame. When `render` touched the DOM, the loop then sends
 * one ack per message that received deltas, for the highest seq rendered,
 * with the time the frame's DOM work took. Acks are the kernel's credits:
 * a view that cannot keep up (or a hidden tab, where frames stop) slows the
 * kernel's send rate instead of queueing work.
 *
 * The scheduler and the clock are injected so that tests drive frames by hand.
 * Runs on the browser's main thread only.
 */
import type { AckMsg } from "./protocol";

/** What `requestAnimationFrame` / `cancelAnimationFrame` provide. */
export interface FrameScheduler {
  request(callback: () => void): number;
  cancel(handle: number): void;
}

/** Counters for tests and benchmarks; updated with plain increments. */
export interface Counters {
  /** frames that touched the DOM */
  renders: number;
  /** animation-frame callbacks run */
  frames: number;
  /** delta messages received */
  deltas: number;
  /** acks sent */
  acks: number;
  /** resyncs sent */
  resyncs: number;
  /** characters of message text shown now, over all messages (benchmarks read it per frame) */
  chars: number;
  /** milliseconds of DOM work in the frames that touched the DOM, summed */
  render_ms: number;
  /** the longest of those frames' DOM work, ms */
  max_render_ms: number;
}

export function newCounters(): Counters {
  return {
    renders: 0,
    frames: 0,
    deltas: 0,
    acks: 0,
    resyncs: 0,
    chars: 0,
    render_ms: 0,
    max_render_ms: 0,
  };
}

/** The browser's scheduler; a timer stands in where frames do not exist. */
export function browserScheduler(win: Window & typeof globalThis): FrameScheduler {
  if (typeof win.requestAnimationFrame === "function") {
    return {
      request: (cb) => win.requestAnimationFrame(() => cb()),
      cancel: (h) => win.cancelAnimationFrame(h),
    };
  }
  return {
    request: (cb) => win.setTimeout(cb, 16) as unknown as number,
    cancel: (h) => win.clearTimeout(h),
  };
}

export interface FrameDeps {
  scheduler: FrameScheduler;
  /** a monotonic clock in milliseconds (`performance.now`) */
  now: () => number;
  /**
   * Does the frame's DOM work (`now`: the frame's start on the clock). Returns
   * the acks it owes, or null when nothing was pending and the DOM was not touched.
   */
  render: (now: number) => readonly { readonly id: string; readonly seq: number }[] | null;
  /** sends an ack to the kernel */
  ack: (msg: AckMsg) => void;
  counters: Counters;
}

export class FrameLoop {
  private handle: number | null = null;
  private disposed = false;

  constructor(private readonly deps: FrameDeps) {}

  /** Makes sure a frame will run; cheap to call once per arriving message. */
  request(): void {
    if (this.handle === null && !this.disposed) {
      this.handle = this.deps.scheduler.request(this.tick);
    }
  }

  /** Whether a frame is requested and has not run yet. */
  get pending(): boolean {
    return this.handle !== null;
  }

  /** Cancels the pending frame; later requests are ignored. */
  dispose(): void {
    this.disposed = true;
    if (this.handle !== null) {
      this.deps.scheduler.cancel(this.handle);
      this.handle = null;
    }
  }

  private readonly tick = (): void => {
    this.handle = null;
    if (this.disposed) {
      return;
    }
    const { counters, now, render, ack } = this.deps;
    counters.frames++;
    const start = now();
    const acks = render(start);
    if (acks === null) {
      return;
    }
    const renderMs = Math.round((now() - start) * 1000) / 1000;
    counters.renders++;
    counters.render_ms += renderMs;
    counters.max_render_ms = Math.max(counters.max_render_ms, renderMs);
    for (const a of acks) {
      ack({ kind: "ack", id: a.id, seq: a.seq, render_ms: renderMs });
      counters.acks++;
    }
  };
}
