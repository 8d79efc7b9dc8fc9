/**
 * The per-view conversation model. Pure: no DOM, no clock, no I/O.
 *
 * Owns, per message, what this view holds (its parts: `text`, the answer, and
 * `reasoning`; `seq`; status, error, detail, stats, finish reason, loading
 * progress) and what
 * changed since the last frame took its changes, so that the renderer touches
 * only that: text or reasoning appended, replaced, or the message's chrome.
 *
 * Two ways in. A kernel of this version writes per-message keys, which
 * keys.ts reads from the model and hands over with {@link Conversation.applyMeta}
 * (the chrome), {@link Conversation.applyParts} (delta `seq` of a message,
 * applied only as our seq + 1: keys are immutable, so the reader just asks
 * again later) and {@link Conversation.remove}. Older kernels (and notebooks
 * they saved) send a `conversation` list and `delta` custom messages, applied
 * with the rules below.
 *
 * Applies the sequence rules of `nbstream/widgets/protocol.py`:
 * - a state entry whose seq is >= ours replaces our text (when it merely
 *   extends our text, the rest is recorded as an append);
 * - a delta whose seq is ours + 1 is appended;
 * - a delta whose seq is <= ours is already contained and is ignored;
 * - a delta whose seq is > ours + 1 (one was lost) or for a message we do not
 *   know is dropped, and a resync is reported, at most once per message until
 *   the view holds every delta it dropped (the kernel's answer, a state entry,
 *   brings it at least that far) — or until {@link RESYNC_RETRY_MS} have passed
 *   with deltas still dropped: a resync can be lost too (seen after a page
 *   reload, when JupyterLab routes the new page's first comm messages to a
 *   kernel subshell), so it is sent again, at most once per that interval.
 * A state entry whose seq is lower than ours never rolls the text back; its
 * status and the rest are still taken (state arrives in order, so it is the
 * newest word on them). A delta for a message whose status is final is
 * ignored: such a message never changes again.
 *
 * Only the view's thread (the browser's main thread) calls it.
 */
import {
  type DeltaMsg,
  type DeltaParts,
  FINAL_STATUSES,
  type LoadingMeta,
  type MessageMeta,
  type MessageState,
  type ResyncMsg,
  type ToolCallMeta,
  type ToolRun,
  toMessageState,
} from "./protocol";

/** An unanswered resync is sent again after this many milliseconds (see the module comment). */
export const RESYNC_RETRY_MS = 1000;

/**
 * A reply's tool calls (#20): their metas, and its parts from the first of the
 * tool loop's runs on, in order. The text before them (the model's first words
 * and thinking) is the head of `text` / `reasoning`, shown as a reply without
 * tools shows it; `text` and `reasoning` still hold every round's.
 */
export interface ToolParts {
  /** the meta's `tools`, in call order (absent: no tool call) */
  tools?: (ToolCallMeta | null)[];
  /** where the tool loop's parts start: the lengths of `text` and `reasoning` then */
  toolHead?: { text: number; reasoning: number };
  /** the runs from there on, in order (answer and reasoning text of later rounds too) */
  toolTail?: ToolRun[];
}

/** One message as this view holds it. */
export type Entry = MessageState & ToolParts;

interface Tracked extends Entry {
  /** text appended since the last take, in arrival order */
  appended: string[];
  /** reasoning appended since the last take */
  reasoningAppended: string[];
  /** tool-loop runs appended since the last take (see {@link ToolParts}) */
  tailAppended: ToolRun[];
  /** the text was replaced since the last take */
  replaced: boolean;
  /** role, status, error, detail, stats or pane changed since the last take */
  meta: boolean;
  /** a delta was applied since the last take (an ack is due, if it was ever live) */
  delta: boolean;
  /**
   * the view saw this message queued, loading or running: its deltas are acked.
   * A message final when first seen (a loaded history, a finished reply) is not:
   * the kernel no longer streams it, and a thousand acks would cost it a
   * thousand busy and idle statuses for nothing.
   */
  wasLive: boolean;
  /** highest seq dropped since the resync reported for this message; null: none outstanding */
  gapUntil: number | null;
  /** when the outstanding resync was reported (the `now` given to applyDelta) */
  gapAt: number;
}

