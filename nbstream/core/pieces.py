"""What a source hands the pipeline: pieces of text, and how a generation ended.

This module is the contract between ``sources/`` (producers, on worker
threads), the stream core (``stream.py``) and the widgets (``reply.py``): the
pieces, how a generation ended, a message's statuses, and the conversation a
source is handed (:class:`ChatMessage`, whose user turns may carry
attachments, :class:`~nbstream.core.attachment.Attachment`). It imports nothing else of
nbstream but that sibling contract module, so both sides can depend on it
without depending on each other.

* A **piece** is a ``str``. A plain ``str`` is answer text; a
  :class:`Reasoning` (a ``str`` subclass) is the model's thinking, shown apart
  from the answer and left out of the history by default. ``emit(piece)``
  takes either.
* :meth:`Source.generate` returns an :class:`Outcome` (or ``None``, which
  means ``Outcome()``: ended normally with ``finish_reason="stop"``). It says
  why the generation ended, and carries the figures only the source knows
  (usage, server timings, tokens). It travels back through the reply's own
  call, never through a mutable attribute on the shared source object.
* ``emit`` raises :class:`Cancelled` once the reply was stopped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, get_args

from .attachment import Attachment

#: Why a reply ended. Sources report ``stop``, ``length``, ``tool_calls``,
#: ``abort`` (vLLM's), or None (a server's stream ended with neither a finish
#: reason nor an end marker). The pipeline itself sets ``cancelled`` (a stop),
#: ``error`` (the source raised), ``timeout`` (a time limit) and
#: ``max_tool_rounds`` (the model still called tools after the widget's
#: ``max_tool_rounds`` rounds of tool calls: the turn ends there).
FinishReason = Literal["stop", "length", "tool_calls", "abort", "cancelled", "error", "timeout",
                       "max_tool_rounds"]

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
FINAL_STATUSES: frozenset[Status] = frozenset({"done", "stopped", "error", "timeout"})

# ---- tool calls (#20): where a call stands, and a person's answer --------------------------
#: Where a tool call stands (nbstream/tools/calls.py): ``streaming`` (its arguments are
#: arriving), ``ready`` (the model's reply ended: the arguments are complete),
#: ``awaiting_approval`` (a person must allow it first), ``running``, ``done``,
#: ``error`` (it raised, timed out, was unknown or got arguments that do not fit),
#: ``denied`` (a person denied it; the model was told), ``cancelled`` (the turn was
#: stopped, or reached ``max_tool_rounds``, first)
ToolState = Literal["streaming", "ready", "awaiting_approval", "running", "done", "error",
                    "denied", "cancelled"]

#: every state of a tool call (a view shows one it does not know as ``cancelled``)
TOOL_STATES: tuple[ToolState, ...] = get_args(ToolState)
#: the states a tool call never leaves
FINAL_TOOL_STATES: frozenset[ToolState] = frozenset({"done", "error", "denied", "cancelled"})

#: a person's answer to an approval card: ``allow`` (this call), ``always`` (this tool,
#: for this chat: not offered for a tool that runs code) or ``deny``
ToolDecision = Literal["allow", "always", "deny"]
# ---- end of tool calls ------------------------------------------------------------------


class ToolCallFunction(TypedDict):
    """What a tool call asks for: the tool's ``name`` and its ``arguments``, a JSON text."""

    name: str
    arguments: str


class ToolCallMessage(TypedDict):
    """One tool call of an assistant turn, in OpenAI's shape."""

    id: str
    type: Literal["function"]
    function: ToolCallFunction


class ChatMessageExtras(TypedDict, total=False):
    """Keys a :class:`ChatMessage` carries only where they apply (OpenAI's shape)."""

    #: an assistant turn that called tools: its calls (``content`` may then be "")
    tool_calls: list[ToolCallMessage]
    #: a ``"tool"`` turn: the id of the call whose result ``content`` is
    tool_call_id: str
    #: a ``"tool"`` turn: the tool's name
    name: str
    #: a ``"user"`` turn: what it carries besides ``content`` (images, texts, files),
    #: in order; a source converts them into what its model takes
    #: (:mod:`nbstream.sources.content_parts`) or refuses what it cannot take
    #: (:attr:`~nbstream.sources.base.Source.accepts`)
    attachments: Sequence[Attachment]


class ChatMessage(ChatMessageExtras):
    """One turn of the conversation handed to a source: ``role`` is ``"system"``,
    ``"user"``, ``"assistant"`` or ``"tool"`` (a tool's result)."""

    role: str
    content: str


