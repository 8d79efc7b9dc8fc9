/**
 * Blocks skip layout only once they know their height, and not in the frame
 * that learnt it.
 *
 * widget.css lets a Markdown block that is out of sight skip style, layout
 * and paint (`content-visibility: auto`), counting at its last remembered
 * height (`contain-intrinsic-size: auto …`). A block that was never laid out
 * has no remembered height and would count as the 3em placeholder: when the
 * paragraph being written closes, the renderer inserts it as a new node, and
 * for one layout the list would shrink by the paragraph's height, clamping a
 * reader's scroll position to the top (found by tests/browser/scroll.mjs,
 * about one run in fifteen). So the class that enables skipping
 * ({@link SIZED_CLASS}) is only added once the block was laid out at its real
 * size, from a ResizeObserver: it reports after layout, and the browser
 * records the remembered height at that time.
 *
 * The class is not added in that observer's callback, though, but in batches,
 * at most every {@link SIZED_BATCH_MS}, from a timer. A class changed in a
 * ResizeObserver callback makes the browser run style and layout a second
 * time before it paints that frame, and a block that starts skipping has its
 * visibility decided by a second pass too; while an answer streams a block
 * closes in nearly every frame, so nearly every frame was laid out twice
 * (seen in benchmarks/browser_responsiveness.py's traces). From a timer the
 * classes join the next frame's one pass, and the extra pass of a newly
 * skipping block happens once per batch. A block waiting for its batch is laid
 * out in full, as every block was before skipping existed.
 *
 * One observer and one batch per window, shared by every message; each block
 * is observed until its first report. Runs on the browser's main thread.
 */

/** The class that lets a laid-out block skip layout while out of sight. */
export const SIZED_CLASS = "nbs-sized";

/** Least time between two batches of blocks allowed to skip layout, ms. */
export const SIZED_BATCH_MS = 500;

/**
 * How a view lets its blocks skip layout: in batches, as shipped, or "at-once",
 * in the observer's callback (the previous way, which benchmarks compare with:
 * the view's `debug.sized`, nbstream/widgets/protocol.py ViewDebug).
 */
export type SizedMode = "batched" | "at-once";

interface WindowState {
  observer: ResizeObserver;
  /** laid out, waiting for the next batch */
  pending: Set<Element>;
  timer: number | null;
}

/** blocks to mark in the observer's callback (their view's mode is "at-once") */
const atOnce = new WeakSet<Element>();

/** one per window (a widget's views may live in several, e.g. a detached output) */
const windows = new WeakMap<object, WindowState>();

function stateFor(el: Element): WindowState | null {
  const win = el.ownerDocument.defaultView;
  if (win === null || win.ResizeObserver === undefined) {
    return null;
  }
  let state = windows.get(win);
  if (state === undefined) {
    const pending = new Set<Element>();
    const flush = (): void => {
      created.timer = null;
      for (const target of pending) {
        target.classList.add(SIZED_CLASS);
      }
      pending.clear();
    };
    const observer = new win.ResizeObserver((entries) => {
      for (const entry of entries) {
        observer.unobserve(entry.target);
        if (atOnce.has(entry.target)) {
          entry.target.classList.add(SIZED_CLASS);
        } else {
          pending.add(entry.target);
        }
      }
      if (pending.size > 0 && created.timer === null) {
        created.timer = win.setTimeout(flush, SIZED_BATCH_MS);
      }
    });
    const created: WindowState = { observer, pending, timer: null };
    state = created;
    windows.set(win, state);
  }
  return state;
}

/**
 * Marks each element among `nodes` with {@link SIZED_CLASS} once it was laid out:
 * in the next batch, or with `mode` "at-once" in the observer's callback.
 */
export function markWhenLaidOut(nodes: Iterable<Node>, mode: SizedMode = "batched"): void {
  for (const node of nodes) {
    if (node.nodeType !== 1) {
      continue;
    }
    const el = node as Element;
    if (mode === "at-once") {
      atOnce.add(el);
    }
    // no ResizeObserver (jsdom, very old browsers): every block is laid out
    stateFor(el)?.observer.observe(el);
  }
}

/** Stops watching `nodes` (removed before their first layout, or before their batch). */
export function forget(nodes: Iterable<Node>): void {
  for (const node of nodes) {
    if (node.nodeType === 1 && !(node as Element).classList.contains(SIZED_CLASS)) {
      const state = stateFor(node as Element);
      state?.observer.unobserve(node as Element);
      state?.pending.delete(node as Element);
    }
  }
}