/** What changed in one message since the last take. */
export interface MessageChange {
  readonly entry: Readonly<Entry>;
  /** render `entry.text` from scratch */
  readonly replaced: boolean;
  /** text to append to what was rendered (empty when `replaced`) */
  readonly appended: string;
  /** reasoning to append to what was rendered (empty when `replaced`) */
  readonly reasoningAppended: string;
  /** tool-loop runs to add to what was rendered (absent or empty when `replaced`) */
  readonly tail?: readonly ToolRun[];
  /** the message's chrome changed (role, status, error, detail, stats) */
  readonly meta: boolean;
}

/** Everything a frame has to render, and the acks it owes afterwards. */
export interface Changes {
  /** the new order of message ids when membership or order changed, else null */
  readonly order: readonly string[] | null;
  readonly messages: readonly MessageChange[];
  /** per message that received deltas: the highest seq this frame renders */
  readonly acks: readonly { readonly id: string; readonly seq: number }[];
}

export type DeltaOutcome =
  | "applied" // appended; a frame is due
  | "stale" // already contained, or the message is final: ignored
  | "gap" // a delta was lost: dropped
  | "unknown"; // no such message (yet): dropped

export interface DeltaResult {
  readonly outcome: DeltaOutcome;
  /** the resync to send, or null (none needed, or one is outstanding) */
  readonly resync: ResyncMsg | null;
}

/** The number of an id `m<n>` (ids of older kernels or tests: Infinity, kept in arrival order). */
function idNumber(id: string): number {
  const m = /^m(\d+)$/.exec(id);
  return m === null ? Number.POSITIVE_INFINITY : Number(m[1]);
}

function sameStats(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  if (a === b) {
    return true;
  }
  try {
    return JSON.stringify(a) === JSON.stringify(b);
  } catch {
    return false;
  }
}

function sameProgress(a: LoadingMeta | undefined, b: LoadingMeta | undefined): boolean {
  return a === b || (a?.text === b?.text && a?.fraction === b?.fraction);
}

export class Conversation {
  private readonly entries = new Map<string, Tracked>();
  private order: string[] = [];
  private orderChanged = false;
  private readonly dirty = new Set<Tracked>();
  /** unknown ids a resync was reported for (and when), until a state entry names them */
  private readonly unknownReported = new Map<string, number>();

  /** The messages in order. */
  list(): Entry[] {
    const out: Entry[] = [];
    for (const id of this.order) {
      const e = this.entries.get(id);
      if (e) {
        out.push(e);
      }
    }
    return out;
  }

  get(id: string): Readonly<Entry> | undefined {
    return this.entries.get(id);
  }

  /** The oldest message that is not final (what Stop and Escape stop), if any. */
  firstActive(): Readonly<Entry> | undefined {
    for (const id of this.order) {
      const e = this.entries.get(id);
      if (e && e.role !== "user" && !FINAL_STATUSES.has(e.status)) {
        return e;
      }
    }
    return undefined;
  }

  /** Whether anything changed since the last {@link take}. */
  hasChanges(): boolean {
    return this.orderChanged || this.dirty.size > 0;
  }

  /**
   * What kind of change waits for the next {@link take}: "ended", a reply
   * became final (a stream's end, a stop, an error; a question is final from
   * the start, so it is only "changed"); "changed", anything else
   * but text appended (a message came or went, a status or other chrome, a
   * replaced text); "appended", only text or reasoning appended to messages
   * (or nothing). The page's frame loop shows the first at once and batches
   * the last.
   */
  pendingKind(): "ended" | "changed" | "appended" {
    let kind: "ended" | "changed" | "appended" = this.orderChanged ? "changed" : "appended";
    for (const e of this.dirty) {
      if (e.meta && e.role !== "user" && FINAL_STATUSES.has(e.status)) {
        return "ended";
      }
      if (e.replaced || e.meta) {
        kind = "changed";
      }
    }
    return kind;
  }

