"""The wire protocol between the kernel and the browser view, as types: declared once.

This module is the one source of truth. The front end's types
(``js/src/protocol.gen.ts``, re-exported by ``js/src/protocol.ts``) are
generated from it by ``python scripts/gen_protocol.py`` (Python types -> JSON
Schema with msgspec -> TypeScript with json-schema-to-typescript); ``make lint``
runs ``scripts/gen_protocol.py --check``, which fails when that file is stale.
The kernel checks every message a view sends against these types
(``wire.py``: :func:`~nbstream.widgets.wire.parse_view_msg`), bounds included
(the ``MAX_*`` below), and the binary buffers that come with it, before a
handler sees it.

**Adding a type.** Declare it here (a ``TypedDict``, ``Literal`` or alias;
``#:`` comments on fields become the TypeScript doc comments), add a view ->
kernel message to :data:`ViewMsg` (its ``kind`` is a ``Literal``: that is how
it is dispatched), name a new top-level type in :data:`GENERATED` if nothing
generated reaches it, run ``python scripts/gen_protocol.py``, and handle the new
message in ``StreamingWidget._on_command`` (or a subclass's).

Direction rules (who may send what, how often, and why):

* **Kernel -> view: one update message per pump step, per key.** The model's
  state holds each message under its own keys, so a change costs the size of
  that change, not of the conversation (a turn costs the same at turn 200 as at
  turn 1). Every key below travels in ipywidgets' ordinary ``update`` message
  (``{"method": "update", "state": {key: value, ...}}``), sent by the pump
  thread only, at most one per widget per flush interval (the first piece at
  once). ipywidgets merges update messages key by key into the front-end
  model, JupyterLab saves every attribute of it, and nbclient's
  ``store_widget_state`` merges them key by key too: so the saved notebook
  holds the whole conversation (reasoning included) with no end-of-reply
  re-send of the text. The keys:

  - ``"m<i>"``: :class:`MessageMeta` of message ``m<i>`` (role, status, seq,
    finish reason, the figures of a finished reply...), or null once the
    message was removed (Clear, Regenerate). Sent when it is new, when its
    status changes and when it ends; while it is ``loading``, also when its
    source reports progress (at most every 0.25 s). Never holds an
    assistant's text.
  - ``"m<i>.<s>"``: :data:`DeltaBody` of the ``s``-th delta of message
    ``m<i>`` (``s`` counts from 1): what it appends, a string (all answer) or
    a list of ``[part type, text]`` runs in order. Written once, never changed
    (null once the message was removed).
  - ``"m<i>.a<k>"`` (:func:`preview_key`): the preview of attachment ``k``
    (from 1) of user message ``m<i>`` (its :class:`PreviewMeta` in the meta's
    ``attachments`` says the type and size): the bytes of a small image, as a
    *binary buffer* (see **Binary buffers**). Sent once, in the update that
    carries the meta listing it; a meta sent again carries none. Null once the
    message was removed.
  - ``"last_id"``: the highest message number given out so far: a view
    enumerates ``m1 .. m<last_id>`` (ids are allocated in conversation order,
    so this is also the order), with no list that grows with the conversation.
    An id may be named before its keys arrive: a history loaded at once goes in
    slices of about 48 KB, newest first, one update each (``Pump.send_history``),
    so the view shows the end at once and the older messages arrive above it.
  - ``"live"``: ``{id: seq}`` of the messages streaming now, the number of
    the last delta sent: how a view notices a lost delta before the end.
  - ``"removed"``: counts removals, so a view rescans for null metas only
    when something was removed.
  - ``"current"``: the last message of the branch shown. Messages form a tree
    (each meta names its ``parent``; messages with one parent are alternatives:
    an edited question, a regenerated answer); a view lists the path from a
    root to ``current`` and offers to switch between the alternatives
    (:class:`SwitchMsg`). States of older versions have neither: their
    messages follow each other in id order.

  ``StreamingWidget.get_state()`` includes all of these, so a view created or
  reloaded mid-stream (ipywidgets' ``request_state``) starts from everything.
  That snapshot is sent from the kernel's main thread while the pump goes on,
  so the pump then sends the metas of the messages live in it (and ``live``)
  again: a meta can never be left older than the message.
* **Sequence rules.** A view keeps, per message, the parts it shows and
  ``seq``, the number of the last delta it applied. It applies delta
  ``seq + 1`` when its key is present, and the next, until one is missing.
  A delta key is immutable, so reading it twice or out of order is harmless:
  a view created mid-stream continues without a gap or a duplicate. When
  ``live`` or a final meta names a ``seq`` beyond the deltas present (an
  update was lost, e.g. dropped by the server's IOPub rate limit), the view
  sends :class:`ResyncMsg`; the kernel answers by re-sending the missing
  delta keys and the meta. A message whose meta is final is complete once
  its deltas ``1..seq`` are applied; nothing else of it changes.
* **Parts.** A delta carries runs of typed parts (:data:`PartType`:
  ``"reasoning"``, ``"answer"``, and the tool loop's: a tool call's ``"tool"``
  argument text, its ``"tool_result"`` and the ``"round"`` markers; see
  :data:`DeltaRun` and :class:`ToolCallMeta`). A view shows each type in its own
  block and ignores a type it does not know, so a new type is added without
  another redesign (a view of an older version shows the text of a reply with
  tool calls, without the calls).
* **Binary buffers.** JSON cannot hold bytes, so the schema declares where
  they are and ipywidgets carries them beside the JSON, as the Jupyter
  messaging protocol's ``buffers`` (never base64 on the wire). Kernel -> view:
  a preview key's value is ``bytes`` in the kernel's state; the update
  message names it in ``buffer_paths`` (``[["m1.a1"], ...]``) and its bytes
  are the message's buffers in that order (``wire.py``: the pump's update and
  ``get_state``'s snapshot, which ipywidgets splits the same way). In the
  front-end model the key holds a ``DataView``; a notebook saved with its
  widget state keeps it base64 in that state's ``buffers`` list. View ->
  kernel: a :class:`SendMsg` with ``attachments`` carries one buffer per
  attachment, in the same order, each of exactly its ``size`` bytes (ipywidgets'
  ``model.send(content, callbacks, buffers)``); a message with buffers that do
  not match (or buffers on another kind) is refused as malformed
  (``parse_view_msg``). Together they carry at most :data:`MAX_UPLOAD_BYTES`:
  the view keeps under it (:class:`AttachmentPolicy`), the kernel refuses more
  with the reason (:class:`RefusedMsg`).
* **View -> kernel, custom messages.** User commands (:class:`SendMsg`,
  :class:`StopMsg`, :class:`RegenerateMsg`, :class:`ClearMsg`,
  :class:`ContinueMsg`, :class:`SystemPromptMsg`, :class:`SwitchMsg`, :class:`EditMsg`,
  :class:`ToolApprovalMsg`),
  :class:`HelloMsg` when a view is rendered (the kernel re-sends the metas of live
  messages and ``live``), and
  :class:`AcksMsg` after the frame that rendered a delta of a message the view
  saw live (never for a message final when it first saw it: a loaded history is
  not acked): one message a round of acks, for every message it owes one (views
  of earlier versions send an :class:`AckMsg` per message; still accepted).
  :class:`ChunkMsg` goes to the kernel's runtime widget (``runtime.py``), when a
  view meets a formula, a code block or a character reference before the kernel
  sent the chunk it needs. The kernel handles them
  on its main thread (or on a subshell thread with ``commsOverSubshells``), so
  handlers only record or enqueue and never block.
* **Kernel -> view, custom messages.** :class:`WelcomeMsg`, the answer to a
  hello; :class:`RefusedMsg`, a Send with attachments was refused (a type the
  source cannot take, a limit): the view gives the draft back and says why.
* **Older kernels.** A view still shows a notebook saved by an older nbstream,
  whose state held the whole conversation in one ``conversation`` list, and
  its ``delta`` custom messages (:class:`DeltaMsg`); a kernel of this version
  never sends either.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, Literal, TypedDict

from msgspec import Meta

from ..core.attachment import AttachmentKind
from ..core.pieces import (
    FINAL_STATUSES,
    FINAL_TOOL_STATES,
    PART_TYPES,
    TOOL_STATES,
    FinishReason,
    PartType,
    Status,
    ToolDecision,
    ToolState,
)

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # pragma: no cover
    from typing_extensions import NotRequired

__all__ = ["FINAL_STATUSES", "FINAL_TOOL_STATES", "PART_TYPES", "TOOL_STATES", "Status",
           "ToolDecision", "ToolState"]  # re-exported: the wire carries them

Role = Literal["user", "assistant", "system"]

#: How the view lays the conversation out (the ``mode`` trait): ``chat`` (a
#: conversation with an input box: ChatWidget), ``stream`` (an optional prompt
#: and one answer, no input box: StreamView, stream()), ``compare`` (one column
#: per pane, one shared input box: Compare).
Mode = Literal["chat", "stream", "compare"]

#: One run of a delta: ``[type, text]`` for answer and reasoning text (a view ignores
#: a run of a type it does not know; the tool loop's runs are :data:`ToolArgsRun`,
#: :data:`ToolResultRun` and :data:`RoundRun`)
TextRun = tuple[Literal["answer", "reasoning"], str]

#: bounds on what a view message may carry (a message beyond one is refused)
MAX_VIEW_TEXT = 1_000_000
MAX_VIEW_ID = 256
MAX_SEQ = 1 << 53
MAX_RENDER_MS = 3_600_000.0

#: a message id, as a view names it
ViewId = Annotated[str, Meta(max_length=MAX_VIEW_ID)]
#: text a person typed in the view
ViewText = Annotated[str, Meta(max_length=MAX_VIEW_TEXT)]


class LoadingMeta(TypedDict):
    """What a loading reply waits for, as its source last said (see ``core/loading.py``)."""

    #: one short line: "preparing the model (first run, once)", "loading model"
    text: str
    #: how far, 0..1 (rounded to 0.001); null: unknown
    fraction: float | None


# ---- tool calls (#20) -------------------------------------------------------------------
# (the states of a call and a person's answer are declared beside the statuses, in
# core/pieces.py: ToolState, TOOL_STATES, FINAL_TOOL_STATES, ToolDecision)


class ToolCallMetaExtras(TypedDict, total=False):
    """Keys a :class:`ToolCallMeta` carries only where they apply."""

    #: it needed a person's approval (the card shows Allow / Deny while it waits)
    asks: bool
    #: the card offers "Always allow" (not for a tool that runs code)
    always: bool
    #: one line: why it ended in error / denied / cancelled
    error: str
    #: how long the tool ran, ms (once it ended, if it ran)
    ms: float
    #: characters of the arguments the view did not receive (bounded on the wire)
    cut: int


class ToolCallMeta(ToolCallMetaExtras):
    """One tool call of a message, in its meta's ``tools`` list (index: the call's
    number, which its delta runs name). Its arguments and result travel in the
    message's deltas (:data:`ToolArgsRun`, :data:`ToolResultRun`)."""

    id: str
    name: str
    state: ToolState
    #: the round of the turn it was asked in (0: the model's first answer)
    round: int


