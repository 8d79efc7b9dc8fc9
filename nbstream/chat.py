"""ChatWidget: a multi-turn chat with an input box, on any source.

Only the chat's own rules live here (what a send starts, what the source
sees, regenerate); the pipeline is :class:`~nbstream.widget.StreamingWidget`.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import traitlets

from .checks import check_prompt, check_system_prompt, check_title, short
from .generation import GenerationOptions, check_generation
from .options import StreamOptions, Unpack, parse_options, with_options
from .reply import Reply
from .sources.base import Source
from .widget import MAX_VIEW_TEXT, BadViewMessage, StreamingWidget, UserTurn

log = logging.getLogger("nbstream")


def resolve_source(source: Source | None, where: str = "ChatWidget") -> Source:
    """``source``, or the embedded default model when None; a clear error otherwise."""
    if source is None:  # the embedded default model, loaded on the first question
        from .sources.transformers import TransformersSource

        return TransformersSource()
    if not isinstance(source, Source):
        hint = ""
        if callable(source):
            hint = "; wrap a function in IteratorSource"
        elif hasattr(source, "__iter__") or hasattr(source, "__aiter__"):
            hint = "; to show an iterable of str use nbstream.stream()"
        raise TypeError(f"{where}(source=...) must be a nbstream Source (or None for the "
                        f"embedded model), got {type(source).__name__} {short(source)}{hint}")
    return source


class ChatWidget(StreamingWidget):
    """A chat that streams a source's answers into the notebook.

    ``ChatWidget()`` uses the embedded default model (SmolLM2-135M-Instruct,
    loaded on the first question). ``ChatWidget(source)`` uses any
    :class:`~nbstream.sources.Source`. Generation runs on a worker thread;
    the cell returns at once and the kernel stays free.

    Stop (the button, Escape, :meth:`stop`, a kernel interrupt during
    ``reply.wait()``) stops the running reply and the queued ones. The
    source sees the conversation with turns alternating user / assistant: a
    prompt whose answer has no text (stopped before its first piece, or
    failed) is left out of what the model sees, with its empty answer.
    The options (``interval``, the time limits, ``max_pending``) are listed
    in ``help(ChatWidget.__init__)``.
    """

    placeholder = traitlets.Unicode("Ask something… (Enter sends, Shift+Enter: new line)").tag(
        sync=True)

    @with_options
    def __init__(
        self,
        source: Source | None = None,
        *,
        title: str = "",
        system_prompt: str | None = None,
        generation: GenerationOptions | None = None,
        **options: Unpack[StreamOptions],
    ) -> None:
        """A chat on ``source`` (None: the embedded default model).

        ``title`` is shown in the header; ``system_prompt`` is sent first to
        the model with every question (shown at the top of the chat, where it
        can be edited; see :attr:`system_prompt`). ``generation``: options of
        each reply, such as ``{"temperature": 0.2, "max_new_tokens": 200}``
        (see :attr:`generation`).
        """
        opts = parse_options(ChatWidget.__init__, options)
        check_system_prompt(system_prompt, "ChatWidget")
        check_title(title, "ChatWidget")
        source = resolve_source(source)
        super().__init__(title=title, options=opts, source_label=source.label, mode="chat")
        self.source = source
        self.system_prompt = system_prompt
        self.generation = generation

    # ------------------------------------------------------------- public API
    # ``system_prompt`` (a synced trait of StreamingWidget): setting it, from
    # Python or in the view, applies to the next question; a reply already
    # asked keeps the system prompt it was asked with.

    @property
    def generation(self) -> GenerationOptions:
        """The generation options each new reply is asked with (a copy):
        ``temperature`` (0: greedy), ``top_p``, ``max_new_tokens`` (also spelled
        ``max_tokens``) and ``stop``, for sources that take them
        (``TransformersSource``, ``OpenAISource``), over the source's own settings.

        Set it to a dict (or None: the source's own settings); the names and
        values are checked at once (a clear error names the key). It applies to
        the next question; each reply keeps its own (``reply.generation``), and
        its status line shows the options in force on hover (``reply.options``).
        """
        return cast(GenerationOptions, dict(self._generation))

    @generation.setter
    def generation(self, value: GenerationOptions | None) -> None:
        self._generation = check_generation(
            value, "ChatWidget.generation", label=self.source.label,
            supported=self.source.generation_options)

    def send(self, text: str) -> Reply:
        """Ask ``text``; returns a :class:`Reply` at once (generation runs on a worker)."""
        check_prompt(text)
        with self._lock:
            self._new_turn(text)
            reply = self._new_reply(self.source, text)
        self._launch(reply)
        return reply

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation: ``[{"role", "content", "id", "status"}, ...]`` (a copy)."""
        with self._lock:
            entries = list(self._history)
        out: list[dict[str, Any]] = []
        for e in entries:
            if isinstance(e, UserTurn):
                out.append({"role": "user", "content": e.text, "id": e.id, "status": "done"})
            else:
                out.append({"role": "assistant", "content": e.text, "id": e.id,
                            "status": e.status})
        return out

    def regenerate(self) -> Reply | None:
        """Stop and drop the last answer, then ask its prompt again."""
        with self._lock:
            idx = next((i for i in range(len(self._history) - 1, -1, -1)
                        if isinstance(self._history[i], Reply)), None)
            if idx is None:
                return None
            last = self._history[idx]
            assert isinstance(last, Reply)
            last.cancel()
            del self._history[idx]
            if idx > 0 and isinstance(self._history[idx - 1], UserTurn):
                del self._history[idx - 1]
        return self.send(last.prompt)

    #: what :meth:`continue_` asks, as a user turn after the cut answer
    CONTINUE_PROMPT = "Continue exactly where your last answer was cut off."

    def continue_(self, id: str | None = None) -> Reply:
        """Ask the model to go on from the last reply, cut at the token limit
        (``finish_reason == "length"``; the view's Continue button calls this).

        What the model is sent: the whole history, the cut reply's partial answer
        included (as the assistant's turn), then a user turn :attr:`CONTINUE_PROMPT`.
        This works with every source (no server needs to support continuing a
        message); the new reply is a new message, shown after a "Continue" turn.
        ``id`` names the reply to continue; it must be the last one.
        """
        last = self.last
        if last is None or (id is not None and id != last.id):
            raise ValueError(f"continue_(id={id!r}): only the last reply can be continued"
                             if last is not None else "continue_(): there is no reply yet")
        if not last.done:
            raise ValueError(f"continue_(): reply {last.id} is still {last.status}")
        return self.send(self.CONTINUE_PROMPT)

    def __repr__(self) -> str:
        with self._lock:
            n = len(self._history)
        return f"{type(self).__name__}(source={self.source!r}, messages={n})"

    # -------------------------------------------------------------- internals
    def _ask(self, text: str) -> None:
        self.send(text)

    def _on_command(self, kind: str, content: dict[str, Any]) -> bool:
        if kind == "regenerate":
            self.regenerate()
            return True
        if kind == "system_prompt":  # an edit in the view
            text = content.get("text")
            if not isinstance(text, str):
                raise BadViewMessage("system_prompt without a str text")
            if len(text) > MAX_VIEW_TEXT:
                raise BadViewMessage(f"system_prompt of more than {MAX_VIEW_TEXT} characters")
            self.system_prompt = text if text.strip() else None
            return True
        if kind == "continue":
            rid = content.get("id")
            try:
                self.continue_(rid if isinstance(rid, str) else None)
            except ValueError as exc:  # a stale button: nothing to continue
                log.debug("nbstream: %s", exc)
            return True
        return super()._on_command(kind, content)
