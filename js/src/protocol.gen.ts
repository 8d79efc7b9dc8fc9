/**
 * The wire protocol's types and constants, GENERATED from nbstream/widgets/protocol.py
 * (and the core types it names, of nbstream/core/pieces.py and attachment.py)
 * by `python scripts/gen_protocol.py`: do not edit.
 * Change protocol.py and run that command; `make lint` fails while this file is stale.
 * What each message means, and the rules of the protocol, are written in protocol.py;
 * js/src/protocol.ts re-exports these types with the checks of what arrives.
 */

/**
 * Lifecycle of an assistant message. User messages are always `"done"`.
 */
export type Status = "done" | "error" | "loading" | "queued" | "running" | "stopped" | "timeout";
/**
 * Why a reply ended. Sources report `stop`, `length`, `tool_calls`,
 * `abort` (vLLM's), or None (a server's stream ended with neither a finish
 * reason nor an end marker). The pipeline itself sets `cancelled` (a stop),
 * `error` (the source raised), `timeout` (a time limit) and
 * `max_tool_rounds` (the model still called tools after the widget's
 * `max_tool_rounds` rounds of tool calls: the turn ends there).
 */
export type FinishReason =
  | "abort"
  | "cancelled"
  | "error"
  | "length"
  | "max_tool_rounds"
  | "stop"
  | "timeout"
  | "tool_calls";
/**
 * The types of part a message is made of: its answer and reasoning text, and (put by
 * the widget side's tool loop, never by a source) the arguments of its tool calls
 * (`"tool"`), their results (`"tool_result"`) and where a new round of the
 * loop starts (`"round"`).
 */
export type PartType = "answer" | "reasoning" | "round" | "tool" | "tool_result";
export type Role = "assistant" | "system" | "user";
/**
 * How the view lays the conversation out (the `mode` trait): `chat` (a
 * conversation with an input box: ChatWidget), `stream` (an optional prompt
 * and one answer, no input box: StreamView, stream()), `compare` (one column
 * per pane, one shared input box: Compare).
 */
export type Mode = "chat" | "compare" | "stream";
/**
 * What one delta appends: a string (all answer text) or its runs in order
 * (`[[type, text, ...], ...]`; see `Run` in core/stream.py).
 */
export type DeltaBody = string | DeltaRun[];
/**
 * One run of a delta, as a kernel of this version sends it.
 */
export type DeltaRun = TextRun | ToolArgsRun | ToolResultRun | RoundRun;
/**
 * One run of a delta: `[type, text]` for answer and reasoning text (a view ignores
 * a run of a type it does not know; the tool loop's runs are `ToolArgsRun`,
 * `ToolResultRun` and `RoundRun`)
 *
 * @minItems 2
 * @maxItems 2
 */
export type TextRun = ["answer" | "reasoning", string];
/**
 * `["tool", text, n]`: a piece of the argument text (JSON) of the message's tool
 * call number `n` (0, 1, ... over its rounds), in order as it streams; the first
 * (maybe empty) marks the call's place among the parts
 *
 * @minItems 3
 * @maxItems 3
 */
export type ToolArgsRun = ["tool", string, number];
/**
 * `["tool_result", text, n, display]`: the result of call `n`: the text the model
 * was told, and what the view may show
 *
 * @minItems 4
 * @maxItems 4
 */
export type ToolResultRun = ["tool_result", string, number, ToolDisplay];
/**
 * `["round", "", r]`: round `r` (1, 2, ...) of the tool loop starts here: the
 * model asked again with the results of the calls before it
 *
 * @minItems 3
 * @maxItems 3
 */
export type RoundRun = ["round", "", number];
/**
 * How a model is given an attachment: as an image, as text (put into the prompt),
 * or as a file (only to a source that names its type).
 */
export type AttachmentKind = "file" | "image" | "text";
/**
 * Where a tool call stands (nbstream/tools/calls.py): `streaming` (its arguments are
 * arriving), `ready` (the model's reply ended: the arguments are complete),
 * `awaiting_approval` (a person must allow it first), `running`, `done`,
 * `error` (it raised, timed out, was unknown or got arguments that do not fit),
 * `denied` (a person denied it; the model was told), `cancelled` (the turn was
 * stopped, or reached `max_tool_rounds`, first)
 */
