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
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Hashable, Iterable, Sequence
from typing import Any

from .base import Cancelled, ChatMessage, Emit, Source

PieceSource = Iterable[str] | AsyncIterable[str]


class IteratorSource(Source):
    """Stream the strings produced by ``fn(messages)`` (sync or async)."""

    def __init__(self, fn: Callable[[Sequence[ChatMessage]], PieceSource], *,
                 label: str | None = None) -> None:
        if not callable(fn):
            raise TypeError("IteratorSource needs a function messages -> iterable of str; "
                            "use nbstream.stream(iterable) for a ready-made iterable")
        self.fn = fn
        self._label: str = label or str(getattr(fn, "__name__", "iterator"))

    @property
    def label(self) -> str:
        return self._label

    def lane_key(self) -> Hashable:
        return ("iterator", id(self))

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> None:
        produced = self.fn(list(messages))
        if isinstance(produced, str):
            raise TypeError("the function returned a str; return an iterable of pieces "
                            "(e.g. yield the pieces, or wrap it in a list)")
        if hasattr(produced, "__aiter__"):
            _drain_async(produced, emit, cancel)  # type: ignore[arg-type]
        elif hasattr(produced, "__iter__"):
            _drain_sync(produced, emit, cancel)
        else:
            raise TypeError(f"expected an iterable of str, got {type(produced).__name__}")

    def __repr__(self) -> str:
        return f"IteratorSource({self._label})"


def _check_piece(piece: Any) -> str:
    if not isinstance(piece, str):
        raise TypeError(f"a source yielded {type(piece).__name__}, expected str")
    return piece


def _drain_sync(produced: Iterable[str], emit: Emit, cancel: threading.Event) -> None:
    it = iter(produced)
    try:
        for piece in it:
            if cancel.is_set():
                raise Cancelled()
            emit(_check_piece(piece))
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
                emit(_check_piece(piece))
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