  /**
   * Applies the `conversation` trait. Its list defines which messages exist and
   * their order; malformed entries are skipped. Returns whether anything
   * changed (a frame is due).
   */
  applyState(raw: unknown): boolean {
    const items = Array.isArray(raw) ? raw : [];
    const seen = new Set<string>();
    const nextOrder: string[] = [];
    for (const item of items) {
      const s = toMessageState(item);
      if (s === null || seen.has(s.id)) {
        continue;
      }
      seen.add(s.id);
      nextOrder.push(s.id);
      this.unknownReported.delete(s.id);
      const e = this.entries.get(s.id);
      if (e === undefined) {
        this.entries.set(s.id, {
          ...s,
          appended: [],
          reasoningAppended: [],
          tailAppended: [],
          replaced: true,
          meta: true,
          delta: false,
          wasLive: !FINAL_STATUSES.has(s.status),
          gapUntil: null,
          gapAt: 0,
        });
        this.dirty.add(this.entries.get(s.id) as Tracked);
        continue;
      }
      this.applyEntry(e, s);
    }
    for (const id of this.order) {
      if (!seen.has(id)) {
        const e = this.entries.get(id);
        if (e) {
          this.dirty.delete(e);
        }
        this.entries.delete(id);
      }
    }
    if (nextOrder.length !== this.order.length || nextOrder.some((id, i) => id !== this.order[i])) {
      this.order = nextOrder;
      this.orderChanged = true;
    }
    return this.hasChanges();
  }

  private applyEntry(e: Tracked, s: MessageState): void {
    if (s.seq >= e.seq && (s.text !== e.text || s.reasoning !== e.reasoning)) {
      if (!e.replaced && s.text.startsWith(e.text) && s.reasoning.startsWith(e.reasoning)) {
        e.appended.push(s.text.slice(e.text.length));
        e.reasoningAppended.push(s.reasoning.slice(e.reasoning.length));
      } else {
        e.replaced = true;
        e.appended = [];
        e.reasoningAppended = [];
      }
      e.text = s.text;
      e.reasoning = s.reasoning;
      this.dirty.add(e);
    }
    if (s.seq > e.seq) {
      e.seq = s.seq;
    }
    this.checkRepaired(e);
    this.applyChrome(e, s);
  }

  /** Takes role, status, error, detail, stats, pane, finish reason and loading progress; marks meta if any differ. */
  private applyChrome(
    e: Tracked,
    s: Omit<MessageState, "id" | "text" | "reasoning" | "seq" | "error" | "detail"> & {
      error?: string | null;
      detail?: string | null;
      tools?: (ToolCallMeta | null)[];
    },
  ): void {
    const error = s.error ?? null;
    const detail = s.detail ?? null;
    if (!FINAL_STATUSES.has(s.status)) {
      e.wasLive = true;
    }
    if (
      e.role !== s.role ||
      e.status !== s.status ||
      e.error !== error ||
      e.detail !== detail ||
      e.pane !== s.pane ||
      e.finish_reason !== s.finish_reason ||
      !sameProgress(e.progress, s.progress) ||
      !sameStats(e.stats, s.stats) ||
      !sameStats(e.options ?? {}, s.options ?? {}) ||
      !sameStats({ t: e.tools ?? null }, { t: s.tools ?? null })
    ) {
      e.role = s.role;
      e.status = s.status;
      e.error = error;
      e.detail = detail;
      e.stats = s.stats;
      if (s.pane === undefined) {
        delete e.pane;
      } else {
        e.pane = s.pane;
      }
      if (s.finish_reason === undefined) {
        delete e.finish_reason;
      } else {
        e.finish_reason = s.finish_reason;
      }
      if (s.progress === undefined) {
        delete e.progress;
      } else {
        e.progress = s.progress;
      }
      if (s.options === undefined) {
        delete e.options;
      } else {
        e.options = s.options;
      }
      if (s.tools === undefined) {
        delete e.tools;
      } else {
        e.tools = s.tools;
      }
      e.meta = true;
      this.dirty.add(e);
    }
  }