#: A tool result as the view may show it (tools/results.py): MIME type -> data, each
#: bounded (``DISPLAY_LIMITS``; images base64, PNG or JPEG only; HTML and Markdown
#: sanitized by the view like model output), and ``omitted``: MIME type -> characters
#: of the displays left out for their size.
ToolDisplay = TypedDict("ToolDisplay", {
    "text/html": str,
    "text/markdown": str,
    "image/png": str,
    "image/jpeg": str,
    "omitted": dict[str, int],
}, total=False)

#: ``["tool", text, n]``: a piece of the argument text (JSON) of the message's tool
#: call number ``n`` (0, 1, ... over its rounds), in order as it streams; the first
#: (maybe empty) marks the call's place among the parts
ToolArgsRun = tuple[Literal["tool"], str, int]
#: ``["tool_result", text, n, display]``: the result of call ``n``: the text the model
#: was told, and what the view may show
ToolResultRun = tuple[Literal["tool_result"], str, int, ToolDisplay]
#: ``["round", "", r]``: round ``r`` (1, 2, ...) of the tool loop starts here: the
#: model asked again with the results of the calls before it
RoundRun = tuple[Literal["round"], Literal[""], int]


class ToolApprovalMsg(TypedDict):
    """View -> kernel: a person's answer to the approval card of call ``call`` in reply
    ``id``. The kernel refuses (and logs) one that does not match a call of that reply
    waiting for approval (stale, forged, answered already)."""

    kind: Literal["tool_approval"]
    id: ViewId
    call: ViewId
    decision: ToolDecision


