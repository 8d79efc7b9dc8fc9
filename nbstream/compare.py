"""Compare: several sources answer the same prompt side by side.

Each source gets a pane (``reply.pane``) with its own live status and rate.
A prompt starts one reply per pane; each pane keeps its own conversation
(its own earlier answers), so follow-up questions work per model. Replies go
through the model lanes like any other: two panes on one local model take
turns (the second shows "queued"), a local model and a server stream at once.
The user can stop one pane or all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import traitlets

from .pump import DEFAULT_INTERVAL
from .reply import Reply
from .sources.base import Source
from .widget import StreamingWidget


class Compare(StreamingWidget):
    """Side-by-side answers of several sources to the same prompts."""

    placeholder = traitlets.Unicode("Ask all of them… (Enter sends)").tag(sync=True)
    #: one entry per pane: {"label": str}
    panes = traitlets.List(traitlets.Dict()).tag(sync=True)

    def __init__(
        self,
        sources: Sequence[Source],
        prompt: str | None = None,
        *,
        labels: Sequence[str] | None = None,
        system_prompt: str | None = None,
        title: str = "",
        interval: float = DEFAULT_INTERVAL,
        first_token_timeout: float | None = None,
        stall_timeout: float | None = None,
        total_timeout: float | None = None,
        max_pending: int = 1 << 20,
        **kwargs: Any,
    ) -> None:
        sources = list(sources)
        if len(sources) < 2:
            raise ValueError("Compare needs at least two sources")
        for s in sources:
            if not isinstance(s, Source):
                raise TypeError(f"expected nbstream Sources, got {type(s).__name__}")
        names = list(labels) if labels is not None else [s.label for s in sources]
        if len(names) != len(sources):
            raise ValueError("labels must match sources one to one")
        # the same label twice is confusing side by side: number them
        seen: dict[str, int] = {}
        original = list(names)
        for i, n in enumerate(original):
            if original.count(n) > 1:
                seen[n] = seen.get(n, 0) + 1
                names[i] = f"{n} #{seen[n]}"
        super().__init__(title=title, interval=interval, first_token_timeout=first_token_timeout,
                         stall_timeout=stall_timeout, total_timeout=total_timeout,
                         max_pending=max_pending, source_label=" vs ".join(names),
                         mode="compare", panes=[{"label": n} for n in names], **kwargs)
        self.sources = sources
        self.labels = names
        self.system_prompt = system_prompt
        if prompt is not None:
            self.send(prompt)

    def send(self, text: str) -> list[Reply]:
        """Ask every source ``text``; returns one reply per pane, in pane order."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("send() needs a non-empty prompt")
        with self._lock:
            self._new_turn(text)
            round_: list[Reply] = []
            for i, src in enumerate(self.sources):
                r = self._new_reply(src, text, (), pane=i)
                r._messages = self._conversation_fn(r)
                round_.append(r)
        for r in round_:
            self._launch(r)
        return round_

    def _conversation_fn(self, reply: Reply) -> Any:
        return lambda: self._conversation_before(reply)

    def replies_of(self, pane: int) -> list[Reply]:
        """The replies shown in pane ``pane``, oldest first."""
        return [r for r in self.replies if r.pane == pane]

    @property
    def last_round(self) -> list[Reply]:
        """The replies to the latest prompt, in pane order."""
        replies = self.replies
        return replies[-len(self.sources):] if replies else []

    def wait(self, timeout: float | None = None) -> list[str]:
        """Wait for the latest round; return its texts in pane order."""
        return [r.wait(timeout) for r in self.last_round]

    def stop_pane(self, pane: int) -> int:
        """Stop the live replies of one pane."""
        return sum(1 for r in self.replies_of(pane) if r.cancel())

    def __repr__(self) -> str:
        return f"Compare(sources=[{', '.join(repr(s) for s in self.sources)}])"

    def _ask(self, text: str) -> None:
        self.send(text)

    def _on_command(self, kind: str, content: dict[str, Any]) -> bool:
        if kind == "stop" and isinstance(content.get("pane"), int):
            self.stop_pane(content["pane"])
            return True
        return super()._on_command(kind, content)
