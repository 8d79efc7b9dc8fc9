"""ScriptedSource and IteratorSource on their own (no widget)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbstream.sources import Cancelled, IteratorSource, ScriptedFailure, ScriptedSource
from nbstream.sources.base import ChatMessage
from nbstream.sources.scripted import split_words

MSGS: list[ChatMessage] = [{"role": "user", "content": "hi"}]


def collect(src: ScriptedSource | IteratorSource, cancel_after: int | None = None
            ) -> tuple[list[str], threading.Event]:
    out: list[str] = []
    cancel = threading.Event()

    def emit(piece: str) -> None:
        if cancel.is_set():
            raise Cancelled()
        out.append(piece)
        if cancel_after is not None and len(out) >= cancel_after:
            cancel.set()

    try:
        src.generate(MSGS, emit, cancel)
    except Cancelled:
        pass
    return out, cancel


@given(st.text())
def test_split_words_round_trips(text: str) -> None:
    assert "".join(split_words(text)) == text


def test_split_words_are_word_sized() -> None:
    assert split_words("Hello,  big world\n") == ["Hello,", "  big", " world", "\n"]


def test_scripted_emits_at_its_rate() -> None:
    text = " ".join(["w"] * 41)
    t0 = time.monotonic()
    out, _ = collect(ScriptedSource(text, rate=100))
    elapsed = time.monotonic() - t0
    assert "".join(out) == text
    assert 0.35 < elapsed < 1.5  # 40 gaps of 10 ms


def test_scripted_jitter_is_reproducible() -> None:
    stamps: list[list[float]] = []
    for _ in range(2):
        fake = [0.0]
        times: list[float] = []

        def clock() -> float:
            return fake[0]

        src = ScriptedSource("a b c d e f", rate=10, jitter=0.5, seed=7, clock=clock)
        cancel = threading.Event()
        # a cancel event whose wait advances the fake clock instead of sleeping
        cancel.wait = lambda t=None: (fake.__setitem__(0, fake[0] + (t or 0)), False)[1]  # type: ignore[method-assign]
        src.generate(MSGS, lambda p: times.append(fake[0]), cancel)
        stamps.append(times)
    assert stamps[0] == stamps[1]
    gaps = [b - a for a, b in zip(stamps[0], stamps[0][1:])]
    assert len(set(round(g, 6) for g in gaps)) > 1  # it does jitter
    assert all(0.05 - 1e-9 <= g <= 0.15 + 1e-9 for g in gaps)


def test_scripted_high_rate_is_met() -> None:
    text = "x " * 10_000
    t0 = time.monotonic()
    out, _ = collect(ScriptedSource(text, rate=10_000))
    assert "".join(out) == text
    assert time.monotonic() - t0 < 3.0


def test_scripted_stops_between_pieces() -> None:
    out, _ = collect(ScriptedSource("a b c d e f g h", rate=1000), cancel_after=3)
    assert out == ["a", " b", " c"]


def test_scripted_faults() -> None:
    with pytest.raises(ScriptedFailure):
        collect(ScriptedSource("a b c d", rate=1000, error_after=2))
    t0 = time.monotonic()
    out, _ = collect(ScriptedSource("a b c", rate=1000, stall_after=1, stall_for=0.3))
    assert "".join(out) == "a b c"
    assert time.monotonic() - t0 >= 0.3
    with pytest.raises(ValueError):
        ScriptedSource("x", rate=0)
    with pytest.raises(ValueError):
        ScriptedSource("x", jitter=2)


def test_iterator_source_sync_and_close_on_stop() -> None:
    closed = threading.Event()

    def gen(msgs: Sequence[ChatMessage]) -> Iterator[str]:
        try:
            for i in range(100):
                yield f"{i} "
        finally:
            closed.set()

    out, _ = collect(IteratorSource(gen), cancel_after=5)
    assert out == ["0 ", "1 ", "2 ", "3 ", "4 "]
    assert closed.is_set()
    assert "".join(collect(IteratorSource(lambda m: ["a", "b"]))[0]) == "ab"


def test_iterator_source_async_runs_off_the_callers_loop() -> None:
    loop_ids: list[int] = []

    async def agen(msgs: Sequence[ChatMessage]) -> AsyncIterator[str]:
        loop_ids.append(id(asyncio.get_running_loop()))
        for w in ["one", " two", " three"]:
            await asyncio.sleep(0.01)
            yield w

    out, _ = collect(IteratorSource(agen))
    assert "".join(out) == "one two three"
    assert loop_ids


def test_iterator_source_async_stop_while_awaiting() -> None:
    finalized = threading.Event()

    async def slow(msgs: Sequence[ChatMessage]) -> AsyncIterator[str]:
        try:
            yield "first"
            await asyncio.sleep(30)  # a stalled server
            yield "never"
        finally:
            finalized.set()

    src = IteratorSource(slow)
    cancel = threading.Event()
    out: list[str] = []
    threading.Timer(0.2, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        src.generate(MSGS, out.append, cancel)
    assert time.monotonic() - t0 < 2
    assert out == ["first"]
    assert finalized.is_set()


def test_iterator_source_rejects_bad_output() -> None:
    with pytest.raises(TypeError):
        collect(IteratorSource(lambda m: "a plain string"))  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError):
        collect(IteratorSource(lambda m: [1, 2]))  # type: ignore[list-item]
    with pytest.raises(TypeError):
        IteratorSource(["not", "callable"])  # type: ignore[arg-type]