#: the tool loop's types and constants, for ``GENERATED`` below
TOOL_TYPES: tuple[Any, ...] = (ToolState, ToolDecision, ToolCallMeta, ToolDisplay,
                               ToolArgsRun, ToolResultRun, RoundRun, ToolApprovalMsg)
TOOL_CONSTANTS = ("TOOL_STATES", "FINAL_TOOL_STATES")
# ---- end of tool calls ------------------------------------------------------------------


# ---- attachments (#21) ------------------------------------------------------------------
#: the most bytes the buffers of one Send may carry together: Jupyter's server closes a
#: websocket whose message passes 10 MiB (tornado's ``websocket_max_message_size``). The
#: view keeps under it; the kernel refuses more, saying why (:class:`RefusedMsg`)
MAX_UPLOAD_BYTES = 8 << 20
#: the most attachments one Send may name (a widget's own, lower limit,
#: ``AttachmentLimits.max_count``, is checked after, and refused with the reason)
MAX_UPLOAD_COUNT = 1000
#: the longest attachment name a Send may carry
MAX_UPLOAD_NAME = 1000


class PreviewMeta(TypedDict):
    """Where the view finds an attachment's preview image: a binary state key."""

    #: the state key holding its bytes (``m<i>.a<k>``, see :func:`preview_key`)
    key: str
    #: its image type: PNG or JPEG as the kernel made it (without Pillow, the image's own
    #: PNG, JPEG, WebP or GIF), or an SVG's markup; a view shows it as an image only
    mime: str
    #: its size in pixels
    width: int
    height: int


