/**
 * One frame loop for the whole page: every nbstream view on a page (chats,
 * Compare panes, `stream()` outputs, in any copy of the bundle) renders from
 * one animation-frame callback, under one budget.
 *
 * Why: a view's frame costs more than its script. Every frame that changes
 * the DOM makes the browser restyle, lay out, paint and layerize, and the
 * layerize step grows with everything the page has painted, whichever view
 * changed (Chromium, 8 chats of model-shaped Markdown: ~10 ms of Layerize in
 * every frame, 1.2 ms with one). Eight views on eight rAF schedules changed the
 * DOM in nearly every frame and made the page miss frames and a probe cell
 * wait. So the page loop:
 *
 * - requests one animation frame for all views, and runs the views that have
 *   something pending in it, oldest pending first (fairness: a view left over
 *   by one frame goes first in the next);
 * - measures what the frames it changes cost the page: from the frame's start
 *   to the first task after it (the browser's style, layout, paint and layerize
 *   included, and other rAF callbacks), smoothed; and, while several views
 *   stream, spaces the frames that change anything so that they take at most
 *   {@link PAGE_SHARE} of the main thread: every few frames with eight streams,
 *   each frame carrying more text (larger batches, less often; nothing is
 *   dropped: the text waits in each view's buffer). A frame's cost grows with
 *   the text it shows, so the spacing never grows past the point where frames
 *   cost more than {@link FRAME_TARGET_MS}: then it shrinks (smaller batches),
 *   and the budget below spreads the views over more frames. One stream alone
 *   renders every frame, as a loop of its own would: its token-to-pixel lag is
 *   what matters then;
 * - keeps the work of one frame under a budget: the views' script at most
 *   {@link FRAME_BUDGET_MS}, and less when the page's rendering costs many
 *   times the script (the ratio of a frame's cost to its script, measured),
 *   so that a frame aims at {@link FRAME_TARGET_MS} in all; at least one view
 *   runs in a frame, so every view advances;
 * - shows at once what must not wait (each view's {@link FrameWork.priority}):
 *   a stream's end in the next frame whatever the budget, spacing or sight;
 *   a new message or a status in the next frame within the budget, before
 *   any text; only more text of a stream waits for its turn;
 * - answers a person first: for {@link INPUT_WINDOW_MS} after a pointerdown or
 *   a keydown anywhere in the page, while several views stream, more text of a
 *   stream waits at least {@link MAX_SPACING_MS} between frames (what cannot
 *   wait still shows at once), so that what the input starts (a cell run, its
 *   request to the kernel, the output coming back, a keystroke's echo) finds
 *   the main thread free (32 streams through one kernel, a probe cell run by a
 *   click and Shift+Enter: see benchmarks/README.md). Only drawing waits: the
 *   text keeps arriving into the views' buffers (the kernel's flow window spans
 *   a few of a view's ack periods, longer than this);
 * - renders a view that is out of sight (an IntersectionObserver on its root)
 *   at most every {@link HIDDEN_MS}, and at once when it comes into sight; and
 *   tells the view ({@link FrameWork.sight}), which then keeps the browser from
 *   styling, laying out and painting its messages meanwhile (widget.css);
 * - calls each view's layout reads ({@link FrameWork.settle}: where to scroll)
 *   after every view of the frame wrote, so that the page is laid out once per
 *   frame, not once per view; and only for views in sight: reading the layout
 *   of a view out of sight would make the browser style and lay out what it
 *   skips there (JupyterLab marks cells out of sight `content-visibility:
 *   auto`), so such a view settles when it comes into sight.
 *
 * The loop lives on the window (`window.__nbstreamFrames1`), like the page's
 * ack budget in frame.ts, so that every copy of the bundle on the page shares
 * it; the `1` is the version of the {@link PageFrames} interface, so that a
 * copy with another interface makes its own. `stats` are for tests and
 * benchmarks. The scheduler, clocks and observers are injected, so that tests
 * drive frames by hand. Runs on the browser's main thread only.
 */
import { browserScheduler, type FrameScheduler } from "./frame";

