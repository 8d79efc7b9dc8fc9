"""A source that types a given text at a set rate: for tests, teaching and demos.

``ScriptedSource("some text", rate=40)`` emits the text in word-sized pieces
(each word with the whitespace before it) at ``rate`` pieces per second.
``jitter`` (0..1) varies each gap by up to that fraction, reproducibly from
``seed``. The schedule is absolute, so a slow consumer does not slow the
source down, and high rates (10,000 pieces/s) are met by emitting the pieces
due within ``MIN_WAIT`` (5 ms) per wake-up. It waits on the cancel event, so
a stop is immediate.

Reasoning: ``reasoning="..."`` is typed first, at the same rate, as
:class:`~nbstream.core.pieces.Reasoning` pieces, then the text. ``finish_reason``
(``"stop"`` by default; ``"length"``, ``None``, ...) and ``usage`` are what
``generate`` returns, so a teaching notebook can show a reply cut at its
length limit without a model.

Faults for tests and teaching: ``error_after=N`` raises after N pieces,
``stall_after=N`` pauses ``stall_for`` seconds after N pieces (reasoning
pieces count).

Tool calls, with no model: a script may hold :func:`call` items, which the
source streams as a model does (the call's id and name, then its JSON
arguments in pieces at the same rate) and then ends with
``finish_reason="tool_calls"``::

    ScriptedSource(rounds=[
        [call("get_weather", city="Paris")],       # the first answer: a tool call
        "It is 18 °C and sunny in Paris.",         # asked again with its result
    ])

``rounds[r]`` is played in round ``r`` of each question's tool loop (``r`` is
how many assistant turns with tool calls follow the last user message; past
the end, the last one again); a round may be a function of the messages, to
answer from what the tools returned. A function ``text(messages)`` may return
pieces and calls too, to answer from what the tools returned.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.attachment import ANY_TYPE
from ..core.pieces import FinishReason, Outcome, Reasoning, ToolCallDelta
from .base import Cancelled, ChatMessage, Emit, Source
from .toolcalls import emit_call

_WORD = re.compile(r"\s*\S+|\s+")
#: never sleep for less than this: at thousands of pieces per second, waking every
#: millisecond in each of several threads costs the kernel's main thread (the GIL)
#: more than emitting the pieces due within the next few milliseconds at once
MIN_WAIT = 0.005


def split_words(text: str) -> list[str]:
    """Split ``text`` into word-sized pieces whose concatenation is ``text``."""
    return _WORD.findall(text)


@dataclass(frozen=True)
class ScriptedCall:
    """A tool call in a script (made by :func:`call`)."""

    name: str
    arguments: str
    id: str | None = None
    #: characters of the arguments per piece (the arguments stream like a model's)
    chunk: int = field(default=8, compare=False)


def call(name: str, arguments: Mapping[str, Any] | str | None = None, /, *,
         id: str | None = None, **kwargs: Any) -> ScriptedCall:
    """A scripted tool call: ``call("get_weather", city="Paris")`` or
    ``call("get_weather", {"city": "Paris"})`` (or the arguments as JSON text, even
    malformed, to show what the loop does with them). ``id``: the call's id (default:
    ``call_1``, ``call_2``... in the order the source streams them)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"call(name, ...): name must be a non-empty str, got {name!r}")
    if arguments is not None and kwargs:
        raise TypeError("call(): give the arguments as a dict or as keywords, not both")
    if isinstance(arguments, str):
        text = arguments
    else:
        args = dict(arguments) if arguments is not None else kwargs
        text = json.dumps(args, ensure_ascii=False)
    return ScriptedCall(name, text, id)


#: one item of a script: a piece of text, or a tool call
ScriptItem = str | ScriptedCall


class ScriptedFailure(RuntimeError):
    """The error a ScriptedSource raises on purpose (``error_after``)."""