export type ToolState =
  | "awaiting_approval"
  | "cancelled"
  | "denied"
  | "done"
  | "error"
  | "ready"
  | "running"
  | "streaming";
/**
 * What a view loads on first use (`js/src/chunks.ts`): `math` (Temml),
 * `highlight` (highlight.js), `entities` (the table of HTML's named character
 * references, for a rarer `&name;`), `linkify` (linkify-it, for bare URLs and
 * e-mail addresses), `glyphs` (`js/src/glyphs.ts`: the fonts for a long
 * history's characters, found before a reader scrolls to them) and `tools`
 * (`js/src/toolcard.ts`: the cards of a reply's tool calls), each a module of its
 * own (`static/<name>.js`) that the kernel's runtime widget (`runtime.py`)
 * carries once a message needs it (`glyphs`: once a view asks; `tools`: once a
 * reply's first tool part is sent).
 */
export type ChunkName = "entities" | "glyphs" | "highlight" | "linkify" | "math" | "tools";
/**
 * Every message a view sends; each is told apart by its `kind`. A
 * `ChunkMsg` goes to the runtime widget, every other to the view's widget.
 */
export type ViewMsg =
  | SendMsg
  | StopMsg
  | RegenerateMsg
  | ClearMsg
  | ContinueMsg
  | SystemPromptMsg
  | SwitchMsg
  | EditMsg
  | HelloMsg
  | ByeMsg
  | ResyncMsg
  | AckMsg
  | AcksMsg
  | ToolApprovalMsg
  | ChunkMsg;
/**
 * a person's answer to an approval card: `allow` (this call), `always` (this tool,
 * for this chat: not offered for a tool that runs code) or `deny`
 */
export type ToolDecision = "allow" | "always" | "deny";

/**
 * A tool result as the view may show it (tools/results.py): MIME type -> data, each
 * bounded (`DISPLAY_LIMITS`; images base64, PNG or JPEG only; HTML and Markdown
 * sanitized by the view like model output), and `omitted`: MIME type -> characters
 * of the displays left out for their size.
 */
export interface ToolDisplay {
  "image/jpeg"?: string;
  "image/png"?: string;
  omitted?: {
    [k: string]: number;
  };
  "text/html"?: string;
  "text/markdown"?: string;
}
/**
 * What a loading reply waits for, as its source last said (see `core/loading.py`).
 */
export interface LoadingMeta {
  /**
   * one short line: "preparing the model (first run, once)", "loading model"
   */
  text: string;
  /**
   * how far, 0..1 (rounded to 0.001); null: unknown
   */
  fraction: number | null;
}
/**
 * One message's key `"m<i>"` in the widget's state: everything but its text.
 */
export interface MessageMeta {
  role: Role;
  /**
   * number of the last delta of this message (the view has all once it has 1..seq)
   */
  seq: number;
  status: Status;
  /**
   * figures of the finished reply the view shows (ttft_ms, tokens, usage, ...)
   */
  stats: {
    [k: string]: unknown;
  };
  /**
   * a user message's attachments (#21), in order
   */
  attachments?: AttachmentMeta[];
  /**
   * `Compare`: the pane (index into the `panes` trait) of an assistant message
   */
  pane?: number;
  /**
   * a user message's text (an assistant's text is in its delta keys)
   */
  text?: string;
  /**
   * why a finished reply ended (see `nbstream.core.pieces.FinishReason`); null:
   * the source's stream ended with no end marker. Absent while it runs.
   */
  finish_reason?: FinishReason | null;
  /**
   * one-line error for `error` / `timeout` (absent or null: none)
   */
  error?: string | null;
  /**
   * optional details (traceback) shown on demand (absent or null: none)
   */
  detail?: string | null;
  /**
   * the message this one follows (null: a first message). Messages with the same
   * parent are alternatives (an edited question, a regenerated answer); absent in
   * states saved by older versions, whose messages follow each other in id order
   */
  parent?: string | null;
  /**
   * while `loading`, where the source reported it: what it waits for and how far.
   * Sent with the meta, the latest report at most every 0.25 s (`stream.py`)
   */
  progress?: LoadingMeta;
  /**
   * an assistant's generation options in force (`temperature`,
   * `max_new_tokens`...; see `nbstream.generation`); absent: none known
   */
  options?: {
    [k: string]: unknown;
  };
  /**
   * its tool calls, in call order (absent: none; see `ToolCallMeta`)
   */
  tools?: ToolCallMeta[];
}
/**
 * One attachment of a user message, in its meta's `attachments` list. The
 * name is hostile input: the view shows it as text only.
 */
