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
 *   {@link ToolApprovalMsg} (a person's answer to a tool call's approval card),
 *   {@link HelloMsg} when a view renders, {@link ResyncMsg} when
 *   `live` or a final meta names deltas the model lacks, {@link AcksMsg} after
 *   the frame that rendered a delta (one per round of acks, for every message
 *   owed one; {@link AckMsg}, one per message, is what earlier views sent). The
 *   kernel checks each against its type.
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
  MessageState,
  Mode,
  PaneInfo,
  RefusedMsg,
  Role,
  Status,
  ToolCallMeta,
  ToolDisplay,
  ToolState,
  ViewDebug,
  ViewTraits,
  WelcomeMsg,
  MessageMeta as WireMeta,
} from "./protocol.gen";
import {
  FINAL_STATUSES as FINAL_STATUS_LIST,
  FINAL_TOOL_STATES as FINAL_TOOL_STATE_LIST,
  MAX_VIEW_ID,
  TOOL_STATES,
} from "./protocol.gen";

export type {
  AckEntry,
  AckMsg,
  AcksMsg,
  AttachmentKind,
  AttachmentMeta,
  AttachmentPolicy,
  ByeMsg,
  ChunkMsg,
  ChunkName,
  ClearMsg,
  ContinueMsg,
  DeltaBody,
  DeltaMsg,
  DeltaRun,
  EditMsg,
  FinishReason,
  HelloMsg,
  LoadingMeta,
  MessageState,
  Mode,
  PaneInfo,
  PartType,
  PreviewMeta,
  RefusedMsg,
  RegenerateMsg,
  ResyncMsg,
  Role,
  RoundRun,
  SendAttachment,
  SendMsg,
  Status,
  StopMsg,
  SwitchMsg,
  SystemPromptMsg,
  TextRun,
  ToolApprovalMsg,
  ToolArgsRun,
  ToolCallMeta,
  ToolDecision,
  ToolDisplay,
  ToolResultRun,
  ToolState,
  ViewDebug,
  ViewMsg,
  ViewTraits,
  WelcomeMsg,
} from "./protocol.gen";
export {
  CURRENT_KEY,
  LAST_ID_KEY,
  LIVE_KEY,
  MAX_ACKS,
  PART_TYPES,
  REMOVED_KEY,
  STATE_TRAIT,
} from "./protocol.gen";

/** Statuses after which a message never changes again. */
export const FINAL_STATUSES: ReadonlySet<string> = new Set<Status>(FINAL_STATUS_LIST);

/**
 * A message's meta key as the view holds it once checked ({@link toMessageMeta}):
 * as sent, except that an entry of `tools` of the wrong shape is null (each entry
 * keeps its call's number).
 */
export type MessageMeta = Omit<WireMeta, "tools"> & { tools?: (ToolCallMeta | null)[] };

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

/** What one delta appends, as the view takes it. */
export interface DeltaParts {
  text: string;
  reasoning: string;
  /**
   * Every run in order, when the delta holds one of the tool loop's (null
   * otherwise: a plain delta costs nothing more).
   */
  runs?: ToolRun[] | null;
}

/**
 * A delta key's value as the answer and reasoning it appends (and, with tool
 * calls, its runs in order); null when it is not a body (absent, removed,
 * malformed). Runs of a type the view does not know are skipped.
 */
export function toDeltaParts(x: unknown): DeltaParts | null {
  if (typeof x === "string") {
    return { text: x, reasoning: "" };
  }
  if (!Array.isArray(x)) {
    return null;
  }
  let text = "";
  let reasoning = "";
  let runs: ToolRun[] | null = null;
  const ordered: ToolRun[] = [];
  for (const run of x) {
    if (Array.isArray(run) && typeof run[1] === "string") {
      if (run[0] === "answer" || run[0] === "reasoning") {
        if (run[0] === "answer") {
          text += run[1];
        } else {
          reasoning += run[1];
        }
        ordered.push({ type: run[0], text: run[1] });
      } else {
        const tool = toToolRun(run);
        if (tool !== null) {
          ordered.push(tool);
          runs = ordered;
        }
      }
    }
  }
  return { text, reasoning, runs };
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
  const tools = toToolMetas(x.tools);
  if (tools !== null) {
    meta.tools = tools;
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
  if (x.lazy === "on" || x.lazy === "off") {
    out.lazy = x.lazy;
  }
  if (x.frames === "per-view" || x.frames === "shared") {
    out.frames = x.frames;
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

// ---- tool calls (#20): the checks of what arrives --------------------------------------

/** States a tool call never leaves. */
export const FINAL_TOOL_STATES: ReadonlySet<string> = new Set<ToolState>(FINAL_TOOL_STATE_LIST);

const KNOWN_TOOL_STATES: ReadonlySet<string> = new Set<ToolState>(TOOL_STATES);

/**
 * A delta run as the view takes it, in order ({@link DeltaParts}): answer and
 * reasoning text, a call's argument text (`tool`, {@link ToolArgsRun}), its
 * result (`tool_result`: what the model was told, and the display the view may
 * show), where round `n` starts (`round`).
 */
export type ToolRun =
  | { type: "answer" | "reasoning"; text: string }
  | { type: "tool"; n: number; text: string }
  | {
      type: "tool_result";
      n: number;
      text: string;
      /** a {@link ToolDisplay} as sent: each entry is checked where it is shown (toolcard.ts) */
      display: Record<string, unknown>;
    }
  | { type: "round"; n: number };

/** A meta's `tools` list, checked: entries of the wrong shape are left out (null). */
export function toToolMetas(x: unknown): (ToolCallMeta | null)[] | null {
  if (!Array.isArray(x)) {
    return null;
  }
  return x.map((t) => {
    if (!isRecord(t) || typeof t.id !== "string" || typeof t.name !== "string") {
      return null;
    }
    const meta: ToolCallMeta = {
      id: t.id.slice(0, MAX_VIEW_ID),
      name: t.name.slice(0, MAX_VIEW_ID),
      state: (typeof t.state === "string" && KNOWN_TOOL_STATES.has(t.state)
        ? t.state
        : "cancelled") as ToolState,
      round: isSeq(t.round) ? t.round : 0,
    };
    if (t.asks === true) {
      meta.asks = true;
    }
    if (t.always === true) {
      meta.always = true;
    }
    if (typeof t.error === "string") {
      meta.error = t.error.slice(0, 500);
    }
    if (typeof t.ms === "number" && Number.isFinite(t.ms) && t.ms >= 0) {
      meta.ms = t.ms;
    }
    if (isSeq(t.cut) && t.cut > 0) {
      meta.cut = t.cut;
    }
    return meta;
  });
}

/** One delta run as a {@link ToolRun} when it is one of the tool loop's (or null). */
function toToolRun(run: unknown[]): ToolRun | null {
  const [type, text, n] = run;
  if (typeof text !== "string" || !isSeq(n) || n > 100_000) {
    return null;
  }
  if (type === "tool") {
    return { type, n, text };
  }
  if (type === "tool_result") {
    return { type, n, text, display: isRecord(run[3]) ? run[3] : {} };
  }
  if (type === "round") {
    return { type, n };
  }
  return null;
}
// ---- end of tool calls ------------------------------------------------------------------