class AttachmentMetaExtras(TypedDict, total=False):
    """Keys an :class:`AttachmentMeta` carries only where they apply."""

    #: an image's size in pixels, as the model is given it
    width: int
    height: int
    #: what the conversion did ("downscaled from 4000x3000 px", "the first 200 rows")
    note: str
    #: a text's first characters (the view shows them on demand, as text)
    excerpt: str
    #: an image's (or an SVG's) preview
    preview: PreviewMeta


class AttachmentMeta(AttachmentMetaExtras):
    """One attachment of a user message, in its meta's ``attachments`` list. The
    name is hostile input: the view shows it as text only."""

    name: str
    mime: str
    #: bytes of the content the model is given
    size: int
    #: how a model is given it
    kind: AttachmentKind


class AttachmentPolicy(TypedDict):
    """The ``attachment_policy`` trait: what the view lets the user attach (the
    kernel checks it all again)."""

    #: MIME patterns, one list per source: an attachment must match a pattern of
    #: each (a text also matches ``text/*``); ``[]``: the widget takes none
    accepts: list[list[str]]
    #: attachments per message
    max_count: int
    #: bytes per attachment
    max_bytes: int
    #: bytes per message (at most :data:`MAX_UPLOAD_BYTES`)
    max_message_bytes: int
    #: bytes of the whole conversation's attachments
    max_chat_bytes: int
    #: images larger than this (pixels, longer side) are downscaled before they are sent
    max_image_side: int


class SendAttachment(TypedDict):
    """One attachment of a :class:`SendMsg`: its bytes are the message's buffer of
    the same position."""

    #: the file's name (hostile input: the kernel keeps its last part, cleaned)
    name: Annotated[str, Meta(min_length=1, max_length=MAX_UPLOAD_NAME)]
    #: the length of its buffer, bytes
    size: Annotated[int, Meta(ge=0)]


class RefusedMsg(TypedDict):
    """Kernel -> view, a custom message: the view's Send number ``draft`` was refused
    (an attachment the source cannot take, a limit); the view gives the draft back
    and shows ``reason``."""

    kind: Literal["refused"]
    draft: int
    reason: str


#: the attachments' types and constants, for ``GENERATED`` below
ATTACHMENT_TYPES: tuple[Any, ...] = (AttachmentKind, PreviewMeta, AttachmentMeta,
                                     AttachmentPolicy, SendAttachment, RefusedMsg)
