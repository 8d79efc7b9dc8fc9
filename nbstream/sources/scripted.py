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
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from ..core.attachment import ANY_TYPE
from ..core.pieces import FinishReason, Outcome, Reasoning
from .base import Cancelled, ChatMessage, Emit, Source

_WORD = re.compile(r"\s*\S+|\s+")
#: never sleep for less than this: at thousands of pieces per second, waking every
#: millisecond in each of several threads costs the kernel's main thread (the GIL)
#: more than emitting the pieces due within the next few milliseconds at once
MIN_WAIT = 0.005


def split_words(text: str) -> list[str]:
    """Split ``text`` into word-sized pieces whose concatenation is ``text``."""
    return _WORD.findall(text)


class ScriptedFailure(RuntimeError):
    """The error a ScriptedSource raises on purpose (``error_after``)."""


class ScriptedSource(Source):
    """Emit a fixed text (or a text made from the prompt) at a set rate."""

    def __init__(
        self,
        text: str | Sequence[str] | Callable[[Sequence[ChatMessage]], str],
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
    ) -> None:
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

    def pieces(self, messages: Sequence[ChatMessage] = ()) -> list[str]:
        """The pieces this source emits for ``messages`` (reasoning first)."""
        thinking = self.reasoning
        out: list[str] = []
        if thinking is not None:
            parts = split_words(thinking) if isinstance(thinking, str) else list(thinking)
            out = [Reasoning(p) for p in parts]
        text = self.text
        if callable(text):
            text = text(messages)
        out += split_words(text) if isinstance(text, str) else list(text)
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
        for i, piece in enumerate(self.pieces(messages)):
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
            emit(piece)
        return Outcome(self.finish_reason, self.usage)

    def __repr__(self) -> str:
        text = self.text
        shown = f"<{len(text)} chars>" if isinstance(text, str) else (
            "<function>" if callable(text) else f"<{len(text)} pieces>")
        return f"ScriptedSource({shown}, rate={self.rate:g}, jitter={self.jitter:g})"
