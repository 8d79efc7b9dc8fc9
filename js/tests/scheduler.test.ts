// @vitest-environment jsdom
// The page's one frame loop (scheduler.ts): many views share one animation-frame
// callback and one budget. Counts and order only: frames are driven by hand, and
// the clock is a fake that charges each view's run a set number of milliseconds.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type ChatRoot, mountChat } from "../src/chat";
import { renderOnce } from "../src/incremental";
import {
  browserInput,
  FRAME_BUDGET_MS,
  FRAME_TARGET_MS,
  type FrameWork,
  HIDDEN_MS,
  INPUT_WINDOW_MS,
  loopScheduler,
  MAX_SPACING_MS,
  PAGE_SHARE,
  PageLoop,
  type Priority,
  pageFrames,
  type SightWatcher,
} from "../src/scheduler";
import { FakeFrames, FakeModel, message } from "./fakes";

/** The answers of the benchmark corpus (benchmarks/corpus), model-shaped Markdown. */
const CORPUS_DIR = join(__dirname, "..", "..", "benchmarks", "corpus");
const ANSWERS = readdirSync(CORPUS_DIR)
  .filter((f) => f.endsWith(".md") && !f.endsWith(".reasoning.md"))
  .sort()
  .map((f) => readFileSync(join(CORPUS_DIR, f), "utf8").replace(/^\n+|\n+$/g, ""));

/** A clock the test moves; each view's run costs `runMs` (charged by the work itself). */
class Clock {
  t = 0;
  readonly now = () => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
}

/** A view's work that records when it ran and charges the clock `cost` ms. */
class Work implements FrameWork {
  runs: number[] = [];
  settles = 0;
  prio: Priority = "later";
  sight?: (inSight: boolean) => void;
  constructor(
    private readonly clock: Clock,
    public cost = 1,
    private readonly frameNo: () => number = () => 0,
  ) {}
  run(): boolean {
    this.runs.push(this.frameNo());
    this.clock.advance(this.cost);
    this.prio = "later";
    return true;
  }
  settle(): void {
    this.settles++;
  }
  priority(): Priority {
    return this.prio;
  }
}

/** Frames every 16.7 ms on the clock; `frame()` runs one and counts it. */
function harness(opts: { budgetMs?: number; measured?: (scriptMs: number) => number } = {}) {
  const clock = new Clock();
  const frames = new FakeFrames();
  let frameNo = 0;
  const pending: (() => void)[] = [];
  // a person's input, as the page's pointerdown and keydown listeners report it
  let onInput: (() => void) | null = null;
  const press = () => onInput?.();
  const loop = new PageLoop({
    scheduler: frames,
    now: clock.now,
    watchInput: (cb) => {
      onInput = cb;
      return () => {
        onInput = null;
      };
    },
    // the frame's cost, as a real browser would report it after rendering
    afterFrame: opts.measured ? (cb) => pending.push(cb) : null,
    ...(opts.budgetMs === undefined ? {} : { budgetMs: opts.budgetMs }),
  });
  const frame = () => {
    frameNo++;
    const start = clock.t;
    frames.frame();
    if (opts.measured) {
      clock.t = start + opts.measured(clock.t - start);
      for (const cb of pending.splice(0)) cb();
    }
    clock.t = Math.max(clock.t, start + 16.7);
  };
  const work = (cost = 1) => new Work(clock, cost, () => frameNo);
  return { clock, frames, loop, frame, work, press, frameNo: () => frameNo };
}