export interface AttachmentMeta {
  name: string;
  mime: string;
  /**
   * bytes of the content the model is given
   */
  size: number;
  /**
   * how a model is given it
   */
  kind: AttachmentKind;
  /**
   * an image's size in pixels, as the model is given it
   */
  width?: number;
  height?: number;
  /**
   * what the conversion did ("downscaled from 4000x3000 px", "the first 200 rows")
   */
  note?: string;
  /**
   * a text's first characters (the view shows them on demand, as text)
   */
  excerpt?: string;
  /**
   * an image's (or an SVG's) preview
   */
  preview?: PreviewMeta;
}
/**
 * Where the view finds an attachment's preview image: a binary state key.
 */
export interface PreviewMeta {
  /**
   * the state key holding its bytes (`m<i>.a<k>`, see `preview_key`)
   */
  key: string;
  /**
   * its image type: PNG or JPEG as the kernel made it (without Pillow, the image's own
   * PNG, JPEG, WebP or GIF), or an SVG's markup; a view shows it as an image only
   */
  mime: string;
  /**
   * its size in pixels
   */
  width: number;
  height: number;
}
/**
 * One tool call of a message, in its meta's `tools` list (index: the call's
 * number, which its delta runs name). Its arguments and result travel in the
 * message's deltas (`ToolArgsRun`, `ToolResultRun`).
 */
export interface ToolCallMeta {
  id: string;
  name: string;
  state: ToolState;
  /**
   * the round of the turn it was asked in (0: the model's first answer)
   */
  round: number;
  /**
   * it needed a person's approval (the card shows Allow / Deny while it waits)
   */
  asks?: boolean;
  /**
   * the card offers "Always allow" (not for a tool that runs code)
   */
  always?: boolean;
  /**
   * one line: why it ended in error / denied / cancelled
   */
  error?: string;
  /**
   * how long the tool ran, ms (once it ended, if it ran)
   */
  ms?: number;
  /**
   * characters of the arguments the view did not receive (bounded on the wire)
   */
  cut?: number;
}
/**
 * One whole message (`StreamingWidget.conversation`, and the `conversation`
 * list of notebooks saved by older versions).
 */
export interface MessageState {
  id: string;
  role: Role;
  /**
   * the answer (or the prompt)
   */
  text: string;
  /**
   * the reasoning, "" if none
   */
  reasoning: string;
  /**
   * number of the last delta already contained in `text` (0: none)
   */
  seq: number;
  status: Status;
  /**
   * one-line error for `error` / `timeout`, else None
   */
  error: string | null;
  /**
   * optional details (traceback) shown on demand
   */
  detail: string | null;
  /**
   * figures for the finished reply (ttft_ms, tokens, tokens_per_s, ...)
   */
  stats: {
    [k: string]: unknown;
  };
  /**
   * a user message's attachments (see `MessageMetaExtras`)
   */
  attachments?: AttachmentMeta[];
  /**
   * `Compare`: the pane (index into the `panes` trait) of an assistant message
   */
  pane?: number;
  /**
   * why a finished reply ended (absent while it runs; None: no end marker)
   */
  finish_reason?: FinishReason | null;
  /**
   * the message this one follows (None: a first message)
   */
  parent?: string | null;
  /**
   * while `loading`: what the source waits for (the view's copy of its meta's;
   * `StreamingWidget.conversation` leaves it out)
   */
  progress?: LoadingMeta;
  /**
   * the generation options in force (see `MessageMetaExtras`)
   */
  options?: {
    [k: string]: unknown;
  };
}
/**
 * Older kernels -> view: `text` (and `reasoning`) is appended to message `id`.
 */
