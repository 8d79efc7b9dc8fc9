/**
 * Blocks skip layout only once they know their height.
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
 * One observer per window, shared by every message; each block is observed
 * until its first report. Runs on the browser's main thread.
 */

/** The class that lets a laid-out block skip layout while out of sight. */
export const SIZED_CLASS = "nbs-sized";

/** one per window (a widget's views may live in several, e.g. a detached output) */
const observers = new WeakMap<object, ResizeObserver>();

function observerFor(el: Element): ResizeObserver | null {
  const win = el.ownerDocument.defaultView;
  if (win === null || win.ResizeObserver === undefined) {
    return null;
  }
  let observer = observers.get(win);
  if (observer === undefined) {
    const created: ResizeObserver = new win.ResizeObserver((entries) => {
      for (const entry of entries) {
        entry.target.classList.add(SIZED_CLASS);
        created.unobserve(entry.target);
      }
    });
    observer = created;
    observers.set(win, observer);
  }
  return observer;
}

/** Marks each element among `nodes` with {@link SIZED_CLASS} once it was laid out. */
export function markWhenLaidOut(nodes: Iterable<Node>): void {
  for (const node of nodes) {
    if (node.nodeType !== 1) {
      continue;
    }
    const el = node as Element;
    // no ResizeObserver (jsdom, very old browsers): every block is laid out
    observerFor(el)?.observe(el);
  }
}

/** Stops watching `nodes` (removed before their first layout). */
export function forget(nodes: Iterable<Node>): void {
  for (const node of nodes) {
    if (node.nodeType === 1 && !(node as Element).classList.contains(SIZED_CLASS)) {
      observerFor(node as Element)?.unobserve(node as Element);
    }
  }
}