describe("PageLoop", () => {
  it("runs every view from one animation-frame request per frame", () => {
    const h = harness();
    const works = Array.from({ length: 8 }, () => h.work(0.5));
    const slots = works.map((w) => h.loop.register(w));
    for (let f = 0; f < 5; f++) {
      for (const s of slots) {
        s.request();
        s.request();
      }
      expect(h.frames.pending).toBe(1);
      h.frame();
    }
    expect(h.frames.requests).toBe(5);
    expect(h.loop.stats.frames).toBe(5);
    expect(h.loop.stats.max_callbacks_per_frame).toBe(1);
    for (const w of works) {
      expect(w.runs).toEqual([1, 2, 3, 4, 5]);
      expect(w.settles).toBe(5);
    }
    // nothing pending: no frame requested
    expect(h.frames.pending).toBe(0);
  });

  it("reads layout only after every view of the frame wrote", () => {
    const h = harness();
    const order: string[] = [];
    const make = (name: string): FrameWork => ({
      run: () => {
        order.push(`run ${name}`);
        return true;
      },
      settle: () => order.push(`settle ${name}`),
      priority: () => "later",
    });
    const a = h.loop.register(make("a"));
    const b = h.loop.register(make("b"));
    a.request();
    b.request();
    h.frame();
    expect(order).toEqual(["run a", "run b", "settle a", "settle b"]);
  });

  it("keeps a frame's script under the budget, oldest pending first: no view starves", () => {
    // each run costs 5 ms against an 8 ms budget: two views a frame
    const h = harness();
    const works = Array.from({ length: 8 }, () => h.work(5));
    const slots = works.map((w) => h.loop.register(w));
    for (let f = 0; f < 40; f++) {
      for (const s of slots) s.request(); // every view has more text every frame
      h.frame();
    }
    const perFrame = new Map<number, number>();
    for (const w of works) for (const f of w.runs) perFrame.set(f, (perFrame.get(f) ?? 0) + 1);
    expect(Math.max(...perFrame.values())).toBe(Math.ceil(FRAME_BUDGET_MS / 5));
    for (const w of works) {
      // 40 frames × 2 runs shared by 8 views: each runs every 4th frame
      expect(w.runs.length).toBeGreaterThanOrEqual(9);
      const gaps = w.runs.slice(1).map((f, i) => f - (w.runs[i] as number));
      expect(Math.max(...gaps)).toBeLessThanOrEqual(4);
    }
    expect(h.loop.stats.deferred).toBeGreaterThan(0);
  });

  it("runs at least one view a frame, however long one run takes", () => {
    const h = harness();
    const slow = h.work(100);
    const other = h.work(100);
    const a = h.loop.register(slow);
    const b = h.loop.register(other);
    for (let f = 0; f < 4; f++) {
      a.request();
      b.request();
      h.frame();
    }
    expect(slow.runs).toEqual([1, 3]);
    expect(other.runs).toEqual([2, 4]);
  });

  it("shows urgent work (a stream's end) in the next frame, over budget and spacing", () => {
    // frames cost 25 ms (so they come 25 ms apart): frames that change the DOM
    // are spaced 50 ms
    const h = harness({ measured: () => 25 });
    const works = Array.from({ length: 4 }, () => h.work(20)); // each alone exceeds the budget
    const slots = works.map((w) => h.loop.register(w));
    for (const s of slots) s.request();
    h.frame(); // the oldest runs, and the frame is measured
    expect(works.map((w) => w.runs)).toEqual([[1], [], [], []]);
    expect(h.loop.spacing).toBe(25 / PAGE_SHARE);
    for (const s of slots) s.request();
    // views 2 and 3 end their streams: the next frame renders them, though it is
    // not due yet, older views wait, and the first alone spends the budget
    (works[3] as Work).prio = "now";
    (works[2] as Work).prio = "now";
    h.frame();
    expect(works.map((w) => w.runs)).toEqual([[1], [], [2], [2]]);
    expect(h.loop.stats.urgent_runs).toBe(2);
    // frame 2 changed the DOM too: the next due frame is 4, and it runs the view
    // that waited longest (1, pending since frame 1), then the budget is spent
    h.frame();
    h.frame();
    expect(works.map((w) => w.runs)).toEqual([[1], [4], [2], [2]]);
    h.frame();
    h.frame();
    expect(works.map((w) => w.runs)).toEqual([[1, 6], [4], [2], [2]]);
  });

  it("shows a new message or a status soon: before any text, within the budget", () => {
    const h = harness();
    const works = Array.from({ length: 4 }, () => h.work(5)); // two runs fill the budget
    const slots = works.map((w) => h.loop.register(w));
    for (const s of slots) s.request();
    (works[2] as Work).prio = "soon";
    (works[3] as Work).prio = "soon";
    h.frame();
    // the two with a new message first, though the others waited as long; then the budget
    expect(works.map((w) => w.runs)).toEqual([[], [], [1], [1]]);
    h.frame();
    expect(works.map((w) => w.runs)).toEqual([[2], [2], [1], [1]]);
    // "soon" does not break the budget: three at once take two frames
    for (const s of slots) s.request();
    for (const w of works.slice(0, 3)) w.prio = "soon";
    h.frame();
    expect(works.map((w) => w.runs.length)).toEqual([2, 2, 1, 1]);
    h.frame();
    expect(works.map((w) => w.runs.length)).toEqual([2, 2, 2, 2]);
  });

  it("spends less script a frame when the page's rendering costs many times the script", () => {
    // frames cost 20 times their script: the script budget shrinks so that a frame
    // aims at FRAME_TARGET_MS in all
    const h = harness({ measured: (script) => 20 * script });
    const works = Array.from({ length: 8 }, () => h.work(1));
    const slots = works.map((w) => h.loop.register(w));
    for (let f = 0; f < 30; f++) {
      for (const s of slots) s.request();
      h.frame();
    }
    expect(h.loop.stats.cost_ratio).toBeCloseTo(20, 0);
    expect(h.loop.budget).toBeCloseTo(FRAME_TARGET_MS / 20, 1);
    // about FRAME_TARGET_MS / 20 ms of 1 ms runs a frame, not FRAME_BUDGET_MS
    const last = new Map<number, number>();
    for (const w of works)
      for (const f of w.runs.filter((x) => x > 20)) last.set(f, (last.get(f) ?? 0) + 1);
    expect(Math.max(...last.values())).toBeLessThanOrEqual(2);
  });

  it("spaces the frames that change the DOM by what they cost: larger batches, less often", () => {
    const cost = 20;
    const h = harness({ measured: () => cost });
    const w = h.work(1);
    const v = h.work(1);
    const slot = h.loop.register(w);
    const other = h.loop.register(v);
    for (let f = 0; f < 60; f++) {
      slot.request(); // new text every frame, in two views
      other.request();
      h.frame();
    }
    expect(h.loop.stats.streaming).toBe(2);
    expect(h.loop.spacing).toBeCloseTo(cost / PAGE_SHARE, 5);
    // frames 20 ms apart, renders at least 40 ms apart: every other frame, both views
    expect(w.runs.length).toBe(30);
    expect(w.runs.slice(0, 4)).toEqual([1, 3, 5, 7]);
    expect(v.runs).toEqual(w.runs);
    // a cheap page renders every frame
    const cheap = harness({ measured: () => 4 });
    const c = cheap.work(1);
    const cs = cheap.loop.register(c);
    const cs2 = cheap.loop.register(cheap.work(1));
    for (let f = 0; f < 20; f++) {
      cs.request();
      cs2.request();
      cheap.frame();
    }
    expect(c.runs.length).toBe(20);
  });

  it("renders one stream alone every frame, however much its frames cost", () => {
    const h = harness({ measured: () => 40 });
    const w = h.work(1);
    const slot = h.loop.register(w);
    h.loop.register(h.work(1)); // a view that does not stream
    for (let f = 0; f < 20; f++) {
      slot.request();
      h.frame();
    }
    expect(h.loop.stats.streaming).toBe(1);
    expect(h.loop.spacing).toBe(0);
    expect(w.runs.length).toBe(20);
  });

  it("answers a person's input first: several streams' text waits, their ends do not", () => {
    const h = harness({ measured: () => 10 }); // spacing 20 ms: every frame (16.7 ms, and slack)
    const a = h.work(1);
    const b = h.work(1);
    const sa = h.loop.register(a);
    const sb = h.loop.register(b);
    const streamFrames = (n: number) => {
      for (let f = 0; f < n; f++) {
        sa.request();
        sb.request();
        h.frame();
      }
    };
    streamFrames(30);
    expect(h.loop.spacing).toBeCloseTo(20, 5);
    const before = a.runs.length;
    const pressedAt = h.clock.t;
    const pressedFrame = h.frameNo();
    h.press(); // a click, then Shift+Enter
    streamFrames(3);
    h.press();
    streamFrames(40);
    expect(h.loop.stats.inputs).toBe(2);
    // within INPUT_WINDOW_MS of the last input, renders MAX_SPACING_MS apart
    const during = a.runs.filter(
      (f) => f > pressedFrame && (f - pressedFrame) * 16.7 <= 3 * 16.7 + INPUT_WINDOW_MS,
    );
    expect(during.length).toBeLessThanOrEqual(
      Math.ceil((3 * 16.7 + INPUT_WINDOW_MS) / MAX_SPACING_MS),
    );
    expect(during.length).toBeGreaterThan(0); // never held past MAX_SPACING_MS
    const gaps = during.slice(1).map((f, i) => (f - (during[i] as number)) * 16.7);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(MAX_SPACING_MS - 4);
    expect(h.loop.stats.input_held_frames).toBeGreaterThan(0);
    // afterwards, every frame again
    expect(a.runs.slice(-6)).toEqual([0, 1, 2, 3, 4, 5].map((i) => h.frameNo() - 5 + i));
    expect(b.runs).toEqual(a.runs);
    expect(a.runs.length).toBeGreaterThan(before);
    // a stream's end shows in the next frame even while the page answers input
    h.press();
    a.prio = "now";
    sa.request();
    h.frame();
    expect(a.runs.at(-1)).toBe(h.frameNo());
    expect(h.clock.t - pressedAt).toBeGreaterThan(INPUT_WINDOW_MS);
  });

  it("does not hold one stream alone for a person's input", () => {
    const h = harness({ measured: () => 10 });
    const w = h.work(1);
    const slot = h.loop.register(w);
    h.press();
    for (let f = 0; f < 10; f++) {
      slot.request();
      h.frame();
      h.press();
    }
    expect(w.runs).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(h.loop.stats.input_held_frames).toBe(0);
  });

  it("hears a person's pointerdowns and keydowns on the window until stopped", () => {
    let heard = 0;
    const stop = browserInput(window)(() => heard++);
    document.body.dispatchEvent(new Event("pointerdown", { bubbles: true }));
    document.body.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    document.body.dispatchEvent(new KeyboardEvent("keyup", { key: "Enter", bubbles: true }));
    expect(heard).toBe(2);
    stop();
    document.body.dispatchEvent(new KeyboardEvent("keydown", { key: "a", bubbles: true }));
    expect(heard).toBe(2);
  });

  it("counts long frames, telling those in which views rendered apart", () => {
    let report: (at: number, ms: number) => void = () => undefined;
    const clock = new Clock();
    const frames = new FakeFrames();
    const loop = new PageLoop({
      scheduler: frames,
      now: clock.now,
      watchLongFrames: (onLong) => {
        report = onLong;
        return () => undefined;
      },
    });
    const slot = loop.register(new Work(clock));
    report(0, 70); // the page's own work
    clock.advance(100);
    slot.request();
    frames.frame(); // a view renders in a frame that starts at 100 and turns out long
    report(99.5, 70);
    expect(loop.stats).toMatchObject({ long_frames: 2, long_render_frames: 1 });
  });

  it("shrinks the spacing, not grows it, when frames cost more than the target", () => {
    // a frame costs 4 ms plus 1 ms per 2 ms of text it shows (the text that
    // waited since the view's last turn): larger batches make longer frames
    let lastRender = 0;
    const h = harness({
      measured: (script) => {
        if (script === 0) {
          return 0; // no view ran: an empty frame
        }
        const start = h.clock.t - script;
        const cost = 4 + (start - lastRender) / 2;
        lastRender = start;
        return cost;
      },
    });
    const works = Array.from({ length: 4 }, () => h.work(0.5));
    const slots = works.map((w) => h.loop.register(w));
    const costs: number[] = [];
    for (let f = 0; f < 300; f++) {
      for (const s of slots) s.request();
      h.frame();
      costs.push(h.loop.stats.frame_cost_ms);
    }
    // it settles where frames cost about the target, not at the longest spacing
    expect(h.loop.spacing).toBeLessThan(MAX_SPACING_MS);
    expect(Math.max(...costs.slice(200))).toBeLessThanOrEqual(FRAME_TARGET_MS * 1.5);
    // a page whose frames are cheap is spaced by the share rule
    const cheap = harness({ measured: () => 12 });
    const c = [cheap.work(1), cheap.work(1)].map((w) => cheap.loop.register(w));
    for (let f = 0; f < 20; f++) {
      for (const s of c) s.request();
      cheap.frame();
    }
    expect(cheap.loop.spacing).toBeCloseTo(12 / PAGE_SHARE, 5);
  });

  it("renders a view out of sight at most every HIDDEN_MS, and at once when it comes into sight", () => {
    const watchers = new Map<Element, (inSight: boolean) => void>();
    const sight: SightWatcher = {
      observe: (el, cb) => watchers.set(el, cb),
      unobserve: (el) => watchers.delete(el),
    };
    const clock = new Clock();
    const frames = new FakeFrames();
    const loop = new PageLoop({ scheduler: frames, now: clock.now, sight });
    const el = document.createElement("div");
    const hidden = new Work(clock, 0);
    const told: boolean[] = [];
    hidden.sight = (inSight: boolean) => told.push(inSight);
    const shown = new Work(clock, 0);
    const hs = loop.register(hidden, el);
    const ss = loop.register(shown, document.createElement("div"));
    watchers.get(el)?.(false);
    const frameMs = 16.7;
    const n = Math.ceil((2 * HIDDEN_MS) / frameMs);
    for (let f = 0; f < n; f++) {
      hs.request();
      ss.request();
      frames.frame();
      clock.advance(frameMs);
    }
    expect(shown.runs.length).toBe(n);
    expect(hidden.runs.length).toBeGreaterThanOrEqual(2);
    expect(hidden.runs.length).toBeLessThanOrEqual(3);
    expect(hs.pending).toBe(true); // its text waits; nothing is lost
    // out of sight it never read layout (that would lay out what the browser skips)
    expect(hidden.settles).toBe(0);
    expect(shown.settles).toBe(n);
    watchers.get(el)?.(true);
    frames.frame();
    expect(hs.pending).toBe(false);
    expect(hidden.settles).toBe(1);
    expect(told).toEqual([false, true]); // the view was told, once per change
    // its stream's end shows at once even out of sight
    watchers.get(el)?.(false);
    hidden.prio = "now";
    hs.request();
    clock.advance(frameMs);
    frames.frame();
    expect(hs.pending).toBe(false);
    hs.dispose();
    expect(watchers.has(el)).toBe(false);
  });

  it("settles a view that rendered out of sight once it comes into sight, with nothing new", () => {
    const watchers = new Map<Element, (inSight: boolean) => void>();
    const clock = new Clock();
    const frames = new FakeFrames();
    const loop = new PageLoop({
      scheduler: frames,
      now: clock.now,
      sight: { observe: (el, cb) => watchers.set(el, cb), unobserve: (el) => watchers.delete(el) },
    });
    const el = document.createElement("div");
    const w = new Work(clock, 0);
    const slot = loop.register(w, el);
    watchers.get(el)?.(false);
    slot.request();
    frames.frame();
    expect([w.runs.length, w.settles, frames.pending]).toEqual([1, 0, 0]);
    watchers.get(el)?.(true); // scrolled into sight: a frame to settle it
    expect(frames.pending).toBe(1);
    frames.frame();
    expect([w.runs.length, w.settles]).toEqual([1, 1]);
  });

  it("keeps serving the other views when one view's frame throws", () => {
    const h = harness();
    const errors: unknown[] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => errors.push(args);
    try {
      const ok = h.work(1);
      const bad: FrameWork = {
        run: () => {
          throw new Error("boom");
        },
        priority: () => "later",
      };
      const a = h.loop.register(bad);
      const b = h.loop.register(ok);
      a.request();
      b.request();
      h.frame();
      expect(ok.runs).toEqual([1]);
      expect(errors.length).toBe(1);
      // and both can ask again
      a.request();
      b.request();
      expect(h.frames.pending).toBe(1);
      h.frame();
      expect(ok.runs).toEqual([1, 2]);
    } finally {
      console.error = original;
    }
  });

  it("cancels its frame when the last view leaves, and ignores a disposed view", () => {
    const h = harness();
    const w = h.work();
    const slot = h.loop.register(w);
    slot.request();
    expect(h.frames.pending).toBe(1);
    slot.dispose();
    expect(h.frames.pending).toBe(0);
    expect(h.frames.cancels).toBe(1);
    slot.request();
    expect(h.frames.pending).toBe(0);
    expect(h.loop.stats.views).toBe(0);
  });

  it("is one loop per window, shared by every copy of the bundle", () => {
    const a = pageFrames(window);
    const b = pageFrames(window);
    expect(a).toBe(b);
    expect((window as unknown as Record<string, unknown>).__nbstreamFrames1).toBe(a);
  });
});

