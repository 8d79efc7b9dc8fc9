"""Any iterable or async iterable of strings as a source.

``IteratorSource(fn)`` calls ``fn(messages)`` for each reply. ``fn`` may
return any iterable of ``str`` (a generator, a list, a streaming client's
chunks) or an async iterable (an ``async def`` generator): the latter runs
on a private event loop on the worker thread, so it never blocks the
kernel's own event loop or its main thread. A stop is noticed between two
pieces; the iterator is then closed (``close()`` / ``aclose()``), so that a
generator's ``finally`` blocks run and an HTTP stream is released.

Parts and endings: a plain ``str`` is answer text; yield
``Reasoning("…")`` (``nbstream.sources.Reasoning``) for the model's thinking. To say
how the generation ended, yield an :class:`~nbstream.core.pieces.Outcome` as the
last item (``yield Outcome("length", usage={...})``), or ``return`` one from
a (sync) generator; without one it ended with ``"stop"``.

Tool calls: yield :func:`~nbstream.sources.call` items (``yield call("get_weather",
city="Paris")``) or :class:`~nbstream.core.pieces.ToolCallDelta` pieces as a model
streams them; a reply that yielded calls ends with ``finish_reason="tool_calls"``
(unless an Outcome says otherwise). A function of two parameters,
``fn(messages, tools)``, also receives the tools the chat offers (OpenAI's
function-tool JSON). Text with inline
``<think>…</think>`` is split into reasoning and answer with
``think_tags=True`` (``"opened"``: the text starts inside a block the
template opened); by default (``think_tags=False``) the text is left as it
is.

The chat's header shows the source's :attr:`~IteratorSource.label`: the name a
person gave the function (``def answer(messages): ...`` shows "answer"), or
nothing for a lambda, a ``functools.partial`` of one, or a generator
expression; ``label=`` names it outright.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
import reprlib
import sys
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Hashable, Iterable, Sequence
from typing import Any, ClassVar, cast

from ..core.attachment import ANY_TYPE
from ..core.pieces import Outcome, ToolCallDelta, ToolSchema
from ..generation import GenerationOptions
from .base import Cancelled, ChatMessage, Emit, Source, source_name
from .scripted import ScriptedCall
from .think import ThinkSplitter, ThinkTags, check_think_options, splitting
from .toolcalls import emit_call

#: what the function may return: pieces (``str`` or ``Reasoning``), and
#: optionally an ``Outcome`` as the last item
PieceSource = Iterable[str | Outcome] | AsyncIterable[str | Outcome]


class IteratorSource(Source):
    """Stream the strings produced by ``fn(messages)`` (sync or async)."""

    #: the function may yield tool calls (and take the tools as a second argument)
    supports_tools: ClassVar[bool] = True

    def __init__(self, fn: Callable[..., PieceSource], *,
                 label: str | None = None, think_tags: ThinkTags = False) -> None:
        """``label`` is shown in the view (default: :func:`given_name` of ``fn``;
        ``""``: nothing)."""
        _check_fn(fn)
        if label is not None and not isinstance(label, str):
            raise TypeError(f"IteratorSource(label=...) must be a str, got "
                            f"{type(label).__name__} {reprlib.repr(label)}")
        self.fn = fn
        self._takes_tools = _takes_two(fn)
        self.think_tags, _ = check_think_options(think_tags, where="IteratorSource")
        self._label: str = given_name(fn) if label is None else label
        # what errors and the repr call it: the label, else the function's own name
        self._name: str = label or str(getattr(fn, "__name__", "iterator"))

    @property
    def label(self) -> str:
        """The name shown in the view: ``label=``, or the name a person gave the
        function; ``""`` (nothing shown) for a lambda or a generator expression."""
        return self._label

    def lane_key(self) -> Hashable:
        return ("iterator", id(self))

    @property
    def accepts(self) -> frozenset[str]:
        """Every attachment: the function (or the text's callable) sees them in the
        messages it is given (a user turn's ``attachments``)."""
        return ANY_TYPE

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> Outcome | None:
        return self.generate_with(messages, emit, cancel, GenerationOptions())

    def generate_with(self, messages: Sequence[ChatMessage], emit: Emit,
                      cancel: threading.Event, options: GenerationOptions,
                      tools: Sequence[ToolSchema] = ()) -> Outcome | None:
        if options:
            raise ValueError(f"{source_name(self)} takes no generation options, "
                             f"got {sorted(options)}")
        produced = _check_produced(
            self.fn(list(messages), list(tools)) if self._takes_tools else self.fn(list(messages)),
            self._name)
        finish = None
        if self.think_tags:
            emit, finish = splitting(emit, ThinkSplitter(start_inside=self.think_tags == "opened"))
        ending = _Ending(self._name)
        if hasattr(produced, "__aiter__"):
            outcome = _drain_async(produced, emit, cancel, ending)  # type: ignore[arg-type]
        else:
            outcome = _drain_sync(produced, emit, cancel, ending)
        if finish is not None and not cancel.is_set():
            finish()
        if outcome is None and ending.calls:
            return Outcome("tool_calls")
        return outcome

    def __repr__(self) -> str:
        return f"IteratorSource({self._name})"


def given_name(obj: object) -> str:
    """The name a person gave ``obj``, or ``""`` when nobody named it.

    A function, a method or a generator made by one: its ``__name__``; a
    ``functools.partial``: its function's; an instance of a class of one's own
    (a callable model object, an iterable class): that class's name. Nothing for
    a lambda, a generator expression or a comprehension (``<lambda>``,
    ``<genexpr>``), nor for a list or another object of Python's own types.
    """
    while isinstance(obj, functools.partial):
        obj = obj.func
    name = getattr(obj, "__name__", None)
    if not isinstance(name, str):
        cls = type(obj)
        stdlib = cls.__module__.partition(".")[0] in sys.stdlib_module_names
        name = "" if stdlib else cls.__name__
    return "" if name.startswith("<") else name


# ----------------------------------------------------------------- validation
def _check_fn(fn: object) -> None:
    """At construction, in the caller's cell: ``fn`` is a function of one argument."""
    if not callable(fn):
        hint = ("; use nbstream.stream(iterable) for a ready-made iterable"
                if hasattr(fn, "__iter__") or hasattr(fn, "__aiter__") else "")
        raise TypeError(f"IteratorSource(fn): fn must be a function messages -> iterable of "
                        f"str, got {type(fn).__name__} {reprlib.repr(fn)}{hint}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have none: trust them
        return
    try:
        sig.bind([])
    except TypeError:
        if _takes_two(fn):
            return
        raise TypeError(f"IteratorSource(fn): fn must take one argument (the conversation, "
                        f"a list of {{'role', 'content'}} dicts), or two (the conversation and "
                        f"the tools); {_name(fn)}{sig} cannot be called with one") from None


def _check_produced(produced: object, label: str) -> PieceSource:
    """What ``fn`` returned must be an iterable (not a str) or an async iterable."""
    if isinstance(produced, (str, bytes)):
        raise TypeError(f"IteratorSource function {label!r} returned a "
                        f"{type(produced).__name__}, expected an iterable of str pieces "
                        "(yield the pieces, or wrap the text in a list)")
    if not (hasattr(produced, "__aiter__") or hasattr(produced, "__iter__")):
        raise TypeError(f"IteratorSource function {label!r} returned "
                        f"{type(produced).__name__} {reprlib.repr(produced)}, expected an "
                        "iterable or async iterable of str (a generator, a list, ...)")
    return cast(PieceSource, produced)


def _takes_two(fn: object) -> bool:
    """Whether ``fn`` takes (messages, tools)."""
    try:
        sig = inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    try:
        sig.bind([], [])
    except TypeError:
        return False
    return True


def _name(fn: object) -> str:
    return str(getattr(fn, "__qualname__", getattr(fn, "__name__", type(fn).__name__)))



class _Ending:
    """Notes an Outcome yielded (or returned) by the function; nothing may follow it."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.outcome: Outcome | None = None
        self._count = itertools.count(1)
        #: tool calls yielded (call(...) items get the indexes 0, 1, ... and ids call_<n>)
        self.calls = 0
        self._ids = itertools.count(1)

    def take(self, item: Any) -> list[str | ToolCallDelta] | None:
        """The pieces ``item`` makes, or None if it was the Outcome."""
        if self.outcome is not None:
            raise TypeError("the function yielded something after an Outcome; "
                            "an Outcome must be the last item")
        if isinstance(item, Outcome):
            self.outcome = item
            return None
        if isinstance(item, ToolCallDelta):
            if item.name is not None:
                self.calls += 1
            return [item]
        if isinstance(item, ScriptedCall):
            index = self.calls
            self.calls += 1
            cid = item.id or f"call_{next(self._ids)}"
            return [ToolCallDelta(index, item.arguments, id=cid, name=item.name)]
        n = next(self._count)
        if not isinstance(item, str):
            raise TypeError(f"IteratorSource function {self.label!r} yielded piece #{n} of type "
                            f"{type(item).__name__} ({reprlib.repr(item)}); every piece "
                            "must be a str (or Reasoning), a tool call, or an Outcome last")
        return [item]

    def returned(self, value: Any) -> None:
        """A generator's return value: an Outcome, or None."""
        if isinstance(value, Outcome) and self.outcome is None:
            self.outcome = value
        elif value is not None and not isinstance(value, Outcome):
            raise TypeError(f"the generator returned {type(value).__name__}; "
                            "return an Outcome or nothing")


def _emit(emit: Emit, piece: str | ToolCallDelta) -> None:
    if isinstance(piece, ToolCallDelta):
        emit_call(emit, piece)
    else:
        emit(piece)


def _drain_sync(produced: Iterable[Any], emit: Emit,
                cancel: threading.Event, ending: _Ending) -> Outcome | None:
    it = iter(produced)
    try:
        while True:
            try:
                item = next(it)
            except StopIteration as stop:
                ending.returned(stop.value)
                return ending.outcome
            if cancel.is_set():
                raise Cancelled()
            for piece in ending.take(item) or ():
                _emit(emit, piece)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


def _drain_async(produced: AsyncIterable[Any], emit: Emit,
                 cancel: threading.Event, ending: _Ending) -> Outcome | None:
    async def pump() -> None:
        it: AsyncIterator[Any] = produced.__aiter__()
        try:
            while True:
                if cancel.is_set():
                    raise Cancelled()
                nxt = asyncio.ensure_future(it.__anext__())
                # wake up on a stop even while the iterator waits (e.g. on a socket)
                while not nxt.done():
                    await asyncio.wait({nxt}, timeout=0.05)
                    if cancel.is_set() and not nxt.done():
                        nxt.cancel()
                        raise Cancelled()
                try:
                    item = nxt.result()
                except StopAsyncIteration:
                    return
                for piece in ending.take(item) or ():
                    _emit(emit, piece)
        finally:
            aclose = getattr(it, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(RuntimeError):  # already running / closed
                    await aclose()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(pump())
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
    return ending.outcome


__all__ = ["IteratorSource", "PieceSource"]
