/**
 * The wire protocol between the kernel and the browser view, as types.
 *
 * Mirrors `nbstream/widgets/protocol.py`; change both together. The direction rules
 * and the sequence rules are written down there; in short:
 *
 * - Kernel -> view: ordinary ipywidgets `update` messages, one per pump step,
 *   whose keys are per message, so a change costs its own size and never the
 *   conversation's: `"m<i>"` a message's {@link MessageMeta} (null once
 *   removed), `"m<i>.<s>"` the s-th delta of that message ({@link DeltaBody},
 *   immutable), `"m<i>.a<k>"` the preview of a question's k-th attachment (a binary
 *   buffer: a DataView; see attachments.ts), `"last_id"` (ids `m1 .. m<last_id>` are
 *   enumerated in order),
 *   `"live"` (`{id: seq}` of streaming messages, to notice a lost delta) and
 *   `"removed"` (a counter: rescan for removed messages). The front-end model
 *   keeps every key, so a saved notebook holds the whole conversation; a view
 *   reads the keys from the model (keys.ts), whatever order they came in.
 * - Kernel -> view, custom: {@link RefusedMsg} (a Send's attachments refused: the
 *   view gives the draft back).
 * - View -> kernel, custom messages: {@link SendMsg} (attachments' bytes as its
 *   buffers), {@link StopMsg},
 *   {@link RegenerateMsg}, {@link ClearMsg}, {@link ContinueMsg},
 *   {@link SystemPromptMsg}, {@link SwitchMsg}, {@link EditMsg} (user commands),
 *   {@link HelloMsg} when a view renders, {@link ResyncMsg} when
 *   `live` or a final meta names deltas the model lacks, {@link AckMsg} after
 *   the frame that rendered a delta.
 * - Older kernels: a `conversation` list trait of whole messages and `delta`
 *   custom messages ({@link DeltaMsg}); still shown (saved notebooks), never
 *   sent by a kernel of this version.
 *
 * Anything that arrives over the wire is checked by the guards below before
 * use: a stale bundle or a newer kernel must degrade, not throw.
 */

import { type AttachmentMeta, toAttachmentMetas } from "./attachments";

export type { AttachmentMeta, AttachmentPolicy, PreviewMeta } from "./attachments";

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

/** The types of part a message is made of; a view ignores a type it does not know. */
export type PartType = "reasoning" | "answer";

/** What one delta appends: a string (all answer), or `[type, text]` runs in order. */
export type DeltaBody = string | [string, string][];

/** What a loading reply waits for, as its source last said (`nbstream/core/loading.py`). */
export interface LoadingProgress {
  /** one short line: "preparing the model (first run, once)", "loading model" */
  text: string;
  /** how far, 0..1; null: unknown */
  fraction: number | null;
}

/** A message's key `m<i>`: everything but an assistant's text. */
export interface MessageMeta {
  role: Role;
  /** number of the last delta of this message: the view has all of it once it has 1..seq */
  seq: number;
  status: Status;
  stats: Record<string, unknown>;
  /** one-line error for `error` / `timeout` */
  error?: string | null;
  /** details (traceback) shown on demand */
  detail?: string | null;
  pane?: number;
  /** a user message's text */
  text?: string;
  /** why a finished reply ended; null: the stream ended with no end marker; absent: live */
  finish_reason?: string | null;
  /** the message this one follows (null: a first one); absent in older states */
  parent?: string | null;
  /** while `loading`, where the source reported it (latest report, at most every 0.25 s) */
  progress?: LoadingProgress;
  /** an assistant's generation options in force (temperature, max_new_tokens...) */
  options?: Record<string, unknown>;
  /** a user message's attachments (#21); each preview's bytes under its own key */
  attachments?: AttachmentMeta[];
}