/** Script time of all views in one frame, at most (ms). */
export const FRAME_BUDGET_MS = 8;
/** What a frame that changes the DOM aims to cost the page in all, rendering included (ms). */
export const FRAME_TARGET_MS = 30;
/** The frames that change the DOM take at most this share of the main thread. */
export const PAGE_SHARE = 0.5;
/** Frames that change the DOM are never spaced further apart than this (ms). */
export const MAX_SPACING_MS = 250;
/**
 * After a person's input (pointerdown, keydown), for this long, frames that only
 * carry more text of several streams are spaced {@link MAX_SPACING_MS} apart (ms).
 */
export const INPUT_WINDOW_MS = 400;
/** A view out of sight renders at most this often (ms), unless its work is urgent. */
export const HIDDEN_MS = 500;
/** A view that asked for a frame within this long counts as streaming (ms). */
const ACTIVE_MS = 1000;
/** A frame may come this much early and still count as spaced enough (ms): frame times jitter. */
const FRAME_SLACK_MS = 4;
/** The ratio of a frame's cost to its views' script is taken between these. */
const MIN_RATIO = 1;
const MAX_RATIO = 30;
/** Weight of the newest frame cost in the smoothed cost. */
const SMOOTHING = 0.25;
/** Margin around the viewport within which a view counts as in sight. */
const SIGHT_MARGIN = "200px";

/**
 * How soon a view's pending work must show: "now", a stream ended (the next
 * frame, whatever the budget, spacing or sight); "soon", a new message, a
 * status, a replaced text (the next frame within its budget, before any
 * text); "later", only more text of a stream (when its turn comes).
 */
export type Priority = "now" | "soon" | "later";

const RANK: Record<Priority, number> = { now: 0, soon: 1, later: 2 };

/** A view's share of the frames: what the page loop calls. */
export interface FrameWork {
  /**
   * Renders what the view holds pending (`now`: the frame's time, ms); whether
   * it touched the DOM. Writes only: reading layout here would lay the page out
   * once per view.
   */
  run(now: number): boolean;
  /** After every view of the frame ran: what reads layout (scroll positions). */
  settle?(): void;
  /**
   * The view's root came into sight or left it (its margin included): a view
   * out of sight may stop the browser from rendering what it shows (it will not
   * be seen before it comes back, and it runs again then).
   */
  sight?(inSight: boolean): void;
  /** How soon what is pending must show. */
  priority(): Priority;
}

/** A view's place in the page loop. */
export interface FrameSlot {
  /** The view has something pending: it runs in a coming frame. Cheap to call per message. */
  request(): void;
  /** Whether the view waits for a frame. */
  readonly pending: boolean;
  /** Leaves the loop; later requests are ignored. */
  dispose(): void;
}

/** The page-wide loop, as every copy of the bundle sees it (keep it stable: it is shared). */
export interface PageFrames {
  /** Adds a view; `root`: its element, to render it less often while out of sight. */
  register(work: FrameWork, root?: Element | null): FrameSlot;
  readonly stats: FrameStats;
}

/** Counters for tests and benchmarks; plain increments. */
export interface FrameStats {
  /** animation frames requested (at most one outstanding at any time) */
  requests: number;
  /** animation-frame callbacks run */
  frames: number;
  /** the most callbacks of this loop that ran within one frame (1: one loop) */
  max_callbacks_per_frame: number;
  /** frames in which at least one view touched the DOM */
  render_frames: number;
  /** view runs, over all views */
  runs: number;
  /** runs of work that could not wait (see {@link Priority}) in a frame where the
   * spacing, the budget or the view's being out of sight held the rest back */
  urgent_runs: number;
  /** times a view with pending work was left for a later frame (budget, spacing, out of sight) */
  deferred: number;
  /** views registered now */
  views: number;
  /** the smoothed cost of a frame that changes the DOM (ms), and the spacing it sets (ms) */
  frame_cost_ms: number;
  spacing_ms: number;
  /** the smoothed ratio of that cost to the views' script, and the script budget it sets (ms) */
  cost_ratio: number;
  budget_ms: number;
  /** long animation frames (> 50 ms) seen, and those of them that changed the DOM for views */
  long_frames: number;
  long_render_frames: number;
  /** views that asked for a frame within the last second, at the latest frame */
  streaming: number;
  /** a person's inputs seen (pointerdown, keydown), and frames whose text waited for one */
  inputs: number;
  input_held_frames: number;
  /** the latest frames that changed the DOM (at most {@link HISTORY}), oldest first */
  recent: RenderFrame[];
}

