"""A source whose answers hold open until released or stopped (for stop and queue tests)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from nbstream.sources import IteratorSource
from nbstream.sources.base import ChatMessage


class Held:
    """Each answer writes ``first`` at once, then holds until :attr:`release` is set
    (then writes ``rest``) or the reply is stopped. :attr:`asked` records the prompt
    of every answer that started, so a test sees which queued replies never ran."""

    def __init__(self, first: str = "first ", rest: str = "end") -> None:
        self.first, self.rest = first, rest
        self.release = threading.Event()
        self.asked: list[str] = []
        self.seen: list[list[ChatMessage]] = []
        self.source = IteratorSource(self.answer, label="held")

    def answer(self, messages: Sequence[ChatMessage]) -> Iterator[str]:
        self.asked.append(messages[-1]["content"])
        self.seen.append(list(messages))
        yield self.first
        # holding the answer open is the scenario; an empty piece lets a stop through
        while not self.release.wait(0.01):
            yield ""
        yield self.rest