/** One message as the view holds it. */
export interface MessageState {
  id: string;
  role: Role;
  /** the answer (or the prompt) */
  text: string;
  /** the reasoning ("" if none) */
  reasoning: string;
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
  /** why a finished reply ended (see {@link MessageMeta}) */
  finish_reason?: string | null;
  /** the message this one follows (null: a first one); absent in older states */
  parent?: string | null;
  /** while `loading`: what the source waits for (see {@link MessageMeta}) */
  progress?: LoadingProgress;
  /** the generation options in force (see {@link MessageMeta}) */
  options?: Record<string, unknown>;
  /** a user message's attachments, their previews' bytes filled in (see {@link MessageMeta}) */
  attachments?: AttachmentMeta[];
}

/** One delta to apply: what the `m<i>.<s>` key (or an older kernel's message) carries. */
export interface DeltaMsg {
  kind: "delta";
  id: string;
  seq: number;
  /** the answer text it appends */
  text: string;
  /** the reasoning it appends (absent: none) */
  reasoning?: string;
}

/** View -> kernel: the user sent a prompt (with attachments: their bytes are the message's buffers). */
export interface SendMsg {
  kind: "send";
  text: string;
  /** its attachments, in the order of the message's buffers (#21) */
  attachments?: { name: string; size: number }[];
  /** the view's number for this Send, named again by a {@link RefusedMsg} */
  draft?: number;
}

/** Kernel -> view, custom: the Send `draft` was refused (its attachments); give it back, say `reason`. */
export interface RefusedMsg {
  kind: "refused";
  draft: number;
  reason: string;
}

/** A well-formed refusal, or false. */
export function isRefusedMsg(x: unknown): x is RefusedMsg {
  return (
    isRecord(x) &&
    x.kind === "refused" &&
    typeof x.draft === "number" &&
    Number.isInteger(x.draft) &&
    typeof x.reason === "string"
  );
}

/** View -> kernel: stop the reply `id`, or `Compare`'s pane `pane`, or (with neither) whatever runs. */
export interface StopMsg {
  kind: "stop";
  id?: string;
  pane?: number;
}

/** View -> kernel: ask the last answer's prompt again; the old answer stays, as an alternative. */
export interface RegenerateMsg {
  kind: "regenerate";
}

/** View -> kernel: stop what runs and forget the conversation. */
export interface ClearMsg {
  kind: "clear";
}

/** View -> kernel: ask the model to go on from reply `id` (cut at the token limit). */
export interface ContinueMsg {
  kind: "continue";
  id: string;
}

/** View -> kernel: show the branch through message `id` (an alternative at its place). */
export interface SwitchMsg {
  kind: "switch";
  id: string;
}

/** View -> kernel: ask `text` in place of the user message `id` (a new alternative). */
export interface EditMsg {
  kind: "edit";
  id: string;
  text: string;
}

/** View -> kernel: the user edited the system prompt ("": none); applies to the next question. */
export interface SystemPromptMsg {
  kind: "system_prompt";
  text: string;
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

export type ViewMsg =
  | SendMsg
  | StopMsg
  | RegenerateMsg
  | ClearMsg
  | ContinueMsg
  | SwitchMsg
  | EditMsg
  | SystemPromptMsg
  | HelloMsg
  | ResyncMsg
  | AckMsg;

/** Older kernels' trait that held the whole conversation (a list of {@link MessageState}). */
export const STATE_TRAIT = "conversation";
/** The state keys that are not per message (see protocol.py). */
export const LAST_ID_KEY = "last_id";
export const LIVE_KEY = "live";
export const REMOVED_KEY = "removed";
/** The last message of the branch shown (absent in older states: every message shows). */
export const CURRENT_KEY = "current";

/** The state key of message number `n`. */
export function metaKey(n: number): string {
  return `m${n}`;
}

/** The state key of delta `seq` of message `id`. */
export function deltaKey(id: string, seq: number): string {
  return `${id}.${seq}`;
}

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
  [LAST_ID_KEY]: number;
  [LIVE_KEY]: Record<string, number>;
  [REMOVED_KEY]: number;
  [CURRENT_KEY]: string | null;
  mode: string;
  title: string;
  placeholder: string;
  source_label: string;
  panes: PaneInfo[];
  /** the system prompt (null: none) */
  system_prompt: string | null;
  /** what the view lets the user attach (#21; see attachments.ts) */
  attachment_policy: unknown;
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
    typeof x.text === "string" &&
    (x.reasoning === undefined || typeof x.reasoning === "string")
  );
}

