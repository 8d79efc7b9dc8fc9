/**
 * The wire protocol between the kernel and the browser view, as types.
 *
 * Mirrors `nbstream/protocol.py`; change both together. The direction rules
 * and the sequence rules are written down there; in short:
 *
 * - Kernel -> view, synced state: the `conversation` trait, a list of
 *   {@link MessageState}, written only when something other than text changed
 *   (or when a view asked to be brought up to date), never per token.
 * - Kernel -> view, custom messages: {@link DeltaMsg}, at most one per stream
 *   per flush interval. Each message numbers its deltas from 1.
 * - View -> kernel, custom messages: {@link SendMsg}, {@link StopMsg},
 *   {@link RegenerateMsg} and {@link ClearMsg} (user commands), {@link HelloMsg}
 *   when a view renders, {@link ResyncMsg}
 *   on a sequence gap or an unknown message, {@link AckMsg} after the frame
 *   that rendered a delta.
 *
 * Anything that arrives over the wire is checked by the guards below before
 * use: a stale bundle or a newer kernel must degrade, not throw.
 */

/** Lifecycle of an assistant message. User messages are always `"done"`. */
export type Status =
  | "queued" // waiting for the model (another reply holds it)
  | "loading" // the model is being loaded
  | "running" // generation started; waiting for or receiving pieces
  | "done" // finished normally
  | "stopped" // stopped by the user (button, Escape, stop(), interrupt)
  | "error" // the source raised; see `error`
  | "timeout"; // a time limit ended it; see `error` for which

/** Statuses after which a message never changes again. */
export const FINAL_STATUSES: ReadonlySet<string> = new Set<Status>([
  "done",
  "stopped",
  "error",
  "timeout",
]);

export type Role = "user" | "assistant" | "system";

/** One message as the view sees it (an entry of the `conversation` trait). */
export interface MessageState {
  id: string;
  role: Role;
  text: string;
  /** number of the last delta already contained in `text` (0: none) */
  seq: number;
  status: Status;
  /** one-line error for `error` / `timeout`, else null */
  error: string | null;
  /** optional details (traceback) shown on demand */
  detail: string | null;
  /** figures for the finished reply (ttft_ms, tokens, tokens_per_s, ...) */
  stats: Record<string, unknown>;
  /** `Compare`: the pane (index into the `panes` trait) of an assistant message */
  pane?: number;
}

/** Kernel -> view: `text` is appended to message `id`. */
export interface DeltaMsg {
  kind: "delta";
  id: string;
  seq: number;
  text: string;
}

/** View -> kernel: the user sent a prompt. */
export interface SendMsg {
  kind: "send";
  text: string;
}

/** View -> kernel: stop the reply `id`, or `Compare`'s pane `pane`, or (with neither) whatever runs. */
export interface StopMsg {
  kind: "stop";
  id?: string;
  pane?: number;
}

/** View -> kernel: stop and drop the last answer, then ask its prompt again. */
export interface RegenerateMsg {
  kind: "regenerate";
}

/** View -> kernel: stop what runs and forget the conversation. */
export interface ClearMsg {
  kind: "clear";
}

/** View -> kernel: a view was rendered; bring it up to date. */
export interface HelloMsg {
  kind: "hello";
}

/** View -> kernel: a delta of message `id` is missing after `have`. */
export interface ResyncMsg {
  kind: "resync";
  id: string;
  have: number;
}

/** View -> kernel: delta `seq` of `id` was rendered, taking `render_ms`. */
export interface AckMsg {
  kind: "ack";
  id: string;
  seq: number;
  render_ms: number;
}

export type ViewMsg = SendMsg | StopMsg | RegenerateMsg | ClearMsg | HelloMsg | ResyncMsg | AckMsg;
export type KernelMsg = DeltaMsg;

/** The synced trait that holds the conversation (a list of {@link MessageState}). */
export const STATE_TRAIT = "conversation";

/** How the view lays the conversation out (the `mode` trait). */
export type Mode =
  | "chat" // a conversation with an input box (ChatWidget)
  | "stream" // an optional prompt and one answer, no input box (StreamView, stream())
  | "compare"; // one column per pane, one shared input box (Compare)

/** One pane of a `Compare` widget (an entry of the `panes` trait). */
export interface PaneInfo {
  label: string;
}

/** The synced traits the view reads. Any of them may be absent. */
export interface ChatTraits {
  [STATE_TRAIT]: MessageState[];
  mode: string;
  title: string;
  placeholder: string;
  source_label: string;
  panes: PaneInfo[];
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function isSeq(x: unknown): x is number {
  return typeof x === "number" && Number.isInteger(x) && x >= 0;
}

/** A well-formed delta, or false for anything else the kernel might send. */
export function isDeltaMsg(x: unknown): x is DeltaMsg {
  return (
    isRecord(x) &&
    x.kind === "delta" &&
    typeof x.id === "string" &&
    isSeq(x.seq) &&
    x.seq >= 1 &&
    typeof x.text === "string"
  );
}

function optionalString(x: unknown): string | null {
  return typeof x === "string" ? x : null;
}

/** The `mode` trait, checked: an unknown or absent mode lays out as a chat. */
export function toMode(x: unknown): Mode {
  return x === "stream" || x === "compare" ? x : "chat";
}

/** The `panes` trait, checked: each entry's label, or "Pane n" where it has none. */
export function toPanes(x: unknown): PaneInfo[] {
  const items = Array.isArray(x) ? x : [];
  return items.map((p, i) => ({
    label: isRecord(p) && typeof p.label === "string" && p.label !== "" ? p.label : `Pane ${i + 1}`,
  }));
}

/**
 * One entry of the `conversation` trait, checked and completed; null when it has
 * no usable id. An unknown status or role is kept as sent (a newer kernel may
 * add one) so that the view can at least show it.
 */
export function toMessageState(x: unknown): MessageState | null {
  if (!isRecord(x) || typeof x.id !== "string") {
    return null;
  }
  const state: MessageState = {
    id: x.id,
    role: (typeof x.role === "string" ? x.role : "assistant") as Role,
    text: typeof x.text === "string" ? x.text : "",
    seq: isSeq(x.seq) ? x.seq : 0,
    status: (typeof x.status === "string" ? x.status : "done") as Status,
    error: optionalString(x.error),
    detail: optionalString(x.detail),
    stats: isRecord(x.stats) ? x.stats : {},
  };
  if (isSeq(x.pane)) {
    state.pane = x.pane;
  }
  return state;
}
