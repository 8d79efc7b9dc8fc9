"""The wire protocol between the kernel and the browser view, as types.

Mirrored by ``js/src/protocol.ts``; change both together.

Direction rules (who may send what, how often, and why):

* **Kernel -> view, synced state.** The trait ``conversation`` holds one
  :class:`MessageState` per message of the conversation. Only the pump thread
  writes it, and only when something other than text changed (a message was
  added, a status changed, a reply ended) or when a view asked to be brought up
  to date. It is what a saved notebook shows and what a new or reloaded view
  starts from. Writing it re-sends the whole conversation, so it is never
  written per token.
* **Kernel -> view, custom messages.** :class:`DeltaMsg` carries the text
  appended to one message since the previous delta. Deltas are sent only by
  the pump thread, at most one per stream per flush interval (the first piece
  at once), so the message rate is bounded whatever the token rate.
* **Sequence numbers.** Each message counts its deltas from 1. A
  :class:`MessageState` carries ``seq``: the number of the last delta its
  ``text`` already contains. A view keeps ``(text, seq)`` per message and:

  - applies a state entry whose ``seq`` is >= its own (replacing the text);
  - appends a delta whose ``seq`` is its own + 1;
  - ignores a delta whose ``seq`` is <= its own (already contained);
  - ignores deltas of a message whose status is final;
  - on a delta whose ``seq`` is > its own + 1 (a delta was lost, e.g. dropped
    by the server's IOPub rate limit) or for a message it does not know, drops
    it and sends :class:`ResyncMsg`; the kernel answers by re-publishing the
    state, which repairs the gap.

  These rules make the order between state and deltas irrelevant, so a view
  created or reloaded mid-stream continues without a gap or a duplicate.
* **View -> kernel, custom messages.** User commands (:class:`SendMsg`,
  :class:`StopMsg`, :class:`RegenerateMsg`, :class:`ClearMsg`),
  :class:`HelloMsg` when a view is rendered, and
  :class:`AckMsg` after the frame that rendered a delta. The kernel handles
  them on its main thread (or on a subshell thread with
  ``commsOverSubshells``), so handlers only record or enqueue and never block.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

#: Lifecycle of an assistant message. User messages are always ``"done"``.
Status = Literal[
    "queued",  # waiting for the model (another reply holds it)
    "loading",  # the model is being loaded
    "running",  # generation started; waiting for or receiving pieces
    "done",  # finished normally
    "stopped",  # stopped by the user (button, Escape, stop(), interrupt)
    "error",  # the source raised; see ``error``
    "timeout",  # a time limit ended it; see ``error`` for which
]

#: Statuses after which a message never changes again.
FINAL_STATUSES: frozenset[str] = frozenset({"done", "stopped", "error", "timeout"})

Role = Literal["user", "assistant", "system"]


class MessageStateExtras(TypedDict, total=False):
    """Keys a :class:`MessageState` carries only where they apply."""

    #: ``Compare``: the pane (index into the ``panes`` trait) of an assistant message
    pane: int


class MessageState(MessageStateExtras):
    """One message as the view sees it (an entry of the ``conversation`` trait)."""

    id: str
    role: Role
    text: str
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
    """Kernel -> view: ``text`` is appended to message ``id``."""

    kind: Literal["delta"]
    id: str
    seq: int
    text: str


class SendMsg(TypedDict):
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
    """View -> kernel: stop and drop the last answer, then ask its prompt again."""

    kind: Literal["regenerate"]


class ClearMsg(TypedDict):
    """View -> kernel: stop what runs and forget the conversation."""

    kind: Literal["clear"]


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


ViewMsg = SendMsg | StopMsg | RegenerateMsg | ClearMsg | HelloMsg | ResyncMsg | AckMsg
KernelMsg = DeltaMsg