ATTACHMENT_CONSTANTS = ("MAX_UPLOAD_BYTES", "MAX_UPLOAD_COUNT", "MAX_UPLOAD_NAME")
# ---- end of attachments -----------------------------------------------------------------

#: One run of a delta, as a kernel of this version sends it.
DeltaRun = TextRun | ToolArgsRun | ToolResultRun | RoundRun

#: What one delta appends: a string (all answer text) or its runs in order
#: (``[[type, text, ...], ...]``; see ``Run`` in core/stream.py).
DeltaBody = str | list[DeltaRun]


class MessageMetaExtras(TypedDict, total=False):
    """Keys a :class:`MessageMeta` carries only where they apply."""

    #: a user message's attachments (#21), in order
    attachments: list[AttachmentMeta]

    #: ``Compare``: the pane (index into the ``panes`` trait) of an assistant message
    pane: int
    #: a user message's text (an assistant's text is in its delta keys)
    text: str
    #: why a finished reply ended (see :data:`~nbstream.core.pieces.FinishReason`); null:
    #: the source's stream ended with no end marker. Absent while it runs.
    finish_reason: FinishReason | None
    #: one-line error for ``error`` / ``timeout`` (absent or null: none)
    error: str | None
    #: optional details (traceback) shown on demand (absent or null: none)
    detail: str | None
    #: the message this one follows (null: a first message). Messages with the same
    #: parent are alternatives (an edited question, a regenerated answer); absent in
    #: states saved by older versions, whose messages follow each other in id order
    parent: str | None
    #: while ``loading``, where the source reported it: what it waits for and how far.
    #: Sent with the meta, the latest report at most every 0.25 s (``stream.py``)
    progress: LoadingMeta
    #: an assistant's generation options in force (``temperature``,
    #: ``max_new_tokens``...; see :mod:`nbstream.generation`); absent: none known
    options: dict[str, Any]
    #: its tool calls, in call order (absent: none; see :class:`ToolCallMeta`)
    tools: list[ToolCallMeta]


class MessageMeta(MessageMetaExtras):
    """One message's key ``"m<i>"`` in the widget's state: everything but its text."""

    role: Role
    #: number of the last delta of this message (the view has all once it has 1..seq)
    seq: int
    status: Status
    #: figures of the finished reply the view shows (ttft_ms, tokens, usage, ...)
    stats: dict[str, Any]


class MessageStateExtras(TypedDict, total=False):
    """Keys a :class:`MessageState` carries only where they apply."""

    #: a user message's attachments (see :class:`MessageMetaExtras`)
    attachments: list[AttachmentMeta]

    #: ``Compare``: the pane (index into the ``panes`` trait) of an assistant message
    pane: int
    #: why a finished reply ended (absent while it runs; None: no end marker)
    finish_reason: FinishReason | None
    #: the message this one follows (None: a first message)
    parent: str | None
    #: while ``loading``: what the source waits for (the view's copy of its meta's;
    #: ``StreamingWidget.conversation`` leaves it out)
    progress: LoadingMeta
    #: the generation options in force (see :class:`MessageMetaExtras`)
    options: dict[str, Any]


class MessageState(MessageStateExtras):
    """One whole message (``StreamingWidget.conversation``, and the ``conversation``
    list of notebooks saved by older versions)."""

    id: str
    role: Role
    #: the answer (or the prompt)
    text: str
    #: the reasoning, "" if none
    reasoning: str
    #: number of the last delta already contained in ``text`` (0: none)
    seq: int
    status: Status
    #: one-line error for ``error`` / ``timeout``, else None
    error: str | None
    #: optional details (traceback) shown on demand
    detail: str | None
    #: figures for the finished reply (ttft_ms, tokens, tokens_per_s, ...)
    stats: dict[str, Any]


class DeltaMsg(TypedDict):
    """Older kernels -> view: ``text`` (and ``reasoning``) is appended to message ``id``."""

    kind: Literal["delta"]
    id: str
    seq: int
    #: the answer text it appends
    text: str
    #: the reasoning it appends (absent: none)
    reasoning: NotRequired[str]


