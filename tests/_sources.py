"""Small sources shared by the widget tests."""

from __future__ import annotations

import time
from typing import Any

from nbstream.sources import ScriptedSource


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
        time.sleep(self.load_s)
        self.loaded = True