/** One frame that changed the DOM, for benchmarks. */
export interface RenderFrame {
  /** when the frame started (the loop's clock: `performance.now()` in a page) */
  at: number;
  /** views that ran */
  views: number;
  /** their script, and the layout reads after it (ms) */
  script_ms: number;
  settle_ms: number;
  /** from the frame's start to the first task after it, when measured (ms) */
  cost_ms: number | null;
}

/** Render frames kept in {@link FrameStats.recent}. */
export const HISTORY = 120;

/** Calls back after the current frame's rendering (the first task after it). */
export type AfterFrame = (callback: () => void) => void;

/** Tells the loop when a view's root comes into sight or leaves it. */
export interface SightWatcher {
  observe(el: Element, onChange: (inSight: boolean) => void): void;
  unobserve(el: Element): void;
}

export interface PageLoopDeps {
  scheduler: FrameScheduler;
  /** a monotonic clock in milliseconds (`performance.now`) */
  now: () => number;
  /** measures frame costs; none: frames are not measured (every frame may change the DOM) */
  afterFrame?: AfterFrame | null;
  /** out-of-sight views; none: every view counts as in sight */
  sight?: SightWatcher | null;
  /** calls back with the start and duration of each long animation frame (ms, the loop's
   * clock); returns a stop function */
  watchLongFrames?: ((onLong: (start: number, ms: number) => void) => () => void) | null;
  /** calls back on each of a person's inputs (pointerdown, keydown); returns a stop
   * function; none: inputs are not watched */
  watchInput?: ((onInput: () => void) => () => void) | null;
  /** script budget per frame, ms ({@link FRAME_BUDGET_MS}) */
  budgetMs?: number;
}

interface Slot extends FrameSlot {
  readonly work: FrameWork;
  /** when the view asked for a frame (clock ms); null: nothing pending */
  since: number | null;
  /** when it last ran, and last asked for a frame */
  lastRun: number;
  lastAsked: number;
  inSight: boolean;
  /** it rendered while out of sight and has not settled since */
  unsettled: boolean;
  root: Element | null;
}

export class PageLoop implements PageFrames {
  readonly stats: FrameStats = {
    requests: 0,
    frames: 0,
    max_callbacks_per_frame: 0,
    render_frames: 0,
    runs: 0,
    urgent_runs: 0,
    deferred: 0,
    views: 0,
    frame_cost_ms: 0,
    spacing_ms: 0,
    cost_ratio: 0,
    budget_ms: 0,
    long_frames: 0,
    long_render_frames: 0,
    streaming: 0,
    inputs: 0,
    input_held_frames: 0,
    recent: [],
  };
  private readonly slots = new Set<Slot>();
  private handle: number | null = null;
  private lastFrameTime: number | null = null;
  private callbacksThisFrame = 0;
  /** when the last frame that changed the DOM started */
  private lastRender = Number.NEGATIVE_INFINITY;
  /** the smoothed cost of such a frame; null until one was measured */
  private cost: number | null = null;
  /** the smoothed ratio of that cost to the views' script; null until measured */
  private ratio: number | null = null;
  /** the spacing while several views stream (ms; see {@link spacing}) */
  private spacingMs = 0;
  private stopLongFrames: (() => void) | null = null;
  private stopInput: (() => void) | null = null;
  /** when a person last pressed a key or a pointer (clock ms) */
  private inputAt = Number.NEGATIVE_INFINITY;
  private readonly budgetMs: number;

  constructor(private readonly deps: PageLoopDeps) {
    this.budgetMs = deps.budgetMs ?? FRAME_BUDGET_MS;
  }

