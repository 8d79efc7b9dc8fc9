"""The wire protocol between the kernel and the browser view, as types.

Mirrored by ``js/src/protocol.ts``; change both together.

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
  - ``"m<i>.a<k>"``: the preview of attachment ``k`` (from 1) of user message
    ``m<i>`` (see :class:`AttachmentMeta`): a small image as a *binary buffer*
    (``buffer_paths``; a ``DataView`` in the front-end model, base64 in a saved
    notebook), sent once, with the meta that lists it (null once removed).
  - ``"last_id"``: the highest message number given out so far: a view
    enumerates ``m1 .. m<last_id>`` (ids are allocated in conversation order,
    so this is also the order), with no list that grows with the conversation.
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
* **Parts.** A delta carries runs of typed parts (:data:`PartType`: today
  ``"reasoning"`` and ``"answer"``). A view shows each type in its own block
  and ignores a type it does not know, so a new type (tool calls...) is added
  without another redesign.
* **View -> kernel, custom messages.** User commands (:class:`SendMsg`,
  :class:`StopMsg`, :class:`RegenerateMsg`, :class:`ClearMsg`,
  :class:`ContinueMsg`, :class:`SystemPromptMsg`, :class:`SwitchMsg`, :class:`EditMsg`),
  :class:`HelloMsg` when a view is rendered (the kernel re-sends the metas of live
  messages and ``live``), and
  :class:`AckMsg` after the frame that rendered a delta. The kernel handles
  them on its main thread (or on a subshell thread with
  ``commsOverSubshells``), so handlers only record or enqueue and never block.
* **Older kernels.** A view still shows a notebook saved by an older nbstream,
  whose state held the whole conversation in one ``conversation`` list, and
  its ``delta`` custom messages (:class:`DeltaMsg`); a kernel of this version
  never sends either.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from ..core.pieces import FINAL_STATUSES, FinishReason, PartType, Status

__all__ = ["FINAL_STATUSES", "Status"]  # re-exported: the wire carries them

Role = Literal["user", "assistant", "system"]


#: What one delta appends: a string (all answer text) or ``[[type, text], ...]``.
DeltaBody = str | list[list[str]]


class LoadingMeta(TypedDict):
    """What a loading reply waits for, as its source last said (see ``loading.py``)."""

    #: one short line: "preparing the model (first run, once)", "loading model"
    text: str
    #: how far, 0..1 (rounded to 0.001); null: unknown
    fraction: float | None


# ---------------------------------------------------------------- attachments (#21)
class PreviewMeta(TypedDict):
    """Where the view finds an attachment's preview image: the state key ``key``
    (``m<i>.a<k>``, a binary buffer) holding a ``mime`` image of ``width`` by
    ``height`` pixels."""

    key: str
    mime: str
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
    #: how a model is given it: "image", "text" or "file"
    kind: str


class AttachmentPolicy(TypedDict):
    """The ``attachment_policy`` trait: what the view lets the user attach (the
    kernel checks it all again). ``accepts``: MIME patterns, one list per source;
    an attachment must match a pattern of each (texts also match ``text/*``)."""

    accepts: list[list[str]]
    max_count: int
    max_bytes: int
    max_message_bytes: int
    max_chat_bytes: int
    max_image_side: int


class SendAttachment(TypedDict):
    """One attachment of a :class:`SendMsg`; its bytes are the message's buffer of
    the same position."""

    name: str
    size: int


class RefusedMsg(TypedDict):
    """Kernel -> view, a custom message: the view's Send number ``draft`` was refused
    (an attachment the source cannot take, a limit); the view gives the draft back
    and shows ``reason``."""

    kind: Literal["refused"]
    draft: int
    reason: str
# ------------------------------------------------------------ end of attachments


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
    #: one-line error for ``error`` / ``timeout``
    error: str
    #: optional details (traceback) shown on demand
    detail: str
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
    """Older kernels -> view: ``text`` is appended to message ``id``."""

    kind: Literal["delta"]
    id: str
    seq: int
    text: str


class SendMsgExtras(TypedDict, total=False):
    """Keys a :class:`SendMsg` carries only where they apply."""

    #: its attachments, whose bytes are the message's buffers, in order (#21)
    attachments: list[SendAttachment]
    #: the view's number for this Send, named again by a :class:`RefusedMsg`
    draft: int


class SendMsg(SendMsgExtras):
    """View -> kernel: the user sent a prompt."""

    kind: Literal["send"]
    text: str


class StopMsg(TypedDict, total=False):
    """View -> kernel: stop the reply ``id``, or ``Compare``'s pane ``pane``, or (with
    neither) whatever runs."""

    kind: Literal["stop"]
    id: str
    pane: int


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
    id: str


class SwitchMsg(TypedDict):
    """View -> kernel: show the branch through message ``id`` (one of the alternatives
    at its place)."""

    kind: Literal["switch"]
    id: str


class EditMsg(TypedDict):
    """View -> kernel: ask ``text`` in place of the user message ``id``: a new
    alternative to it, answered (the old one and what followed it stay)."""

    kind: Literal["edit"]
    id: str
    text: str


class SystemPromptMsg(TypedDict):
    """View -> kernel: the user edited the system prompt (``""``: none); it applies
    to the next question (``ChatWidget``)."""

    kind: Literal["system_prompt"]
    text: str


class HelloMsg(TypedDict):
    """View -> kernel: a view was rendered; bring it up to date."""

    kind: Literal["hello"]


class ResyncMsg(TypedDict):
    """View -> kernel: a delta of message ``id`` is missing after ``have``."""

    kind: Literal["resync"]
    id: str
    have: int


class AckMsg(TypedDict):
    """View -> kernel: delta ``seq`` of ``id`` was rendered, taking ``render_ms``."""

    kind: Literal["ack"]
    id: str
    seq: int
    render_ms: float


ViewMsg = (SendMsg | StopMsg | RegenerateMsg | ClearMsg | ContinueMsg | SystemPromptMsg
           | SwitchMsg | EditMsg | HelloMsg | ResyncMsg | AckMsg)

#: the keys of the widget's state that are not per message
LAST_ID_KEY = "last_id"
#: the last message of the branch shown (absent in older states: every message shows)
CURRENT_KEY = "current"
LIVE_KEY = "live"
REMOVED_KEY = "removed"
#: what travels in the parts of a message
PART_TYPES: tuple[PartType, ...] = ("reasoning", "answer")


def meta_key(number: int) -> str:
    """The state key of message number ``number`` (its id)."""
    return f"m{number}"


def delta_key(message_id: str, seq: int) -> str:
    """The state key of delta ``seq`` of message ``message_id``."""
    return f"{message_id}.{seq}"
