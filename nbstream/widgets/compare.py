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

from ..checks import check_prompt, check_system_prompt, check_title, short
from ..core.attachment import Attachment
from ..options import StreamOptions, Unpack, parse_options, with_options
from ..sources.base import Source, check_source
from .protocol import ViewMsg
from .reply import Reply
from .toolturn import DEFAULT_MAX_TOOL_ROUNDS
from .widget import StreamingWidget
from .wire import BadViewMessage


class Compare(StreamingWidget):
    """Side-by-side answers of several sources to the same prompts.

    Stop all (the button, Escape, :meth:`stop`, a kernel interrupt during
    :meth:`wait`) stops every pane's running and queued replies; a pane's
    own Stop (:meth:`stop_pane`) only that pane's.
    """

    placeholder = traitlets.Unicode("Ask all of them… (Enter sends)").tag(sync=True)
    #: one entry per pane: {"label": str}
    panes = traitlets.List(traitlets.Dict()).tag(sync=True)

    @with_options
    def __init__(
        self,
        sources: Sequence[Source],
        prompt: str | None = None,
        *,
        labels: Sequence[str] | None = None,
        system_prompt: str | None = None,
        title: str = "",
        tools: Sequence[Any] | None = None,
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        **options: Unpack[StreamOptions],
    ) -> None:
        """Compare ``sources`` (at least two); ask them ``prompt`` at once if given.

        ``labels`` name the panes (default: each source's label; a pane whose
        source shows no label is called "Pane 2" in the view). ``tools``: the
        functions every model may call (see ``ChatWidget``; each pane runs its own
        calls, each waiting for approval unless its tool says ``approve=True``).
        """
        opts = parse_options(Compare.__init__, options)
        check_system_prompt(system_prompt, "Compare")
        check_title(title, "Compare")
        if isinstance(sources, (str, bytes)) or not isinstance(sources, Sequence):
            raise TypeError(f"Compare(sources=...) must be a list of nbstream Sources, got "
                            f"{type(sources).__name__} {short(sources)}")
        sources = list(sources)
        if len(sources) < 2:
            raise ValueError("Compare(sources=...) needs at least two sources")
        for i, s in enumerate(sources):
            check_source(s, f"Compare(sources=...): item {i}")
        if prompt is not None:
            check_prompt(prompt, "Compare")
        if labels is not None and (isinstance(labels, (str, bytes))
                                   or not all(isinstance(n, str) for n in labels)):
            raise TypeError("Compare(labels=...) must be a list of str, one per source")
        names = list(labels) if labels is not None else [s.label for s in sources]
        if len(names) != len(sources):
            raise ValueError(f"Compare(labels=...) must name the {len(sources)} sources one "
                             f"to one, got {len(names)} labels")
        # the same label twice is confusing side by side: number them
        seen: dict[str, int] = {}
        original = list(names)
        for i, n in enumerate(original):
            if n and original.count(n) > 1:
                seen[n] = seen.get(n, 0) + 1
                names[i] = f"{n} #{seen[n]}"
        # the header names the sources only when each has a name to show
        shown = " vs ".join(names) if all(names) else ""
        super().__init__(title=title, options=opts, source_label=shown,
                         mode="compare", panes=[{"label": n} for n in names])
        self.sources = sources
        self.labels = names
        self.system_prompt = system_prompt
        self.max_tool_rounds = max_tool_rounds
        self._set_tools(tools, "Compare")
        self._update_attachment_policy()
        if prompt is not None:
            self.send(prompt)

    def _sources(self) -> list[Source]:
        return list(self.sources)

    def send(self, text: str, attachments: Sequence[Any] | None = None) -> list[Reply]:
        """Ask every source ``text``; returns one reply per pane, in pane order.

        ``attachments`` as in :meth:`ChatWidget.send <nbstream.ChatWidget.send>`:
        every source must take each of them."""
        check_prompt(text)
        attached = self._attached(attachments, self.sources, "send")
        with self._lock:
            self._check_chat_bytes(tuple(a.attachment for a in attached), "send")
            self._new_turn(text, attached=attached)
            round_: list[Reply] = []
            for i, src in enumerate(self.sources):
                round_.append(self._new_reply(src, text, pane=i))
        for r in round_:
            self._launch(r)
        return round_

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
        """Stop the running and queued replies of pane ``pane``; returns how many."""
        if isinstance(pane, bool) or not isinstance(pane, int):
            raise TypeError(f"stop_pane(pane) takes an int, got {type(pane).__name__}")
        if not 0 <= pane < len(self.sources):
            raise ValueError(f"stop_pane(pane): there are panes 0 to {len(self.sources) - 1}, "
                             f"got {pane}")
        return sum(1 for r in self.replies_of(pane) if r.cancel())

    def __repr__(self) -> str:
        return f"Compare(sources=[{', '.join(repr(s) for s in self.sources)}])"

    def _ask(self, text: str, attachments: tuple[Attachment, ...] = ()) -> None:
        self.send(text, list(attachments))

    def _attachment_accepts(self) -> list[frozenset[str]]:
        return [s.accepts for s in self.sources]

    def _on_command(self, msg: ViewMsg) -> bool:
        if msg["kind"] == "stop" and "pane" in msg:
            if msg["pane"] >= len(self.sources):
                raise BadViewMessage("stop for an unknown pane")
            self.stop_pane(msg["pane"])
            return True
        return super()._on_command(msg)