export interface DeltaMsg {
  kind: "delta";
  id: string;
  seq: number;
  /**
   * the answer text it appends
   */
  text: string;
  /**
   * the reasoning it appends (absent: none)
   */
  reasoning?: string;
}
/**
 * View -> kernel: the user sent a prompt.
 */
export interface SendMsg {
  kind: "send";
  text: string;
  /**
   * its attachments (#21), in the order of the message's buffers (their bytes)
   *
   * @maxItems 1000
   */
  attachments?: SendAttachment[];
  /**
   * the view's number for this Send, named again by a `RefusedMsg`
   */
  draft?: number;
}
/**
 * One attachment of a `SendMsg`: its bytes are the message's buffer of
 * the same position.
 */
export interface SendAttachment {
  /**
   * the file's name (hostile input: the kernel keeps its last part, cleaned)
   */
  name: string;
  /**
   * the length of its buffer, bytes
   */
  size: number;
}
/**
 * View -> kernel: stop the reply `id`, or `Compare`'s pane `pane`, or (with
 * neither) whatever runs.
 */
export interface StopMsg {
  kind: "stop";
  id?: string;
  pane?: number;
}
/**
 * View -> kernel: ask the last answer's prompt again (a running last answer is stopped;
 * the old answer stays, as an alternative).
 */
export interface RegenerateMsg {
  kind: "regenerate";
}
/**
 * View -> kernel: stop what runs and forget the conversation.
 */
export interface ClearMsg {
  kind: "clear";
}
/**
 * View -> kernel: ask the model to go on from the reply `id` (cut at the limit).
 */
export interface ContinueMsg {
  kind: "continue";
  id: string;
}
/**
 * View -> kernel: show the branch through message `id` (one of the alternatives
 * at its place).
 */
export interface SwitchMsg {
  kind: "switch";
  id: string;
}
/**
 * View -> kernel: ask `text` in place of the user message `id`: a new
 * alternative to it, answered (the old one and what followed it stay).
 */
export interface EditMsg {
  kind: "edit";
  id: string;
  text: string;
}
/**
 * View -> kernel: the user edited the system prompt (`""`: none); it applies
 * to the next question (`ChatWidget`).
 */
export interface SystemPromptMsg {
  kind: "system_prompt";
  text: string;
}
/**
 * View -> kernel: a view was rendered (or its link came back, or it wonders whether
 * the kernel still hears it); bring it up to date and answer (`WelcomeMsg`).
 */
export interface HelloMsg {
  kind: "hello";
  /**
   * the view's own id (random, one per rendered view), which its `ByeMsg` repeats
   */
  view?: string;
}
/**
 * View -> kernel: the view `view` was removed from the page (its notebook tab
 * closed, its output cleared), or, with `leaving` `"page"`, its whole page is going
 * (a browser tab closed, or reloading: the two cannot be told apart). When the widget's
 * last view says bye and no other says hello within `VIEW_GONE_GRACE` seconds
 * (`PAGE_GONE_GRACE` after a page's bye: long enough for a reload to come back), its
 * running replies are stopped: nobody watches them, and a server should not go on
 * generating for nobody.
 */
export interface ByeMsg {
  kind: "bye";
  view: string;
  /**
   * `"view"` (the default): the view was removed; `"page"`: its page is unloading
   */
  leaving?: "page" | "view";
}
/**
 * Kernel -> view, a custom message: the answer to a `HelloMsg`, sent by the
 * pump after the state it brought. A view that sent hello and hears nothing back
 * while the kernel is idle is not connected (the kernel restarted, or a notebook was
 * reopened with a kernel that never knew this widget).
 */
export interface WelcomeMsg {
  kind: "welcome";
}
/**
 * View -> kernel: a delta of message `id` is missing after `have`.
 */
export interface ResyncMsg {
  kind: "resync";
  id: string;
  /**
   * the number of the last delta the view applied (absent: 0)
   */
  have?: number;
}
/**
 * View -> kernel: delta `seq` of `id` was rendered, taking `render_ms`. Sent
 * by views of earlier versions, one per message of a round; a view of this version
 * sends the round as one `AcksMsg`. The kernel still takes both.
 */