  register(work: FrameWork, root: Element | null = null): FrameSlot {
    const loop = this;
    const slot: Slot = {
      work,
      since: null,
      lastRun: Number.NEGATIVE_INFINITY,
      lastAsked: Number.NEGATIVE_INFINITY,
      inSight: true,
      unsettled: false,
      root,
      request() {
        if (loop.slots.has(slot) && slot.since === null) {
          slot.since = loop.deps.now();
          slot.lastAsked = slot.since;
          loop.ensureFrame();
        }
      },
      get pending() {
        return slot.since !== null;
      },
      dispose() {
        if (loop.slots.delete(slot)) {
          slot.since = null;
          if (slot.root !== null) {
            loop.deps.sight?.unobserve(slot.root);
          }
          loop.stats.views = loop.slots.size;
          if (loop.slots.size === 0) {
            loop.idle();
          }
        }
      },
    };
    this.slots.add(slot);
    this.stats.views = this.slots.size;
    if (root !== null && this.deps.sight) {
      this.deps.sight.observe(root, (inSight) => {
        const came = inSight && !slot.inSight;
        const changed = inSight !== slot.inSight;
        slot.inSight = inSight;
        if (changed) {
          attempt(() => work.sight?.(inSight));
        }
        if (came && (slot.since !== null || slot.unsettled)) {
          this.ensureFrame(); // it renders and settles in the next frame (see tick)
        }
      });
    }
    if (this.stopLongFrames === null && this.deps.watchLongFrames) {
      this.stopLongFrames = this.deps.watchLongFrames((at, ms) => this.onLongFrame(at, ms));
    }
    if (this.stopInput === null && this.deps.watchInput) {
      this.stopInput = this.deps.watchInput(() => {
        this.stats.inputs++;
        this.inputAt = this.deps.now();
      });
    }
    return slot;
  }

  /** The views' script a frame may spend now (ms). */
  get budget(): number {
    if (this.ratio === null) {
      return this.budgetMs;
    }
    return Math.min(this.budgetMs, Math.max(1, FRAME_TARGET_MS / this.ratio));
  }

  /** The least time between two frames that change the DOM now (ms); none for one stream. */
  get spacing(): number {
    if (this.stats.streaming < 2) {
      return 0;
    }
    return this.spacingMs;
  }

  /** Whether a person's input came within {@link INPUT_WINDOW_MS} of `now` (clock ms). */
  private answeringInput(now: number): boolean {
    return this.stats.streaming >= 2 && now - this.inputAt < INPUT_WINDOW_MS;
  }

  private ensureFrame(): void {
    if (this.handle === null) {
      this.stats.requests++;
      this.handle = this.deps.scheduler.request(this.tick);
    }
  }

  private idle(): void {
    if (this.handle !== null) {
      this.deps.scheduler.cancel(this.handle);
      this.handle = null;
    }
    this.stopLongFrames?.();
    this.stopLongFrames = null;
    this.stopInput?.();
    this.stopInput = null;
  }

  private onLongFrame(at: number, ms: number): void {
    this.stats.long_frames++;
    // told apart for benchmarks: the frames' costs already steer the spacing and budget
    if (!this.stats.recent.some((f) => f.at >= at - 1 && f.at <= at + ms)) {
      return;
    }
    this.stats.long_render_frames++;
  }

