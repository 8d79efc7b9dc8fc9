"""StreamView and stream(): one live stream of text under a cell.

Most streaming in notebooks is not a chat: one completion appearing live
under a cell. :class:`StreamView` shows one reply from any source, or from
any iterable / async iterable of strings, with the same pipeline as the chat
(coalescing, bounded rate, per-frame rendering, Markdown, stop, metrics).
It is its own handle: ``.text``, ``.status``, ``.wait()``, ``.stop()``,
``.stats``.

:func:`stream` builds one, displays it and returns it. Returning a widget
from the last line of a cell would display it a second time, so a StreamView
shown by :func:`stream` skips the display of that same cell's result.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Sequence
from typing import Any

from ..checks import check_messages, check_prompt, check_system_prompt, check_title
from ..core.trace import Trace
from ..options import StreamOptions, Unpack, parse_options, with_options
from ..sources.base import ChatMessage, Source, check_source
from ..sources.iterator import IteratorSource, given_name
from .attachments import attached_for
from .reply import Reply
from .toolturn import DEFAULT_MAX_TOOL_ROUNDS
from .widget import StreamingWidget

SourceLike = Source | Iterable[str] | AsyncIterable[str]


def as_source(obj: Any, where: str = "stream") -> Source:
    """A :class:`Source` for a source, an iterable or an async iterable of str."""
    if isinstance(obj, Source):
        return obj
    if isinstance(obj, (str, bytes)):
        raise TypeError(f"{where}(source=...) got a plain {type(obj).__name__}; to type out a "
                        "fixed text use ScriptedSource(text), or pass an iterable of pieces")
    if hasattr(obj, "__aiter__") or hasattr(obj, "__iter__"):
        # shown: the generator function's name (stream(countdown(10)): "countdown"),
        # nothing for a generator expression or a list; errors and the repr name
        # the kind of iterable when nobody named it
        label = given_name(obj)
        # the iterable is handed over once and not kept: a list of pieces is not held
        # for as long as the widget lives
        held: list[Any] = [obj]

        def once(_messages: Sequence[ChatMessage]) -> Any:
            if not held:
                raise RuntimeError("this iterable was already consumed; pass a Source "
                                   "(e.g. IteratorSource(fn)) to stream more than once")
            return held.pop()

        once.__name__ = once.__qualname__ = type(obj).__name__
        return IteratorSource(once, label=label)
    return check_source(obj, f"{where}(source=...)",
                        also=", an iterable or an async iterable of str")


def _execution_count() -> int | None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return None
    ip = get_ipython()
    return None if ip is None else int(ip.execution_count)


class StreamView(StreamingWidget):
    """One live stream of text (see module docstring)."""

    @with_options
    def __init__(
        self,
        source: SourceLike,
        prompt: str | None = None,
        *,
        messages: Sequence[ChatMessage] | None = None,
        system_prompt: str | None = None,
        title: str = "",
        show_prompt: bool = True,
        attachments: Sequence[Any] | None = None,
        tools: Sequence[Any] | None = None,
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        **options: Unpack[StreamOptions],
    ) -> None:
        """Stream ``source``'s answer to ``prompt`` (after ``messages``, the
        conversation so far, and ``system_prompt``); ``show_prompt`` shows the
        prompt above the answer. ``attachments`` go with the prompt (as in
        :meth:`ChatWidget.send <nbstream.ChatWidget.send>`). ``tools``: functions the
        model may call (see ``ChatWidget``), their calls and results shown in the answer."""
        opts = parse_options(StreamView.__init__, options)
        check_system_prompt(system_prompt, "StreamView")
        check_title(title, "StreamView")
        history = check_messages(messages, "StreamView")
        if prompt is not None:
            check_prompt(prompt, "StreamView")
        src = as_source(source, "StreamView")
        if attachments and prompt is None:
            raise ValueError("StreamView(attachments=...) go with a prompt; give prompt=...")
        attached = attached_for(attachments, [src], opts.attachment_limits, "StreamView")
        super().__init__(title=title, options=opts, source_label=src.label, mode="stream")
        self.source = src
        self.max_tool_rounds = max_tool_rounds
        self._set_tools(tools, "StreamView")
        convo: list[ChatMessage] = history
        if system_prompt:
            convo.insert(0, {"role": "system", "content": system_prompt})
        if prompt is not None:
            asked: ChatMessage = {"role": "user", "content": prompt}
            if attached:
                asked["attachments"] = tuple(a.attachment for a in attached)
            convo.append(asked)
        self._shown_at: int | None = None
        with self._lock:
            if prompt is not None and show_prompt:
                self._new_turn(prompt, attached=attached)
            self.reply: Reply = self._new_reply(src, prompt or "", convo)
        self._launch(self.reply)

    # the handle
    @property
    def text(self) -> str:
        """The text so far."""
        return self.reply.text

    @property
    def status(self) -> str:
        """queued, loading, running, done, stopped, error or timeout."""
        return self.reply.status

    @property
    def stats(self) -> dict[str, Any]:
        """Figures of the stream (see ``Reply.stats``)."""
        return self.reply.stats

    def wait(self, timeout: float | None = None) -> str:
        """Block until the stream ends; return its text (see ``Reply.wait``)."""
        return self.reply.wait(timeout)

    def trace(self) -> Trace:
        """The produced / sent / rendered timeline."""
        return self.reply.trace()

    def plot(self, ax: Any = None) -> Any:
        """Draw the timeline with matplotlib."""
        return self.reply.plot(ax)

    def __repr__(self) -> str:
        return f"StreamView(source={self.source!r})"

    def _ipython_display_(self) -> None:
        if self._shown_at is not None and self._shown_at == _execution_count():
            return  # stream() already showed it in this cell
        _show(self)


def _show(view: StreamView) -> None:
    from IPython.display import display

    bundle = view._repr_mimebundle_()
    if bundle is not None:
        data, metadata = bundle
        display(data, metadata=metadata, raw=True)  # type: ignore[no-untyped-call]


@with_options
def stream(
    source: SourceLike,
    prompt: str | None = None,
    *,
    messages: Sequence[ChatMessage] | None = None,
    system_prompt: str | None = None,
    title: str = "",
    show_prompt: bool = True,
    attachments: Sequence[Any] | None = None,
    tools: Sequence[Any] | None = None,
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
    **options: Unpack[StreamOptions],
) -> StreamView:
    """Show one live stream under the cell and return its handle.

    ``source`` is a :class:`~nbstream.sources.Source` (given ``prompt`` as the
    user's message), or any iterable or async iterable of str. The other
    arguments are :class:`StreamView`'s. Headless (nbclient, nbval) it streams
    the same way; nothing waits for a browser.
    """
    parse_options(stream, options)  # named after this call in errors
    view = StreamView(source, prompt, messages=messages, system_prompt=system_prompt,
                      title=title, show_prompt=show_prompt, attachments=attachments,
                      tools=tools, max_tool_rounds=max_tool_rounds, **options)
    if _execution_count() is not None:  # in IPython: show it under the cell
        _show(view)
        view._shown_at = _execution_count()
    return view