class SendMsgExtras(TypedDict, total=False):
    """Keys a :class:`SendMsg` carries only where they apply."""

    #: its attachments (#21), in the order of the message's buffers (their bytes)
    attachments: Annotated[list[SendAttachment], Meta(max_length=MAX_UPLOAD_COUNT)]
    #: the view's number for this Send, named again by a :class:`RefusedMsg`
    draft: Annotated[int, Meta(ge=0, le=MAX_SEQ)]


class SendMsg(SendMsgExtras):
    """View -> kernel: the user sent a prompt."""

    kind: Literal["send"]
    text: ViewText


class StopMsg(TypedDict):
    """View -> kernel: stop the reply ``id``, or ``Compare``'s pane ``pane``, or (with
    neither) whatever runs."""

    kind: Literal["stop"]
    id: NotRequired[ViewId]
    pane: NotRequired[Annotated[int, Meta(ge=0)]]


class RegenerateMsg(TypedDict):
    """View -> kernel: ask the last answer's prompt again (a running last answer is stopped;
    the old answer stays, as an alternative)."""

    kind: Literal["regenerate"]


class ClearMsg(TypedDict):
    """View -> kernel: stop what runs and forget the conversation."""

    kind: Literal["clear"]


class ContinueMsg(TypedDict):
    """View -> kernel: ask the model to go on from the reply ``id`` (cut at the limit)."""

    kind: Literal["continue"]
    id: ViewId


class SwitchMsg(TypedDict):
    """View -> kernel: show the branch through message ``id`` (one of the alternatives
    at its place)."""

    kind: Literal["switch"]
    id: ViewId


class EditMsg(TypedDict):
    """View -> kernel: ask ``text`` in place of the user message ``id``: a new
    alternative to it, answered (the old one and what followed it stay)."""

    kind: Literal["edit"]
    id: ViewId
    text: ViewText


class SystemPromptMsg(TypedDict):
    """View -> kernel: the user edited the system prompt (``""``: none); it applies
    to the next question (``ChatWidget``)."""

    kind: Literal["system_prompt"]
    text: ViewText


class HelloMsgExtras(TypedDict, total=False):
    """Keys a :class:`HelloMsg` carries from views of this version."""

    #: the view's own id (random, one per rendered view), which its :class:`ByeMsg` repeats
    view: Annotated[str, Meta(min_length=1, max_length=MAX_VIEW_ID)]


class HelloMsg(HelloMsgExtras):
    """View -> kernel: a view was rendered (or its link came back, or it wonders whether
    the kernel still hears it); bring it up to date and answer (:class:`WelcomeMsg`)."""

    kind: Literal["hello"]


class ByeMsg(TypedDict):
    """View -> kernel: the view ``view`` was removed from the page (its notebook tab
    closed, its output cleared), or, with ``leaving`` ``"page"``, its whole page is going
    (a browser tab closed, or reloading: the two cannot be told apart). When the widget's
    last view says bye and no other says hello within ``VIEW_GONE_GRACE`` seconds
    (``PAGE_GONE_GRACE`` after a page's bye: long enough for a reload to come back), its
    running replies are stopped: nobody watches them, and a server should not go on
    generating for nobody."""

    kind: Literal["bye"]
    view: Annotated[str, Meta(min_length=1, max_length=MAX_VIEW_ID)]
    #: ``"view"`` (the default): the view was removed; ``"page"``: its page is unloading
    leaving: NotRequired[Literal["view", "page"]]


class WelcomeMsg(TypedDict):
    """Kernel -> view, a custom message: the answer to a :class:`HelloMsg`, sent by the
    pump after the state it brought. A view that sent hello and hears nothing back
    while the kernel is idle is not connected (the kernel restarted, or a notebook was
    reopened with a kernel that never knew this widget)."""

    kind: Literal["welcome"]


class ResyncMsg(TypedDict):
    """View -> kernel: a delta of message ``id`` is missing after ``have``."""

    kind: Literal["resync"]
    id: ViewId
    #: the number of the last delta the view applied (absent: 0)
    have: NotRequired[Annotated[int, Meta(ge=0, le=MAX_SEQ)]]