  private readonly tick = (frameTime?: number): void => {
    this.handle = null;
    const { now } = this.deps;
    const start = now();
    this.stats.frames++;
    // a frame's callbacks share its timestamp (browsers pass it; a fake scheduler may not)
    const t = frameTime ?? start;
    this.callbacksThisFrame = this.lastFrameTime === t ? this.callbacksThisFrame + 1 : 1;
    this.lastFrameTime = t;
    this.stats.max_callbacks_per_frame = Math.max(
      this.stats.max_callbacks_per_frame,
      this.callbacksThisFrame,
    );

    let streaming = 0;
    for (const slot of this.slots) {
      if (start - slot.lastAsked < ACTIVE_MS) {
        streaming++;
      }
    }
    this.stats.streaming = streaming;
    const spacing = this.spacing;
    const budget = this.budget;
    this.stats.spacing_ms = round(spacing);
    this.stats.budget_ms = round(budget);
    const since = start - this.lastRender + FRAME_SLACK_MS;
    // while the page answers a person's input, text waits longer (see the module comment)
    const input = this.answeringInput(start) && since >= spacing;
    const due = since >= (input ? Math.max(spacing, MAX_SPACING_MS) : spacing);
    // what cannot wait first; then oldest pending first (a view left over keeps its
    // place for the next frame), a view out of sight counting from when its turn came
    const waiting = [...this.slots]
      .filter((s) => s.since !== null)
      .map((slot) => ({
        slot,
        priority: slot.work.priority(),
        since: slot.inSight
          ? (slot.since as number)
          : Math.max(slot.since as number, slot.lastRun + HIDDEN_MS),
      }));
    waiting.sort((a, b) => RANK[a.priority] - RANK[b.priority] || a.since - b.since);
    let spent = 0;
    let ran = 0;
    let touched = false;
    let heldForInput = false;
    const settle: Slot[] = [];
    for (const slot of this.slots) {
      if (slot.unsettled && slot.inSight && slot.since === null) {
        settle.push(slot); // came into sight with nothing new: its scroll position only
      }
    }
    for (const { slot, priority } of waiting) {
      if (!this.slots.has(slot)) {
        continue; // disposed by a view that ran before it
      }
      const hidden = !slot.inSight && start - slot.lastRun < HIDDEN_MS;
      const spentAll = ran > 0 && spent >= budget;
      const held = !due || hidden || spentAll;
      if (held && !(priority === "now" || (priority === "soon" && !spentAll))) {
        this.stats.deferred++;
        heldForInput ||= input && !due && !hidden && !spentAll;
        continue;
      }
      if (held) {
        this.stats.urgent_runs++;
      }
      slot.since = null; // a request made while it runs is a new one
      slot.lastRun = start;
      const t0 = now();
      if (attempt(() => slot.work.run(start)) || slot.unsettled) {
        touched = true;
        if (slot.inSight) {
          settle.push(slot);
        } else {
          slot.unsettled = true;
        }
      }
      spent += now() - t0;
      ran++;
      this.stats.runs++;
    }
    if (heldForInput) {
      this.stats.input_held_frames++;
    }
    // every view wrote; those in sight now read layout, laid out once for all
    const t1 = now();
    for (const slot of settle) {
      slot.unsettled = false;
      attempt(() => slot.work.settle?.());
    }
    if (touched || settle.length > 0) {
      this.stats.render_frames++;
      this.lastRender = start;
      const frame: RenderFrame = {
        at: round(start),
        views: ran,
        script_ms: round(spent),
        settle_ms: round(now() - t1),
        cost_ms: null,
      };
      this.stats.recent.push(frame);
      if (this.stats.recent.length > HISTORY) {
        this.stats.recent.shift();
      }
      this.measure(start, frame);
    }
    for (const slot of this.slots) {
      if (slot.since !== null) {
        this.ensureFrame();
        break;
      }
    }
  };

  /** Learns what the frame that started at `start` cost, once it was rendered. */
  private measure(start: number, frame: RenderFrame): void {
    const after = this.deps.afterFrame;
    if (!after) {
      return;
    }
    after(() => {
      const ms = this.deps.now() - start;
      frame.cost_ms = round(ms);
      this.cost = this.cost === null ? ms : this.cost + SMOOTHING * (ms - this.cost);
      this.stats.frame_cost_ms = round(this.cost);
      // the share rule spaces frames by what they cost; but a frame costs more the more
      // text it carries, so frames over the target shrink the spacing instead
      const byShare = this.cost / PAGE_SHARE;
      const next =
        this.cost > FRAME_TARGET_MS
          ? Math.min(byShare, this.spacingMs * (FRAME_TARGET_MS / this.cost))
          : byShare;
      this.spacingMs = Math.min(MAX_SPACING_MS, next);
      if (frame.script_ms >= 0.5) {
        const r = Math.min(MAX_RATIO, Math.max(MIN_RATIO, ms / frame.script_ms));
        this.ratio = this.ratio === null ? r : this.ratio + SMOOTHING * (r - this.ratio);
        this.stats.cost_ratio = round(this.ratio);
      }
    });
  }
}

const round = (ms: number): number => Math.round(ms * 10) / 10;

/** Runs one view's part of a frame: a view that fails must not stop the others. */
function attempt<T>(fn: () => T): T | false {
  try {
    return fn();
  } catch (err) {
    console.error("nbstream: a view's frame failed", err);
    return false;
  }
}

/** The first task after the current frame, by a message to ourselves (no 4 ms clamp). */
export function browserAfterFrame(win: Window & typeof globalThis): AfterFrame | null {
  if (typeof win.MessageChannel !== "function") {
    return null;
  }
  const channel = new win.MessageChannel();
  const waiting: (() => void)[] = [];
  channel.port1.onmessage = () => {
    const callbacks = waiting.splice(0);
    for (const cb of callbacks) {
      cb();
    }
  };
  return (cb) => {
    waiting.push(cb);
    if (waiting.length === 1) {
      channel.port2.postMessage(null);
    }
  };
}