  /** The number of the last delta applied to message `id` (-1: no such message). */
  seqOf(id: string): number {
    return this.entries.get(id)?.seq ?? -1;
  }

  /**
   * Creates or updates message `id` (ids `m<n>` are kept in the order of `n`)
   * from its meta key: everything but an assistant's text, which comes in deltas.
   */
  applyMeta(id: string, meta: MessageMeta): void {
    let e = this.entries.get(id);
    if (e === undefined) {
      e = {
        id,
        role: meta.role,
        text: "",
        reasoning: "",
        seq: 0,
        status: meta.status,
        error: null,
        detail: null,
        stats: {},
        appended: [],
        reasoningAppended: [],
        tailAppended: [],
        replaced: true,
        meta: true,
        delta: false,
        wasLive: false,
        gapUntil: null,
        gapAt: 0,
      };
      if (meta.parent !== undefined) {
        e.parent = meta.parent; // set once: a message never moves in the tree
      }
      this.entries.set(id, e);
      this.insertOrdered(id);
      this.dirty.add(e);
    }
    if (meta.text !== undefined && meta.text !== e.text) {
      e.text = meta.text; // a prompt's text travels in its meta
      e.replaced = true;
      e.appended = [];
      this.dirty.add(e);
    }
    if (meta.attachments !== undefined && e.attachments === undefined) {
      e.attachments = meta.attachments; // a prompt's attachments, once (it never changes)
      e.meta = true;
      this.dirty.add(e);
    }
    this.applyChrome(e, meta);
  }

  /**
   * Applies delta `seq` of message `id` (from its key) if it is the next one;
   * returns whether it did. Unlike an older kernel's delta, it is applied to a
   * final message too: a final meta says how many deltas the message has.
   */
  applyParts(id: string, seq: number, parts: DeltaParts): boolean {
    const e = this.entries.get(id);
    if (e === undefined || seq !== e.seq + 1) {
      return false;
    }
    if ((parts.runs !== undefined && parts.runs !== null) || e.toolHead !== undefined) {
      this.appendToolRuns(e, seq, parts);
    } else {
      this.appendDelta(e, seq, parts.text, parts.reasoning);
    }
    return true;
  }

  /**
   * A delta of a reply in (or entering) the tool loop: the text before its first
   * tool-loop run goes where a plain reply's goes; the rest, in order, to the tail.
   */
  private appendToolRuns(e: Tracked, seq: number, parts: DeltaParts): void {
    const runs: ToolRun[] =
      parts.runs ??
      [
        { type: "reasoning" as const, text: parts.reasoning },
        { type: "answer" as const, text: parts.text },
      ].filter((r) => r.text !== "");
    let head = "";
    let headReasoning = "";
    let i = 0;
    if (e.toolHead === undefined) {
      for (; i < runs.length; i++) {
        const r = runs[i] as ToolRun;
        if (r.type === "answer") {
          head += r.text;
        } else if (r.type === "reasoning") {
          headReasoning += r.text;
        } else {
          break;
        }
      }
    }
    this.appendDelta(e, seq, head, headReasoning);
    if (i < runs.length && e.toolHead === undefined) {
      e.toolHead = { text: e.text.length, reasoning: e.reasoning.length };
      e.toolTail = [];
    }
    const tail = e.toolTail ?? [];
    for (; i < runs.length; i++) {
      const r = runs[i] as ToolRun;
      if (r.type === "answer") {
        e.text += r.text;
      } else if (r.type === "reasoning") {
        e.reasoning += r.text;
      }
      tail.push(r);
      if (!e.replaced) {
        e.tailAppended.push(r);
      }
    }
  }

  /**
   * Message `id` is to be rendered whole at the next {@link take} (a chunk it
   * missed arrived: chunks.ts). Between two takes an entry already holds the
   * text that arrived since the last one, so a list must not render it whole
   * by itself: the appended text of the next take would come twice.
   */
  rerender(id: string): void {
    const e = this.entries.get(id);
    if (e === undefined) {
      return;
    }
    e.replaced = true;
    this.dirty.add(e);
  }