export interface AckMsg {
  kind: "ack";
  id: string;
  seq: number;
  /**
   * the mean DOM time of the view's frames since its last ack (absent: 0)
   */
  render_ms?: number;
}
/**
 * One message's ack in an `AcksMsg`: delta `seq` of `id` was rendered.
 */
export interface AckEntry {
  id: string;
  seq: number;
}
/**
 * View -> kernel: a round of acks, one message for every message the view owes an
 * ack (a `Compare`'s panes, a reply's several streams), instead of one
 * `AckMsg` each: every browser -> kernel message makes the kernel publish a
 * busy and an idle status to the page, whatever it carries. The kernel applies the
 * entries in order, each as an `AckMsg` of the same `id`, `seq` and
 * `render_ms`; a message with an entry that does not fit is refused whole (none
 * of it applied).
 */
export interface AcksMsg {
  kind: "acks";
  /**
   * the acks of the round, in the order the view rendered their messages
   *
   * @minItems 1
   * @maxItems 256
   */
  acks: [AckEntry, ...AckEntry[]];
  /**
   * the mean DOM time of the view's frames since its last round (absent: 0)
   */
  render_ms?: number;
}
/**
 * View -> the kernel's runtime widget (not the view's own widget): send chunk
 * `name`; a view met a formula, a code block, a character reference or a link
 * that the kernel had not seen (the kernel sends a chunk when the text it sends needs it),
 * or a long history with characters to find fonts for (`glyphs`), or a reply's tool
 * call that came before the kernel's `tools` chunk.
 */
export interface ChunkMsg {
  kind: "chunk";
  name: ChunkName;
}
/**
 * View -> kernel: a person's answer to the approval card of call `call` in reply
 * `id`. The kernel refuses (and logs) one that does not match a call of that reply
 * waiting for approval (stale, forged, answered already).
 */
export interface ToolApprovalMsg {
  kind: "tool_approval";
  id: string;
  call: string;
  decision: ToolDecision;
}
/**
 * One pane of a `Compare` widget (an entry of the `panes` trait).
 */
export interface PaneInfo {
  label: string;
}
/**
 * Debugging switches of a widget's views (its `debug` trait), each absent as
 * shipped. Benchmarks set them to measure the previous ways side by side with
 * the shipped ones (`benchmarks/browser_*.py`); a view reads them when it
 * renders. A new switch is one more field here (and its use in the view).
 */
export interface ViewDebug {
  /**
   * `"full"`: re-render an answer's whole Markdown each frame (the naive way),
   * instead of only its open block (`"incremental"`)
   */
  markdown?: "full" | "incremental";
  /**
   * `"every-frame"`: acknowledge every frame that rendered deltas (the previous
   * way) instead of sparse rounds (`"sparse"`, js/src/frame.ts)
   */
  acks?: "every-frame" | "sparse";
  /**
   * the least time between two rounds of acks, ms (an experiment; the shipped gap
   * is js/src/frame.ts ACK_GAP_MS)
   */
  ack_gap_ms?: number;
  /**
   * `"at-once"`: let a Markdown block skip layout in the frame it was first laid
   * out (the previous way), instead of in batches (`"batched"`, js/src/sized.ts)
   */
  sized?: "at-once" | "batched";
  /**
   * `"off"`: render every message when it is shown (the previous way) instead of
   * finished ones as they come near the view, the end first (`"on"`, js/src/lazy.ts)
   */
  lazy?: "off" | "on";
  /**
   * `"per-view"`: each view requests its own animation frames (the previous
   * way) instead of rendering from the page's one frame loop and its budget
   * (`"shared"`, js/src/scheduler.ts)
   */
  frames?: "per-view" | "shared";
}
/**
 * The synced traits a view reads (any of them may be absent), besides the
 * per-message keys `m<i>`, `m<i>.<s>` and `m<i>.a<k>`.
 */
