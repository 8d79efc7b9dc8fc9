/**
 * Per-frame batching: the rhythm of the view.
 *
 * Owns the one pending animation-frame request. Anything that changes the
 * conversation calls {@link FrameLoop.request}; however many deltas arrive
 * before the next frame, that frame runs `render` once, so the DOM is updated
 * at most once per frame. Acks are the kernel's credits: a view that cannot
 * keep up (or a hidden tab, where frames stop) slows the kernel's send rate
 * instead of queueing work.
 *
 * Acks are sparse, because each one costs more than itself: every comm message
 * from the browser makes the kernel publish a busy and an idle status to every
 * client, so an ack per frame tripled the traffic. After a frame that rendered
 * deltas, the loop owes an ack per message (its highest seq rendered), and pays
 * them all in one round, one message (`AcksMsg`: a `Compare` of 4 panes sends
 * one, not 4; more than `MAX_ACKS` go in several):
 *
 * - at once for a message it has never acked (the kernel learns a view is there),
 * - otherwise when its gap passed since its last round: {@link ACK_GAP_MS}, or
 *   longer when many views stream at once, so that all the views on the page
 *   together send about {@link PAGE_ACK_ROUNDS_PER_S} rounds a second (8
 *   streaming widgets ack about once a second each); a round that must wait
 *   goes by a timer,
 * - so the last delta of a stream is always acked, by that timer.
 *
 * An ack carries the mean DOM time of the frames since the last round. The
 * kernel measures how often a view acks and sizes its window and ack timeout
 * by it (`nbstream/core/pump.py`). A stream at the kernel's ~29 deltas/s costs about
 * 2 acks a second, not 29: fewer acks leave the budget (40 messages a second
 * per widget, status included) to deltas, which shortens token-to-pixel.
 *
 * Frames come from the page's one loop (scheduler.ts: every view on the page
 * renders from one animation-frame callback, under one budget) when `page` is
 * given; otherwise the loop requests its own animation frames (a loop per
 * view: the previous way, which benchmarks compare with, and unit tests).
 *
 * The scheduler and the clock are injected so that tests drive frames by hand.
 * Runs on the browser's main thread only.
 */
import { type AckEntry, type AcksMsg, MAX_ACKS } from "./protocol";
import type { FrameSlot, PageFrames, Priority } from "./scheduler";

/** Least time between two rounds of acks of one view, ms. */
export const ACK_GAP_MS = 500;
/** Most rounds of acks a second for all the views of a page together. */
export const PAGE_ACK_ROUNDS_PER_S = 8;

/** What `setTimeout` / `clearTimeout` provide (the trailing ack). */
export interface Timer {
  set(callback: () => void, ms: number): number;
  clear(handle: number): void;
}

/**
 * The page's ack budget: when each view last rendered deltas. A view's gap
 * between rounds is {@link ACK_GAP_MS}, or longer when many views stream at
 * once, so that together they send about {@link PAGE_ACK_ROUNDS_PER_S} rounds
 * a second. Each view keeps its own rhythm: no view waits on another's turn.
 */
export interface AckBudget {
  active: Map<object, number>;
}

/** A view that rendered no delta for this long no longer counts as streaming, ms. */
const ACTIVE_MS = 2000;
const BUDGET = "__nbstreamAckBudget";

/** The page-wide budget, on `globalThis` so that every copy of the bundle shares it. */
export function pageAckBudget(): AckBudget {
  const g = globalThis as { [BUDGET]?: AckBudget };
  g[BUDGET] ??= { active: new Map() };
  return g[BUDGET];
}

/** This view's gap between rounds at `now`, given the views streaming on the page. */
function gapFor(budget: AckBudget, minGapMs: number, now: number): number {
  let active = 0;
  for (const [view, at] of budget.active) {
    if (now - at > ACTIVE_MS) {
      budget.active.delete(view);
    } else {
      active++;
    }
  }
  return Math.max(minGapMs, (1000 * active) / PAGE_ACK_ROUNDS_PER_S);
}

const globalTimer: Timer = {
  set: (cb, ms) => globalThis.setTimeout(cb, ms) as unknown as number,
  clear: (h) => globalThis.clearTimeout(h),
};

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
  /** acks sent (one per message acknowledged) */
  acks: number;
  /** messages that carried them (one per round, unless a round owed more than `MAX_ACKS`) */
  ack_msgs: number;
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
    ack_msgs: 0,
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
  /** this view's own animation frames (used when `page` is not given) */
  scheduler: FrameScheduler;
  /** the page's shared loop: frames come from it, with its budget (null: a loop of its own) */
  page?: PageFrames | null;
  /** the view's root, for the page loop to render it less often while out of sight */
  root?: Element | null;
  /**
   * How soon what is pending must show, for the page loop (scheduler.ts: a
   * stream's end at once, a new message or a status soon, more text when its
   * turn comes); "soon" unless given.
   */
  priority?: () => Priority;
  /** a monotonic clock in milliseconds (`performance.now`) */
  now: () => number;
  /**
   * Does the frame's DOM work (`now`: the frame's start on the clock). Returns
   * the acks it owes, or null when nothing was pending and the DOM was not touched.
   */
  render: (now: number) => readonly { readonly id: string; readonly seq: number }[] | null;
  /** sends a round of acks to the kernel */
  ack: (msg: AcksMsg) => void;
  /**
   * After a frame that touched the DOM: what reads layout (scroll positions).
   * A loop of its own calls it after `render`; the page loop once every view
   * of the frame rendered.
   */
  settle?: () => void;
  /** the view's root came into sight or left it (the page loop watches it) */
  sight?: (inSight: boolean) => void;
  counters: Counters;
  /** runs the trailing ack round; `setTimeout` by default */
  timer?: Timer;
  /** least ms between ack rounds; {@link ACK_GAP_MS} unless changed (0: an ack per frame, no page budget) */
  ackGapMs?: number;
  /** the page's ack budget; {@link pageAckBudget} by default */
  budget?: AckBudget;
}