#: A tool as a source hands it to its model: OpenAI's function-tool JSON,
#: ``{"type": "function", "function": {"name", "description", "parameters"}}``
#: (``parameters`` a JSON Schema object).
ToolSchema = dict[str, Any]


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a tool call as the model streams it: ``emit(ToolCallDelta(...))``.

    ``index`` names the call within one reply (0, 1, ... for parallel calls).
    The first piece of a call carries its ``id`` (as the server named it; a
    source makes one up when the model gives none) and the tool's ``name``;
    every piece may carry the next piece of its ``arguments``, JSON text that
    is parsed once the call is complete. A reply that ends with calls ends
    with ``finish_reason="tool_calls"``.
    """

    index: int
    arguments: str = ""
    id: str | None = None
    name: str | None = None


#: The types of part a message is made of: its answer and reasoning text, and (put by
#: the widget side's tool loop, never by a source) the arguments of its tool calls
#: (``"tool"``), their results (``"tool_result"``) and where a new round of the
#: loop starts (``"round"``).
PartType = Literal["answer", "reasoning", "tool", "tool_result", "round"]

#: Every part type, in the order a view shows a message's parts (a new type is added
#: to :data:`PartType` and here). The tool loop's parts (#20) show in the order they
#: came, between reasoning and answer.
PART_TYPES: tuple[PartType, ...] = ("reasoning", "answer", "tool", "tool_result", "round")


class Reasoning(str):
    """A piece of the model's reasoning (thinking), not of its answer.

    ``emit(Reasoning("…"))``; a plain ``str`` is answer text.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Reasoning({str.__repr__(self)})"


# ---- tool-call pieces (#20): what the tool loop puts into a message's stream -------------
class ToolArgs(str):
    """A piece of the arguments (JSON text) of the message's tool call number ``call``
    (0, 1, ... over the message's rounds). May be empty: the call's first piece marks
    its place among the parts. Put by the widget side from a source's
    :class:`ToolCallDelta` pieces; sources emit those, never this."""

    call: int

    def __new__(cls, text: str, call: int) -> ToolArgs:
        self = super().__new__(cls, text)
        self.call = call
        return self

    def __repr__(self) -> str:
        return f"ToolArgs({str.__repr__(self)}, call={self.call})"


class ToolOutput(str):
    """The result of the message's tool call number ``call``: the text the model was
    given, and ``display`` (MIME type -> data, bounded) for the view."""

    call: int
    display: Mapping[str, Any]

    def __new__(cls, text: str, call: int, display: Mapping[str, Any] | None = None
                ) -> ToolOutput:
        self = super().__new__(cls, text)
        self.call = call
        self.display = dict(display or {})
        return self

    def __repr__(self) -> str:
        return f"ToolOutput({str.__repr__(self)}, call={self.call})"


class RoundStart(str):
    """An empty piece that marks where round ``round`` (1, 2, ...) of a tool loop starts:
    the model asked again with the results of the calls before it."""

    round: int

    def __new__(cls, round: int) -> RoundStart:
        self = super().__new__(cls, "")
        self.round = round
        return self

    def __repr__(self) -> str:
        return f"RoundStart({self.round})"


# ---- end of tool-call pieces -----------------------------------------------------------


def part_type(piece: str) -> PartType:
    """The part a piece belongs to."""
    if isinstance(piece, Reasoning):
        return "reasoning"
    if isinstance(piece, ToolArgs):
        return "tool"
    if isinstance(piece, ToolOutput):
        return "tool_result"
    if isinstance(piece, RoundStart):
        return "round"
    return "answer"


@dataclass(frozen=True)
class Outcome:
    """How one ``generate()`` ended, with the figures only the source knows.

    ``usage`` holds token counts where reported: ``prompt_tokens``,
    ``completion_tokens``, ``reasoning_tokens``, ``cached_tokens``.
    ``figures`` holds anything else worth showing in ``reply.stats``:
    ``tokens`` (generated tokens, when the source counts them), llama.cpp's
    ``timings`` (``prompt_per_second``, ``predicted_per_second``, ...), ...
    """

    finish_reason: FinishReason | None = "stop"
    usage: Mapping[str, int] = field(default_factory=dict)
    figures: Mapping[str, Any] = field(default_factory=dict)


class Cancelled(Exception):
    """Raised by ``emit`` after the reply was stopped; sources let it propagate."""