export interface ViewTraits {
  /**
   * older kernels' whole conversation (`STATE_TRAIT`)
   */
  conversation: MessageState[];
  /**
   * `LAST_ID_KEY`
   */
  last_id: number;
  /**
   * `LIVE_KEY`
   */
  live: {
    [k: string]: number;
  };
  /**
   * `REMOVED_KEY`
   */
  removed: number;
  /**
   * `CURRENT_KEY`
   */
  current: string | null;
  /**
   * one of `Mode`; a view lays an unknown one out as a chat
   */
  mode: string;
  title: string;
  placeholder: string;
  source_label: string;
  panes: PaneInfo[];
  /**
   * the system prompt (null: none)
   */
  system_prompt: string | null;
  /**
   * debugging switches (`ViewDebug`); `{}` as shipped
   */
  debug: ViewDebug;
  /**
   * the widget's own model id (its comm's id): a view finds its jupyter-widgets model
   * with it, to read whether the model is connected (js/src/connection.ts)
   */
  _model_ref: string;
  /**
   * what the user may attach (`AttachmentPolicy`); `{}`: a widget with no
   * input box
   */
  attachment_policy: AttachmentPolicy;
}
/**
 * The `attachment_policy` trait: what the view lets the user attach (the
 * kernel checks it all again).
 */
export interface AttachmentPolicy {
  /**
   * MIME patterns, one list per source: an attachment must match a pattern of
   * each (a text also matches `text/*`); `[]`: the widget takes none
   */
  accepts: string[][];
  /**
   * attachments per message
   */
  max_count: number;
  /**
   * bytes per attachment
   */
  max_bytes: number;
  /**
   * bytes per message (at most `MAX_UPLOAD_BYTES`)
   */
  max_message_bytes: number;
  /**
   * bytes of the whole conversation's attachments
   */
  max_chat_bytes: number;
  /**
   * images larger than this (pixels, longer side) are downscaled before they are sent
   */
  max_image_side: number;
}
/**
 * Kernel -> view, a custom message: the view's Send number `draft` was refused
 * (an attachment the source cannot take, a limit); the view gives the draft back
 * and shows `reason`.
 */
export interface RefusedMsg {
  kind: "refused";
  draft: number;
  reason: string;
}

/** Statuses after which a message never changes again. */
export const FINAL_STATUSES = ["done", "error", "stopped", "timeout"] as const;
/**
 * Every part type, in the order a view shows a message's parts (a new type is added
 * to `PartType` and here). The tool loop's parts (#20) show in the order they
 * came, between reasoning and answer.
 */
export const PART_TYPES = ["reasoning", "answer", "tool", "tool_result", "round"] as const;
/** older kernels' trait that held the whole conversation (a list of `MessageState`) */
export const STATE_TRAIT = "conversation";
/** the keys of the widget's state that are not per message */
export const LAST_ID_KEY = "last_id";
/** the last message of the branch shown (absent in older states: every message shows) */
export const CURRENT_KEY = "current";
export const LIVE_KEY = "live";
export const REMOVED_KEY = "removed";
/** bounds on what a view message may carry (a message beyond one is refused) */
export const MAX_VIEW_TEXT = 1000000;
export const MAX_VIEW_ID = 256;
export const MAX_SEQ = 9007199254740992;
export const MAX_RENDER_MS = 3600000.0;
/**
 * the most acks one `AcksMsg` carries: a view owing more in a round sends them
 * in several messages of at most this many
 */
export const MAX_ACKS = 256;
/** every state of a tool call (a view shows one it does not know as `cancelled`) */
export const TOOL_STATES = [
  "streaming",
  "ready",
  "awaiting_approval",
  "running",
  "done",
  "error",
  "denied",
  "cancelled",
] as const;
/** the states a tool call never leaves */
export const FINAL_TOOL_STATES = ["cancelled", "denied", "done", "error"] as const;
/**
 * the most bytes the buffers of one Send may carry together: Jupyter's server closes a
 * websocket whose message passes 10 MiB (tornado's `websocket_max_message_size`). The
 * view keeps under it; the kernel refuses more, saying why (`RefusedMsg`)
 */
export const MAX_UPLOAD_BYTES = 8388608;
/**
 * the most attachments one Send may name (a widget's own, lower limit,
 * `AttachmentLimits.max_count`, is checked after, and refused with the reason)
 */
export const MAX_UPLOAD_COUNT = 1000;
/** the longest attachment name a Send may carry */
export const MAX_UPLOAD_NAME = 1000;