/**
 * Messages whose last acked seq a view remembers (the most recently acked):
 * a view open for a day of replies keeps a bounded record.
 */
export const ACKED_KEPT = 256;

export class FrameLoop {
  private handle: number | null = null;
  /** the page loop's slot, when frames come from the page */
  private readonly slot: FrameSlot | null;
  private disposed = false;
  /** per message: the highest seq rendered and not yet acked */
  private readonly owed = new Map<string, number>();
  /**
   * per message: the last seq acked, for the {@link ACKED_KEPT} messages acked
   * last (a message forgotten and acked again is acked at once, as a new one)
   */
  private readonly acked = new Map<string, number>();
  /** DOM time of the frames since the last round: sum and count */
  private owedMs = 0;
  private owedFrames = 0;
  private lastRound = Number.NEGATIVE_INFINITY;
  private trailing: number | null = null;
  private readonly timer: Timer;
  private readonly gapMs: number;
  private readonly budget: AckBudget;

  constructor(private readonly deps: FrameDeps) {
    this.timer = deps.timer ?? globalTimer;
    this.gapMs = Math.max(0, deps.ackGapMs ?? ACK_GAP_MS);
    this.budget = deps.budget ?? pageAckBudget();
    const priority = deps.priority ?? ((): Priority => "soon");
    const settle = () => this.deps.settle?.();
    const sight = (inSight: boolean) => this.deps.sight?.(inSight);
    this.slot =
      deps.page?.register(
        { run: (now) => this.frame(now), priority, settle, sight },
        deps.root ?? null,
      ) ?? null;
  }

  /** Makes sure a frame will run; cheap to call once per arriving message. */
  request(): void {
    if (this.disposed) {
      return;
    }
    if (this.slot !== null) {
      this.slot.request();
    } else if (this.handle === null) {
      this.handle = this.deps.scheduler.request(this.tick);
    }
  }

  /** Whether a frame is requested and has not run yet. */
  get pending(): boolean {
    return this.slot?.pending ?? this.handle !== null;
  }

  /** Cancels the pending frame; later requests are ignored. */
  dispose(): void {
    this.disposed = true;
    this.slot?.dispose();
    if (this.handle !== null) {
      this.deps.scheduler.cancel(this.handle);
      this.handle = null;
    }
    if (this.trailing !== null) {
      this.timer.clear(this.trailing);
      this.trailing = null;
    }
    this.budget.active.delete(this);
  }

  private readonly tick = (): void => {
    this.handle = null;
    if (!this.disposed && this.frame(this.deps.now())) {
      this.deps.settle?.();
    }
  };

  /** This view's part of a frame that started at `start`; whether it touched the DOM. */
  private frame(start: number): boolean {
    const { counters, now, render } = this.deps;
    counters.frames++;
    const t0 = this.slot === null ? start : now(); // in a shared frame, others ran before
    const acks = render(start);
    if (acks === null) {
      return false;
    }
    const renderMs = Math.round((now() - t0) * 1000) / 1000;
    counters.renders++;
    counters.render_ms += renderMs;
    counters.max_render_ms = Math.max(counters.max_render_ms, renderMs);
    if (acks.length === 0) {
      return true;
    }
    let urgent = false;
    for (const a of acks) {
      this.owed.set(a.id, a.seq);
      const last = this.acked.get(a.id);
      if (last === undefined || a.seq < last) {
        urgent = true; // a new message (or a new numbering): the kernel learns at once
      }
    }
    this.owedMs += renderMs;
    this.owedFrames++;
    const t = now();
    if (this.gapMs > 0) {
      this.budget.active.set(this, t);
    }
    if (urgent || this.gapMs === 0) {
      this.payRound();
      return true;
    }
    if (this.trailing === null) {
      const at = this.lastRound + gapFor(this.budget, this.gapMs, t);
      if (at <= t) {
        this.payRound();
      } else {
        this.trailing = this.timer.set(this.onTrailing, at - t);
      }
    }
    return true;
  }

  private readonly onTrailing = (): void => {
    this.trailing = null;
    if (!this.disposed) {
      this.payRound();
    }
  };

  /**
   * Sends every owed ack now, in one message (several of at most `MAX_ACKS`
   * when more are owed), with the mean DOM time of the frames since the last round.
   */
  private payRound(): void {
    if (this.trailing !== null) {
      this.timer.clear(this.trailing);
      this.trailing = null;
    }
    if (this.owed.size === 0) {
      return;
    }
    const { counters, ack, now } = this.deps;
    const renderMs = Math.round((this.owedMs / Math.max(1, this.owedFrames)) * 1000) / 1000;
    const entries: AckEntry[] = [];
    for (const [id, seq] of this.owed) {
      entries.push({ id, seq });
      this.acked.delete(id); // last acked, last in the record's order
      this.acked.set(id, seq);
    }
    for (const id of this.acked.keys()) {
      if (this.acked.size <= ACKED_KEPT) {
        break;
      }
      this.acked.delete(id); // the longest unacked: a message long finished
    }
    for (let i = 0; i < entries.length; i += MAX_ACKS) {
      const [first, ...rest] = entries.slice(i, i + MAX_ACKS);
      if (first !== undefined) {
        ack({ kind: "acks", acks: [first, ...rest], render_ms: renderMs });
        counters.ack_msgs++;
      }
    }
    counters.acks += entries.length;
    this.owed.clear();
    this.owedMs = 0;
    this.owedFrames = 0;
    this.lastRound = now();
  }
}