  /** Forgets message `id` (removed by Clear or Regenerate). */
  remove(id: string): void {
    const e = this.entries.get(id);
    if (e === undefined) {
      return;
    }
    this.dirty.delete(e);
    this.entries.delete(id);
    this.order = this.order.filter((x) => x !== id);
    this.orderChanged = true;
  }

  /** The ids of the messages held, in order. */
  ids(): readonly string[] {
    return this.order;
  }

  private insertOrdered(id: string): void {
    const n = idNumber(id);
    let i = this.order.length;
    while (i > 0 && idNumber(this.order[i - 1] as string) > n) {
      i--;
    }
    this.order.splice(i, 0, id);
    this.orderChanged = true;
  }

  private appendDelta(e: Tracked, seq: number, text: string, reasoning: string): void {
    e.seq = seq;
    this.checkRepaired(e);
    if (text.length > 0) {
      e.text += text;
      if (!e.replaced) {
        e.appended.push(text);
      }
    }
    if (reasoning.length > 0) {
      e.reasoning += reasoning;
      if (!e.replaced) {
        e.reasoningAppended.push(reasoning);
      }
    }
    e.delta = true;
    this.dirty.add(e);
  }

  /**
   * Applies one delta (see the module comment for the rules). `now` (ms, any
   * monotonic clock) only decides when an unanswered resync is sent again.
   */
  applyDelta(d: DeltaMsg, now = 0): DeltaResult {
    const e = this.entries.get(d.id);
    if (e === undefined) {
      const at = this.unknownReported.get(d.id);
      if (at !== undefined && now - at < RESYNC_RETRY_MS) {
        return { outcome: "unknown", resync: null };
      }
      this.unknownReported.set(d.id, now);
      return { outcome: "unknown", resync: { kind: "resync", id: d.id, have: 0 } };
    }
    if (d.seq <= e.seq || FINAL_STATUSES.has(e.status)) {
      return { outcome: "stale", resync: null };
    }
    if (d.seq > e.seq + 1) {
      if (e.gapUntil !== null) {
        // The answer to the outstanding resync will contain this one too...
        e.gapUntil = Math.max(e.gapUntil, d.seq);
        if (now - e.gapAt < RESYNC_RETRY_MS) {
          return { outcome: "gap", resync: null };
        }
        // ...unless it is long overdue: that resync may have been lost.
      }
      e.gapUntil = Math.max(e.gapUntil ?? 0, d.seq);
      e.gapAt = now;
      return { outcome: "gap", resync: { kind: "resync", id: e.id, have: e.seq } };
    }
    this.appendDelta(e, d.seq, d.text, d.reasoning ?? "");
    return { outcome: "applied", resync: null };
  }

  private checkRepaired(e: Tracked): void {
    if (e.gapUntil !== null && e.seq >= e.gapUntil) {
      e.gapUntil = null;
    }
  }

  /** Hands over what changed since the last take and forgets it; null if nothing. */
  take(): Changes | null {
    if (!this.hasChanges()) {
      return null;
    }
    const messages: MessageChange[] = [];
    const acks: { id: string; seq: number }[] = [];
    for (const e of this.dirty) {
      const appended = e.replaced ? "" : e.appended.join("");
      const reasoningAppended = e.replaced ? "" : e.reasoningAppended.join("");
      const tail = e.replaced ? [] : e.tailAppended;
      if (
        e.replaced ||
        appended.length > 0 ||
        reasoningAppended.length > 0 ||
        tail.length > 0 ||
        e.meta
      ) {
        messages.push({
          entry: e,
          replaced: e.replaced,
          appended,
          reasoningAppended,
          tail,
          meta: e.meta,
        });
      }
      if (e.delta && e.wasLive) {
        acks.push({ id: e.id, seq: e.seq });
      }
      e.appended = [];
      e.reasoningAppended = [];
      e.tailAppended = [];
      e.replaced = false;
      e.meta = false;
      e.delta = false;
    }
    this.dirty.clear();
    const order = this.orderChanged ? this.order.slice() : null;
    this.orderChanged = false;
    return { order, messages, acks };
  }
}
