/**
 * Which messages a chat shows when its conversation has alternatives (an edited
 * question, a regenerated answer): the path from a root to the `current`
 * message (a state key the kernel writes), and, for each message on it, its
 * place among its siblings (the `‹ 2 / 3 ›` switch). Pure: no DOM.
 *
 * Each message's meta names its `parent` (null: a first message); messages with
 * the same parent are siblings, oldest first. States saved by older versions
 * name no parents and no `current`: their messages follow each other in id
 * order, so every message shows, as before. See `nbstream/conversation/branches.py` for the
 * kernel's side. Runs on the browser's main thread only.
 */

/** What the branch needs of a message. */
export interface BranchNode {
  readonly id: string;
  /** undefined: an older state's message, which follows the one before it */
  readonly parent?: string | null;
}

/** A message's place among its siblings. */
export interface Siblings {
  /** 1-based position */
  readonly index: number;
  readonly count: number;
  readonly prev: string | null;
  readonly next: string | null;
}

export interface Branch {
  /** the ids shown, in order */
  readonly order: string[];
  /** for the messages shown that have siblings: their place */
  readonly siblings: ReadonlyMap<string, Siblings>;
}

const ROOT = "";

/** The branch through `current` (null or unknown: the newest message) of `nodes` (in id order). */
export function visibleBranch(nodes: readonly BranchNode[], current: string | null): Branch {
  const parentOf = new Map<string, string | null>();
  const children = new Map<string, string[]>();
  let previous: string | null = null;
  for (const n of nodes) {
    const parent = n.parent === undefined ? previous : n.parent;
    parentOf.set(n.id, parent);
    const key = parent ?? ROOT;
    const kids = children.get(key);
    if (kids === undefined) {
      children.set(key, [n.id]);
    } else {
      kids.push(n.id);
    }
    previous = n.id;
  }
  const leaf = current !== null && parentOf.has(current) ? current : previous;
  const order: string[] = [];
  const seen = new Set<string>();
  for (let id = leaf; id !== null && !seen.has(id); id = parentOf.get(id) ?? null) {
    seen.add(id); // (a cycle cannot come from the kernel; guard anyway)
    order.push(id);
  }
  order.reverse();
  const siblings = new Map<string, Siblings>();
  for (const id of order) {
    const kids = children.get(parentOf.get(id) ?? ROOT) ?? [id];
    if (kids.length > 1) {
      const i = kids.indexOf(id);
      siblings.set(id, {
        index: i + 1,
        count: kids.length,
        prev: i > 0 ? (kids[i - 1] ?? null) : null,
        next: i < kids.length - 1 ? (kids[i + 1] ?? null) : null,
      });
    }
  }
  return { order, siblings };
}