/**
 * A delta key's value as the answer and reasoning it appends; null when it is
 * not a body (absent, removed, malformed). Runs of a type the view does not
 * know are skipped.
 */
export function toDeltaParts(x: unknown): { text: string; reasoning: string } | null {
  if (typeof x === "string") {
    return { text: x, reasoning: "" };
  }
  if (!Array.isArray(x)) {
    return null;
  }
  let text = "";
  let reasoning = "";
  for (const run of x) {
    if (Array.isArray(run) && typeof run[1] === "string") {
      if (run[0] === "answer") {
        text += run[1];
      } else if (run[0] === "reasoning") {
        reasoning += run[1];
      }
    }
  }
  return { text, reasoning };
}

/** A message's meta key, checked and completed; null when it is absent or removed. */
export function toMessageMeta(x: unknown): MessageMeta | null {
  if (!isRecord(x)) {
    return null;
  }
  const meta: MessageMeta = {
    role: (typeof x.role === "string" ? x.role : "assistant") as Role,
    seq: isSeq(x.seq) ? x.seq : 0,
    status: (typeof x.status === "string" ? x.status : "done") as Status,
    stats: isRecord(x.stats) ? x.stats : {},
    error: optionalString(x.error),
    detail: optionalString(x.detail),
  };
  if (isSeq(x.pane)) {
    meta.pane = x.pane;
  }
  if (typeof x.text === "string") {
    meta.text = x.text;
  }
  if (x.finish_reason === null || typeof x.finish_reason === "string") {
    meta.finish_reason = x.finish_reason;
  }
  if (x.parent === null || typeof x.parent === "string") {
    meta.parent = x.parent;
  }
  const progress = toLoadingProgress(x.progress);
  if (progress !== null) {
    meta.progress = progress;
  }
  if (isRecord(x.options)) {
    meta.options = x.options;
  }
  if (x.attachments !== undefined) {
    const attachments = toAttachmentMetas(x.attachments);
    if (attachments.length > 0) {
      meta.attachments = attachments;
    }
  }
  return meta;
}

/** A meta's `progress`, checked: null when absent or malformed; a fraction outside 0..1 is unknown. */
export function toLoadingProgress(x: unknown): LoadingProgress | null {
  if (!isRecord(x) || typeof x.text !== "string" || x.text.trim() === "") {
    return null;
  }
  const f = x.fraction;
  const fraction = typeof f === "number" && Number.isFinite(f) && f >= 0 && f <= 1 ? f : null;
  return { text: x.text.slice(0, 200), fraction };
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
    reasoning: typeof x.reasoning === "string" ? x.reasoning : "",
    seq: isSeq(x.seq) ? x.seq : 0,
    status: (typeof x.status === "string" ? x.status : "done") as Status,
    error: optionalString(x.error),
    detail: optionalString(x.detail),
    stats: isRecord(x.stats) ? x.stats : {},
  };
  if (isSeq(x.pane)) {
    state.pane = x.pane;
  }
  if (x.finish_reason === null || typeof x.finish_reason === "string") {
    state.finish_reason = x.finish_reason;
  }
  if (x.parent === null || typeof x.parent === "string") {
    state.parent = x.parent;
  }
  if (isRecord(x.options)) {
    state.options = x.options;
  }
  if (x.attachments !== undefined) {
    const attachments = toAttachmentMetas(x.attachments);
    if (attachments.length > 0) {
      state.attachments = attachments;
    }
  }
  return state;
}