class AckMsg(TypedDict):
    """View -> kernel: delta ``seq`` of ``id`` was rendered, taking ``render_ms``. Sent
    by views of earlier versions, one per message of a round; a view of this version
    sends the round as one :class:`AcksMsg`. The kernel still takes both."""

    kind: Literal["ack"]
    id: ViewId
    seq: Annotated[int, Meta(ge=1, le=MAX_SEQ)]
    #: the mean DOM time of the view's frames since its last ack (absent: 0)
    render_ms: NotRequired[Annotated[float, Meta(ge=0, le=MAX_RENDER_MS)]]


#: the most acks one :class:`AcksMsg` carries: a view owing more in a round sends them
#: in several messages of at most this many
MAX_ACKS = 256


class AckEntry(TypedDict):
    """One message's ack in an :class:`AcksMsg`: delta ``seq`` of ``id`` was rendered."""

    id: ViewId
    seq: Annotated[int, Meta(ge=1, le=MAX_SEQ)]


class AcksMsg(TypedDict):
    """View -> kernel: a round of acks, one message for every message the view owes an
    ack (a ``Compare``'s panes, a reply's several streams), instead of one
    :class:`AckMsg` each: every browser -> kernel message makes the kernel publish a
    busy and an idle status to the page, whatever it carries. The kernel applies the
    entries in order, each as an :class:`AckMsg` of the same ``id``, ``seq`` and
    ``render_ms``; a message with an entry that does not fit is refused whole (none
    of it applied)."""

    kind: Literal["acks"]
    #: the acks of the round, in the order the view rendered their messages
    acks: Annotated[list[AckEntry], Meta(min_length=1, max_length=MAX_ACKS)]
    #: the mean DOM time of the view's frames since its last round (absent: 0)
    render_ms: NotRequired[Annotated[float, Meta(ge=0, le=MAX_RENDER_MS)]]


#: What a view loads on first use (``js/src/chunks.ts``): ``math`` (Temml),
#: ``highlight`` (highlight.js), ``entities`` (the table of HTML's named character
#: references, for a rarer ``&name;``), ``linkify`` (linkify-it, for bare URLs and
#: e-mail addresses), ``glyphs`` (``js/src/glyphs.ts``: the fonts for a long
#: history's characters, found before a reader scrolls to them) and ``tools``
#: (``js/src/toolcard.ts``: the cards of a reply's tool calls), each a module of its
#: own (``static/<name>.js``) that the kernel's runtime widget (``runtime.py``)
#: carries once a message needs it (``glyphs``: once a view asks; ``tools``: once a
#: reply's first tool part is sent).
ChunkName = Literal["math", "highlight", "entities", "linkify", "glyphs", "tools"]


class ChunkMsg(TypedDict):
    """View -> the kernel's runtime widget (not the view's own widget): send chunk
    ``name``; a view met a formula, a code block, a character reference or a link
    that the kernel had not seen (the kernel sends a chunk when the text it sends needs it),
    or a long history with characters to find fonts for (``glyphs``), or a reply's tool
    call that came before the kernel's ``tools`` chunk."""

    kind: Literal["chunk"]
    name: ChunkName


#: Every message a view sends; each is told apart by its ``kind``. A
#: :class:`ChunkMsg` goes to the runtime widget, every other to the view's widget.
ViewMsg = (SendMsg | StopMsg | RegenerateMsg | ClearMsg | ContinueMsg | SystemPromptMsg
           | SwitchMsg | EditMsg | HelloMsg | ByeMsg | ResyncMsg | AckMsg | AcksMsg
           | ToolApprovalMsg | ChunkMsg)


class PaneInfo(TypedDict):
    """One pane of a ``Compare`` widget (an entry of the ``panes`` trait)."""

    label: str