class ScriptedSource(Source):
    """Emit a fixed text (or a text made from the prompt) at a set rate."""

    #: a script may call tools (:func:`call`); the tools given are not looked at
    supports_tools: ClassVar[bool] = True

    def __init__(
        self,
        text: str | Sequence[ScriptItem]
        | Callable[[Sequence[ChatMessage]], str | Sequence[ScriptItem]] = "",
        rate: float = 40.0,
        jitter: float = 0.0,
        seed: int = 0,
        *,
        reasoning: str | Sequence[str] | None = None,
        finish_reason: FinishReason | None = "stop",
        usage: Mapping[str, int] | None = None,
        error_after: int | None = None,
        stall_after: int | None = None,
        stall_for: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        rounds: Sequence[str | Sequence[ScriptItem]
                         | Callable[[Sequence[ChatMessage]], str | Sequence[ScriptItem]]]
        | None = None,
    ) -> None:
        if rounds is not None:
            if text != "":
                raise ValueError("ScriptedSource: give text=... or rounds=..., not both")
            if isinstance(rounds, (str, bytes)) or not isinstance(rounds, Sequence) \
                    or not rounds:
                raise TypeError("ScriptedSource(rounds=...) takes a non-empty list: one "
                                "script (a str, or a list of str pieces and call(...)) per "
                                "round")
        self.rounds = list(rounds) if rounds is not None else None
        self._call_ids = itertools.count(1)
        if rate <= 0:
            raise ValueError("rate must be positive (pieces per second)")
        if not 0.0 <= jitter <= 1.0:
            raise ValueError("jitter must be between 0 and 1")
        if reasoning is not None and not isinstance(reasoning, (str, list, tuple)):
            raise TypeError("reasoning must be a str or a sequence of str pieces, "
                            f"got {type(reasoning).__name__}")
        self.text = text
        self.reasoning = reasoning
        self.finish_reason: FinishReason | None = finish_reason
        self.usage = dict(usage or {})
        self.rate = float(rate)
        self.jitter = float(jitter)
        self.seed = seed
        self.error_after = error_after
        self.stall_after = stall_after
        self.stall_for = stall_for
        self._clock = clock

    def pieces(self, messages: Sequence[ChatMessage] = ()) -> list[str | ScriptedCall]:
        """The pieces this source emits for ``messages`` (reasoning first; tool calls
        as :class:`ScriptedCall` items)."""
        thinking = self.reasoning
        out: list[str | ScriptedCall] = []
        if thinking is not None:
            parts = split_words(thinking) if isinstance(thinking, str) else list(thinking)
            out = [Reasoning(p) for p in parts]
        script: Any
        if self.rounds is not None:
            script = self.rounds[min(tool_round(messages), len(self.rounds) - 1)]
        else:
            script = self.text
        if callable(script):
            script = script(messages)
        out += split_words(script) if isinstance(script, str) else list(script)
        return out

    @property
    def accepts(self) -> frozenset[str]:
        """Every attachment: the function (or the text's callable) sees them in the
        messages it is given (a user turn's ``attachments``)."""
        return ANY_TYPE

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> Outcome:
        rng = random.Random(self.seed)
        gap = 1.0 / self.rate
        due = self._clock()
        calls = 0
        for i, piece in enumerate(self._expanded(messages)):
            if self.error_after is not None and i >= self.error_after:
                raise ScriptedFailure(f"scripted failure after {i} pieces")
            if self.stall_after is not None and i == self.stall_after and self.stall_for > 0:
                if cancel.wait(self.stall_for):
                    raise Cancelled()
                due = self._clock()
            if i:
                due += gap * (1.0 + self.jitter * rng.uniform(-1.0, 1.0))
            ahead = due - self._clock()
            if ahead > MIN_WAIT and cancel.wait(ahead):
                raise Cancelled()
            if cancel.is_set():
                raise Cancelled()
            if isinstance(piece, ToolCallDelta):
                calls += piece.name is not None
                emit_call(emit, piece)
            else:
                emit(piece)
        return Outcome("tool_calls" if calls else self.finish_reason, self.usage)

    def _expanded(self, messages: Sequence[ChatMessage]) -> list[str | ToolCallDelta]:
        """The pieces, each scripted call made the pieces a model streams."""
        out: list[str | ToolCallDelta] = []
        index = 0
        for item in self.pieces(messages):
            if isinstance(item, ScriptedCall):
                cid = item.id or f"call_{next(self._call_ids)}"
                args = item.arguments
                out.append(ToolCallDelta(index, args[:item.chunk], id=cid, name=item.name))
                out += [ToolCallDelta(index, args[k:k + item.chunk])
                        for k in range(item.chunk, len(args), item.chunk)]
                index += 1
            elif isinstance(item, str):
                out.append(item)
            else:
                raise TypeError(f"a ScriptedSource script holds str pieces and call(...) "
                                f"items, got {type(item).__name__}")
        return out

    def __repr__(self) -> str:
        if self.rounds is not None:
            return f"ScriptedSource(rounds=<{len(self.rounds)}>, rate={self.rate:g})"
        text = self.text
        shown = f"<{len(text)} chars>" if isinstance(text, str) else (
            "<function>" if callable(text) else f"<{len(text)} pieces>")
        return f"ScriptedSource({shown}, rate={self.rate:g}, jitter={self.jitter:g})"


def tool_round(messages: Sequence[ChatMessage]) -> int:
    """How many assistant turns with tool calls follow the last user message: the round
    of the tool loop ``messages`` ask for."""
    n = 0
    for m in reversed(messages):
        if m.get("role") == "user":
            break
        if m.get("role") == "assistant" and m.get("tool_calls"):
            n += 1
    return n
