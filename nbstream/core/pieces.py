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
from typing import Any, Literal, TypedDict

from .attachment import Attachment

#: Why a reply ended. Sources report ``stop``, ``length``, ``tool_calls``,
#: ``abort`` (vLLM's), or None (a server's stream ended with neither a finish
#: reason nor an end marker). The pipeline itself sets ``cancelled`` (a stop),
#: ``error`` (the source raised) and ``timeout`` (a time limit).
FinishReason = Literal["stop", "length", "tool_calls", "abort", "cancelled", "error", "timeout"]

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


#: The types of part a message is made of (more may come: tool calls, ...).
PartType = Literal["answer", "reasoning"]

#: Every part type, in the order a view shows a message's parts (a new type is added
#: to :data:`PartType` and here).
PART_TYPES: tuple[PartType, ...] = ("reasoning", "answer")


class Reasoning(str):
    """A piece of the model's reasoning (thinking), not of its answer.

    ``emit(Reasoning("…"))``; a plain ``str`` is answer text.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Reasoning({str.__repr__(self)})"


def part_type(piece: str) -> PartType:
    """The part a piece belongs to."""
    return "reasoning" if isinstance(piece, Reasoning) else "answer"


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