class ViewDebug(TypedDict, total=False):
    """Debugging switches of a widget's views (its ``debug`` trait), each absent as
    shipped. Benchmarks set them to measure the previous ways side by side with
    the shipped ones (``benchmarks/browser_*.py``); a view reads them when it
    renders. A new switch is one more field here (and its use in the view)."""

    #: ``"full"``: re-render an answer's whole Markdown each frame (the naive way),
    #: instead of only its open block (``"incremental"``)
    markdown: Literal["incremental", "full"]
    #: ``"every-frame"``: acknowledge every frame that rendered deltas (the previous
    #: way) instead of sparse rounds (``"sparse"``, js/src/frame.ts)
    acks: Literal["sparse", "every-frame"]
    #: the least time between two rounds of acks, ms (an experiment; the shipped gap
    #: is js/src/frame.ts ACK_GAP_MS)
    ack_gap_ms: Annotated[float, Meta(ge=0, le=60_000)]
    #: ``"at-once"``: let a Markdown block skip layout in the frame it was first laid
    #: out (the previous way), instead of in batches (``"batched"``, js/src/sized.ts)
    sized: Literal["batched", "at-once"]
    #: ``"off"``: render every message when it is shown (the previous way) instead of
    #: finished ones as they come near the view, the end first (``"on"``, js/src/lazy.ts)
    lazy: Literal["on", "off"]
    #: ``"per-view"``: each view requests its own animation frames (the previous
    #: way) instead of rendering from the page's one frame loop and its budget
    #: (``"shared"``, js/src/scheduler.ts)
    frames: Literal["shared", "per-view"]


class ViewTraits(TypedDict):
    """The synced traits a view reads (any of them may be absent), besides the
    per-message keys ``m<i>``, ``m<i>.<s>`` and ``m<i>.a<k>``."""

    #: older kernels' whole conversation (:data:`STATE_TRAIT`)
    conversation: list[MessageState]
    #: :data:`LAST_ID_KEY`
    last_id: int
    #: :data:`LIVE_KEY`
    live: dict[str, int]
    #: :data:`REMOVED_KEY`
    removed: int
    #: :data:`CURRENT_KEY`
    current: str | None
    #: one of :data:`Mode`; a view lays an unknown one out as a chat
    mode: str
    title: str
    placeholder: str
    source_label: str
    panes: list[PaneInfo]
    #: the system prompt (null: none)
    system_prompt: str | None
    #: debugging switches (:class:`ViewDebug`); ``{}`` as shipped
    debug: ViewDebug
    #: the widget's own model id (its comm's id): a view finds its jupyter-widgets model
    #: with it, to read whether the model is connected (js/src/connection.ts)
    _model_ref: str
    #: what the user may attach (:class:`AttachmentPolicy`); ``{}``: a widget with no
    #: input box
    attachment_policy: AttachmentPolicy


#: older kernels' trait that held the whole conversation (a list of :class:`MessageState`)
STATE_TRAIT = "conversation"
#: the keys of the widget's state that are not per message
LAST_ID_KEY = "last_id"
#: the last message of the branch shown (absent in older states: every message shows)
CURRENT_KEY = "current"
LIVE_KEY = "live"
REMOVED_KEY = "removed"

#: what ``scripts/gen_protocol.py`` writes to ``js/src/protocol.gen.ts``: these types
#: (and every type they name) ...
GENERATED: tuple[Any, ...] = (
    Status, FinishReason, PartType, Role, Mode, DeltaBody, LoadingMeta, MessageMeta,
    MessageState, DeltaMsg, SendMsg, StopMsg, RegenerateMsg, ClearMsg, ContinueMsg,
    SwitchMsg, EditMsg, SystemPromptMsg, HelloMsg, ByeMsg, WelcomeMsg, ResyncMsg, AckMsg,
    AckEntry, AcksMsg, ChunkName, ChunkMsg, ViewMsg, PaneInfo, ViewDebug, ViewTraits, TextRun,
    DeltaRun, *TOOL_TYPES, *ATTACHMENT_TYPES,
)
#: ... and these constants
GENERATED_CONSTANTS = ("FINAL_STATUSES", "PART_TYPES", "STATE_TRAIT", "LAST_ID_KEY",
                       "CURRENT_KEY", "LIVE_KEY", "REMOVED_KEY", "MAX_VIEW_TEXT",
                       "MAX_VIEW_ID", "MAX_SEQ", "MAX_RENDER_MS", "MAX_ACKS", *TOOL_CONSTANTS,
                       *ATTACHMENT_CONSTANTS)


def meta_key(number: int) -> str:
    """The state key of message number ``number`` (its id)."""
    return f"m{number}"


def delta_key(message_id: str, seq: int) -> str:
    """The state key of delta ``seq`` of message ``message_id``."""
    return f"{message_id}.{seq}"


def preview_key(message_id: str, k: int) -> str:
    """The state key of the preview of attachment ``k`` (from 1) of message ``message_id``."""
    return f"{message_id}.a{k}"