/** A person's pointerdowns and keydowns anywhere in the window (captured, passive). */
export function browserInput(win: Window & typeof globalThis): (onInput: () => void) => () => void {
  return (onInput) => {
    const options = { capture: true, passive: true };
    const handler = () => onInput();
    win.addEventListener("pointerdown", handler, options);
    win.addEventListener("keydown", handler, options);
    return () => {
      win.removeEventListener("pointerdown", handler, options);
      win.removeEventListener("keydown", handler, options);
    };
  };
}

/** Views' roots in and out of the viewport (with a margin), by one IntersectionObserver. */
export function browserSight(win: Window & typeof globalThis): SightWatcher | null {
  if (typeof win.IntersectionObserver !== "function") {
    return null;
  }
  const handlers = new Map<Element, (inSight: boolean) => void>();
  const observer = new win.IntersectionObserver(
    (entries) => {
      for (const e of entries) {
        handlers.get(e.target)?.(e.isIntersecting);
      }
    },
    { rootMargin: SIGHT_MARGIN },
  );
  return {
    observe(el, onChange) {
      handlers.set(el, onChange);
      observer.observe(el);
    },
    unobserve(el) {
      handlers.delete(el);
      observer.unobserve(el);
    },
  };
}

/** Long animation frames (or, where the browser lacks them, long tasks). */
export function browserLongFrames(
  win: Window & typeof globalThis,
): ((onLong: (start: number, ms: number) => void) => () => void) | null {
  const Observer = win.PerformanceObserver;
  if (typeof Observer !== "function") {
    return null;
  }
  const types = Observer.supportedEntryTypes ?? [];
  const type = types.includes("long-animation-frame")
    ? "long-animation-frame"
    : types.includes("longtask")
      ? "longtask"
      : null;
  if (type === null) {
    return null;
  }
  return (onLong) => {
    const observer = new Observer((list) => {
      for (const e of list.getEntries()) {
        onLong(e.startTime, e.duration);
      }
    });
    observer.observe({ type, buffered: false });
    return () => observer.disconnect();
  };
}

const KEY = "__nbstreamFrames1";

/** The page's loop for window `win`, made on first use with the browser's frames and clock. */
export function pageFrames(win: Window & typeof globalThis): PageFrames {
  const holder = win as unknown as { [KEY]?: PageFrames };
  holder[KEY] ??= new PageLoop({
    // the frame's timestamp goes through: the loop tells frames apart by it
    scheduler:
      typeof win.requestAnimationFrame === "function"
        ? {
            request: (cb) => win.requestAnimationFrame(cb),
            cancel: (h) => win.cancelAnimationFrame(h),
          }
        : browserScheduler(win),
    now: () => win.performance.now(),
    afterFrame: browserAfterFrame(win),
    sight: browserSight(win),
    watchLongFrames: browserLongFrames(win),
    watchInput: browserInput(win),
  });
  return holder[KEY];
}

/**
 * A {@link FrameScheduler} whose frames are the page loop's: work that asks
 * for frames of its own (a long chat's placeholders and history, lazy.ts)
 * runs in the page's one animation-frame callback, under its budget, as
 * `priority` work of a view whose root is `root()` (read when the first frame
 * is asked for: the view may not be built yet when this is made), and less
 * often while that view is out of sight. `dispose` leaves the loop.
 */
export function loopScheduler(
  page: PageFrames,
  root: () => Element | null,
  priority: Priority = "soon",
): FrameScheduler & { dispose(): void } {
  const due = new Map<number, () => void>();
  let next = 1;
  let slot: FrameSlot | null = null;
  let disposed = false;
  const run = (): boolean => {
    if (due.size === 0) {
      return false;
    }
    const callbacks = [...due.values()];
    due.clear();
    for (const cb of callbacks) {
      cb();
    }
    return true;
  };
  return {
    request(cb) {
      const h = next++;
      if (disposed) {
        return h;
      }
      due.set(h, cb);
      slot ??= page.register({ run, priority: () => priority }, root());
      slot.request();
      return h;
    },
    cancel(h) {
      due.delete(h);
    },
    dispose() {
      disposed = true;
      due.clear();
      slot?.dispose();
    },
  };
}