describe("chats on one page loop", () => {
  let cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanups) c();
    cleanups = [];
    document.body.textContent = "";
  });

  /** N chats mounted on one loop whose clock charges each chat's render `runMs`. */
  const mountMany = (n: number, runMs: number) => {
    const clock = new Clock();
    const frames = new FakeFrames();
    const loop = new PageLoop({ scheduler: frames, now: clock.now });
    const chats = Array.from({ length: n }, () => {
      const model = new FakeModel({
        conversation: [
          message("u", { role: "user", status: "done", text: "go" }),
          message("a", { status: "running" }),
        ],
      });
      const el = document.createElement("div");
      document.body.appendChild(el);
      // every read of the clock in a render costs runMs: a slow renderer
      let inRender = false;
      const now = () => {
        if (inRender) clock.advance(runMs / 2);
        return clock.t;
      };
      cleanups.push(mountChat(model, el, { frames: loop, now, idle: null }));
      const root = el.querySelector(".nbs-chat") as ChatRoot;
      const text = () => el.querySelector('[data-id="a"] .nbs-text') as HTMLElement;
      return { model, el, root, text, setRendering: (on: boolean) => (inRender = on) };
    });
    const frame = () => {
      for (const c of chats) c.setRendering(true);
      frames.frame();
      for (const c of chats) c.setRendering(false);
      clock.advance(16.7);
    };
    return { chats, frames, loop, frame, clock };
  };

  it("N chats stream the corpus from one frame loop; every text ends complete and identical", () => {
    const n = 6;
    const { chats, frames, loop, frame } = mountMany(n, 3); // 3 ms a render: 3 chats a frame
    frame(); // the first paint
    const requests0 = frames.requests;
    const texts = chats.map((_, i) => ANSWERS[i % ANSWERS.length] as string);
    // cut each answer into pieces of 1 to 12 characters, dealt out in turns
    const pieces = texts.map((t, i) => {
      const out: string[] = [];
      let k = 0;
      let r = 7 + i;
      while (k < t.length) {
        r = (r * 1103515245 + 12345) % 2147483648;
        const len = 1 + (r % 12);
        out.push(t.slice(k, k + len));
        k += len;
      }
      return out;
    });
    const seqs = chats.map(() => 0);
    let frameCount = 0;
    while (pieces.some((p, i) => (seqs[i] as number) < p.length)) {
      chats.forEach((c, i) => {
        const p = pieces[i] as string[];
        for (let j = 0; j < 3 && (seqs[i] as number) < p.length; j++) {
          const seq = (seqs[i] as number) + 1;
          seqs[i] = seq;
          c.model.delta("a", seq, p[seq - 1] as string);
        }
      });
      expect(frames.pending).toBeLessThanOrEqual(1);
      frame();
      frameCount++;
    }
    // the streams end: every chat shows its end in the next frame
    chats.forEach((c, i) => {
      c.model.set("conversation", [
        message("u", { role: "user", status: "done", text: "go" }),
        message("a", { status: "done", text: texts[i] as string, seq: seqs[i] as number }),
      ]);
    });
    frame();
    frameCount++;
    for (const c of chats) {
      expect(c.el.querySelector('[data-id="a"]')?.getAttribute("data-status")).toBe("done");
    }
    chats.forEach((c, i) => {
      const want = document.createElement("div");
      want.appendChild(renderOnce(document, texts[i] as string));
      expect(c.text().textContent).toBe(want.textContent);
      expect(c.root.__nbstream.chars).toBe("go".length + (texts[i] as string).length);
    });
    // one callback per frame for all chats; the budget left some for later frames
    expect(frames.requests - requests0).toBeLessThanOrEqual(frameCount);
    expect(loop.stats.max_callbacks_per_frame).toBe(1);
    expect(loop.stats.deferred).toBeGreaterThan(0);
    expect(frames.pending).toBe(0);
  });

  it("a chat out of sight has its messages skipped by the browser until it comes back", () => {
    const watchers = new Map<Element, (inSight: boolean) => void>();
    const frames = new FakeFrames();
    const loop = new PageLoop({
      scheduler: frames,
      now: () => 0,
      sight: { observe: (el, cb) => watchers.set(el, cb), unobserve: (el) => watchers.delete(el) },
    });
    const model = new FakeModel({ conversation: [message("a")] });
    const el = document.createElement("div");
    document.body.appendChild(el);
    cleanups.push(mountChat(model, el, { frames: loop, idle: null }));
    const root = el.querySelector(".nbs-chat") as HTMLElement;
    expect(root.classList.contains("nbs-out-of-sight")).toBe(false);
    watchers.get(root)?.(false);
    expect(root.classList.contains("nbs-out-of-sight")).toBe(true);
    watchers.get(root)?.(true);
    expect(root.classList.contains("nbs-out-of-sight")).toBe(false);
  });

  it("per-view frames stay selectable: a request per view", () => {
    const frames = new FakeFrames();
    for (let i = 0; i < 3; i++) {
      const model = new FakeModel({ conversation: [message("a")] });
      const el = document.createElement("div");
      document.body.appendChild(el);
      cleanups.push(mountChat(model, el, { frames: "per-view", scheduler: frames, idle: null }));
      model.delta("a", 1, "x");
    }
    expect(frames.requests).toBe(3);
  });
});

describe("loopScheduler", () => {
  it("runs frames asked of it in the page loop's frames, and leaves the loop when disposed", () => {
    const frames = new FakeFrames();
    const loop = new PageLoop({ scheduler: frames, now: () => 0 });
    const root = document.createElement("div");
    const sched = loopScheduler(loop, () => root, "later");
    expect(loop.stats.views).toBe(0); // registered on its first request only
    const ran: string[] = [];
    sched.request(() => ran.push("a"));
    const b = sched.request(() => ran.push("b"));
    sched.cancel(b);
    expect(loop.stats.views).toBe(1);
    expect(frames.pending).toBe(1);
    frames.frame();
    expect(ran).toEqual(["a"]);
    expect(frames.pending).toBe(0);
    sched.request(() => ran.push("c"));
    frames.frame();
    expect(ran).toEqual(["a", "c"]);
    sched.dispose();
    expect(loop.stats.views).toBe(0);
    sched.request(() => ran.push("d"));
    expect(frames.pending).toBe(0);
    expect(ran).toEqual(["a", "c"]);
  });
});
