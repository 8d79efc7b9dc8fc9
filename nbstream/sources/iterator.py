"""Any iterable or async iterable of strings as a source.

``IteratorSource(fn)`` calls ``fn(messages)`` for each reply. ``fn`` may
return any iterable of ``str`` (a generator, a list, a streaming client's
chunks) or an async iterable (an ``async def`` generator): the latter runs
on a private event loop on the worker thread, so it never blocks the
kernel's own event loop or its main thread. A stop is noticed between two
pieces; the iterator is then closed (``close()`` / ``aclose()``), so that a
generator's ``finally`` blocks run and an HTTP stream is released.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import reprlib
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Hashable, Iterable, Sequence
from typing import Any, cast

from .base import Cancelled, ChatMessage, Emit, Source

PieceSource = Iterable[str] | AsyncIterable[str]


class IteratorSource(Source):
    """Stream the strings produced by ``fn(messages)`` (sync or async)."""

    def __init__(self, fn: Callable[[Sequence[ChatMessage]], PieceSource], *,
                 label: str | None = None) -> None:
        _check_fn(fn)
        self.fn = fn
        self._label: str = label or str(getattr(fn, "__name__", "iterator"))

    @property
    def label(self) -> str:
        return self._label

    def lane_key(self) -> Hashable:
        return ("iterator", id(self))

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> None:
        produced = _check_produced(self.fn(list(messages)), self._label)
        emit_checked = _checked_emit(emit, self._label)
        if hasattr(produced, "__aiter__"):
            _drain_async(produced, emit_checked, cancel)  # type: ignore[arg-type]
        else:
            _drain_sync(produced, emit_checked, cancel)

    def __repr__(self) -> str:
        return f"IteratorSource({self._label})"


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
        raise TypeError(f"IteratorSource(fn): fn must take one argument (the conversation, "
                        f"a list of {{'role', 'content'}} dicts); {_name(fn)}{sig} "
                        "cannot be called with one") from None


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


def _checked_emit(emit: Emit, label: str) -> Emit:
    """``emit`` that names the piece's number and type when it is not a str."""
    count = itertools.count(1)

    def checked(piece: Any) -> None:
        n = next(count)
        if not isinstance(piece, str):
            raise TypeError(f"IteratorSource function {label!r} yielded piece #{n} of type "
                            f"{type(piece).__name__} ({reprlib.repr(piece)}); every piece "
                            "must be a str")
        emit(piece)

    return checked


def _name(fn: object) -> str:
    return str(getattr(fn, "__qualname__", getattr(fn, "__name__", type(fn).__name__)))


def _drain_sync(produced: Iterable[str], emit: Emit, cancel: threading.Event) -> None:
    it = iter(produced)
    try:
        for piece in it:
            if cancel.is_set():
                raise Cancelled()
            emit(piece)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


def _drain_async(produced: AsyncIterable[str], emit: Emit, cancel: threading.Event) -> None:
    async def pump() -> None:
        it: AsyncIterator[str] = produced.__aiter__()
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
                    piece = nxt.result()
                except StopAsyncIteration:
                    return
                emit(piece)
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


__all__ = ["IteratorSource", "PieceSource"]
