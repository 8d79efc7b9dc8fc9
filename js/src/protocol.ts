/**
 * The wire protocol between the kernel and the browser view.
 *
 * Declared once, in `nbstream/widgets/protocol.py`: the types and constants here
 * come from `protocol.gen.ts`, generated from it by `python scripts/gen_protocol.py`
 * (never edit them here). The direction rules and the sequence rules are written
 * down there; in short:
 *
 * - Kernel -> view: ordinary ipywidgets `update` messages, one per pump step,
 *   whose keys are per message, so a change costs its own size and never the
 *   conversation's: `"m<i>"` a message's {@link MessageMeta} (null once
 *   removed), `"m<i>.<s>"` the s-th delta of that message ({@link DeltaBody},
 *   immutable), `"m<i>.a<k>"` the preview of a question's k-th attachment (a
 *   binary buffer: a DataView in the model; its {@link PreviewMeta} is in the
 *   meta's `attachments`), `"last_id"` (ids `m1 .. m<last_id>` are enumerated in
 *   order), `"live"` (`{id: seq}` of streaming messages, to notice a lost delta) and
 *   `"removed"` (a counter: rescan for removed messages). The front-end model
 *   keeps every key, so a saved notebook holds the whole conversation; a view
 *   reads the keys from the model (keys.ts), whatever order they came in.
 * - Kernel -> view, custom: {@link RefusedMsg} (a Send's attachments refused: the
 *   view gives the draft back and says why).
 * - View -> kernel, custom messages ({@link ViewMsg}): {@link SendMsg} (with
 *   attachments, their bytes as the message's buffers, in order), {@link StopMsg},
 *   {@link RegenerateMsg}, {@link ClearMsg}, {@link ContinueMsg},
 *   {@link SystemPromptMsg}, {@link SwitchMsg}, {@link EditMsg} (user commands),
 *   {@link HelloMsg} when a view renders, {@link ResyncMsg} when
 *   `live` or a final meta names deltas the model lacks, {@link AckMsg} after
 *   the frame that rendered a delta. The kernel checks each against its type.
 * - Older kernels: a `conversation` list trait of whole messages and `delta`
 *   custom messages ({@link DeltaMsg}); still shown (saved notebooks), never
 *   sent by a kernel of this version.
 *
 * Anything that arrives over the wire is checked by the guards below before
 * use: a stale bundle or a newer kernel must degrade, not throw.
 */

import { toAttachmentMetas } from "./attachments";
import type {
  DeltaMsg,
  FinishReason,
  LoadingMeta,
  MessageMeta,
  MessageState,
  Mode,
  PaneInfo,
  RefusedMsg,
  Role,
  Status,
  ViewDebug,
  ViewTraits,
  WelcomeMsg,
} from "./protocol.gen";
import { FINAL_STATUSES as FINAL_STATUS_LIST } from "./protocol.gen";

export type {
  AckMsg,
  AttachmentKind,
  AttachmentMeta,
  AttachmentPolicy,
  ByeMsg,
  ClearMsg,
  ContinueMsg,
  DeltaBody,
  DeltaMsg,
  EditMsg,
  FinishReason,
  HelloMsg,
  LoadingMeta,
  MessageMeta,
  MessageState,
  Mode,
  PaneInfo,
  PartType,
  PreviewMeta,
  RefusedMsg,
  RegenerateMsg,
  ResyncMsg,
  Role,
  SendAttachment,
  SendMsg,
  Status,
  StopMsg,
  SwitchMsg,
  SystemPromptMsg,
  ViewDebug,
  ViewMsg,
  ViewTraits,
  WelcomeMsg,
} from "./protocol.gen";
export {
  CURRENT_KEY,
  LAST_ID_KEY,
  LIVE_KEY,
  PART_TYPES,
  REMOVED_KEY,
  STATE_TRAIT,
} from "./protocol.gen";

/** Statuses after which a message never changes again. */
export const FINAL_STATUSES: ReadonlySet<string> = new Set<Status>(FINAL_STATUS_LIST);

/** The synced traits the view reads (any of them may be absent). */
export type ChatTraits = ViewTraits;

/** The state key of message number `n`. */
export function metaKey(n: number): string {
  return `m${n}`;
}

/** The state key of delta `seq` of message `id`. */
export function deltaKey(id: string, seq: number): string {
  return `${id}.${seq}`;
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function isSeq(x: unknown): x is number {
  return typeof x === "number" && Number.isInteger(x) && x >= 0;
}

/** A well-formed refusal of a Send (kernel -> view, custom), or false. */
export function isRefusedMsg(x: unknown): x is RefusedMsg {
  return (
    isRecord(x) &&
    x.kind === "refused" &&
    typeof x.draft === "number" &&
    Number.isInteger(x.draft) &&
    typeof x.reason === "string"
  );
}

/** Whether a custom message from the kernel is a {@link WelcomeMsg} (connection.ts). */
export function isWelcomeMsg(x: unknown): x is WelcomeMsg {
  return isRecord(x) && x.kind === "welcome";
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
    // kept as sent, like an unknown status: a newer kernel may add a reason
    meta.finish_reason = x.finish_reason as FinishReason | null;
  }
  if (x.parent === null || typeof x.parent === "string") {
    meta.parent = x.parent;
  }
  const progress = toLoadingMeta(x.progress);
  if (progress !== null) {
    meta.progress = progress;
  }
  if (isRecord(x.options)) {
    meta.options = x.options;
  }
  const attachments = toAttachmentMetas(x.attachments);
  if (attachments.length > 0) {
    meta.attachments = attachments;
  }
  return meta;
}

/** A meta's `progress`, checked: null when absent or malformed; a fraction outside 0..1 is unknown. */
export function toLoadingMeta(x: unknown): LoadingMeta | null {
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

/**
 * The `debug` trait, checked: the switches it sets to a value this view knows
 * (see {@link ViewDebug}); anything else is left as shipped.
 */
export function toViewDebug(x: unknown): ViewDebug {
  const out: ViewDebug = {};
  if (!isRecord(x)) {
    return out;
  }
  if (x.markdown === "full" || x.markdown === "incremental") {
    out.markdown = x.markdown;
  }
  if (x.acks === "every-frame" || x.acks === "sparse") {
    out.acks = x.acks;
  }
  const gap = x.ack_gap_ms;
  if (typeof gap === "number" && Number.isFinite(gap) && gap >= 0) {
    out.ack_gap_ms = gap;
  }
  if (x.sized === "at-once" || x.sized === "batched") {
    out.sized = x.sized;
  }
  return out;
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
    state.finish_reason = x.finish_reason as FinishReason | null;
  }
  if (x.parent === null || typeof x.parent === "string") {
    state.parent = x.parent;
  }
  if (isRecord(x.options)) {
    state.options = x.options;
  }
  const attachments = toAttachmentMetas(x.attachments);
  if (attachments.length > 0) {
    state.attachments = attachments;
  }
  return state;
}
