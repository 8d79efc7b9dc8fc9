"""Small sources shared by the widget tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from nbstream.sources import ScriptedSource
from nbstream.sources.base import Cancelled, ChatMessage, Emit, Source


class SlowLoading(ScriptedSource):
    """A ScriptedSource whose prepare() takes ``load_s`` seconds, like loading a model."""

    def __init__(self, *args: Any, load_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.load_s = load_s
        self.loaded = False

    @property
    def prepared(self) -> bool:
        return self.loaded

    def prepare(self) -> None:
        time.sleep(self.load_s)  # the scenario: a model that takes time to load
        self.loaded = True


class Held(Source):
    """A source the test walks through its stages: it stays loading until
    ``load`` is set; it emits its first piece, waits for ``second``, emits the
    second, waits for ``rest``, then emits the rest. Each wait gives up after
    a minute (a test that forgot to open it)."""

    def __init__(self, pieces: Sequence[str]) -> None:
        self.pieces = list(pieces)
        self.load = threading.Event()
        self.second = threading.Event()
        self.rest = threading.Event()
        self.loaded = False

    @property
    def prepared(self) -> bool:
        return self.loaded

    def prepare(self) -> None:
        self.load.wait(60)
        self.loaded = True

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> None:
        for i, piece in enumerate(self.pieces):
            if i == 1:
                self.second.wait(60)
            elif i == 2:
                self.rest.wait(60)
            if cancel.is_set():
                raise Cancelled()
            emit(piece)
