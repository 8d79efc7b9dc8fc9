"""ScriptedSource and IteratorSource on their own (no widget)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbstream.sources import Cancelled, IteratorSource, ScriptedFailure, ScriptedSource
from nbstream.sources.base import ChatMessage
from nbstream.sources.scripted import MIN_WAIT, split_words

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


def on_a_fake_clock(oversleep: float = 0.0, **kwargs: object) -> tuple[list[str], list[float]]:
    """Run a ScriptedSource on a fake clock; (pieces, the clock at each emit).

    Its waits (on the cancel event) advance the clock by what was asked plus
    ``oversleep``, like an OS that wakes a thread late.
    """
    text = kwargs.pop("text")
    now = [0.0]
    src = ScriptedSource(text, clock=lambda: now[0], **kwargs)  # type: ignore[arg-type]
    cancel = threading.Event()

    def wait(timeout: float | None = None) -> bool:
        now[0] += (timeout or 0.0) + oversleep
        return False

    cancel.wait = wait  # type: ignore[method-assign]
    out: list[str] = []
    times: list[float] = []

    def emit(piece: str) -> None:
        out.append(piece)
        times.append(now[0])

    src.generate(MSGS, emit, cancel)
    return out, times


def test_scripted_emits_at_its_rate() -> None:
    text = " ".join(["w"] * 41)
    out, times = on_a_fake_clock(text=text, rate=100)
    assert "".join(out) == text
    assert times == pytest.approx([i * 0.01 for i in range(41)])  # 40 gaps of 10 ms
    out, _ = collect(ScriptedSource(text, rate=100))  # and on the real clock
    assert "".join(out) == text


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
    # each wait wakes 3 ms late (30 gaps): the schedule is kept by deadlines, so the
    # pieces after a late wake catch up and the whole reply is late by one wake only
    out, times = on_a_fake_clock(oversleep=0.003, text=text, rate=10_000)
    assert "".join(out) == text
    assert times[-1] <= (10_000 - 1) / 10_000 + 0.003 + 1e-9
    # never early by more than the shortest wait worth making
    assert all(t >= i / 10_000 - MIN_WAIT - 1e-9 for i, t in enumerate(times))
    out, _ = collect(ScriptedSource(text, rate=10_000))  # and on the real clock
    assert "".join(out) == text


def test_scripted_stops_between_pieces() -> None:
    out, _ = collect(ScriptedSource("a b c d e f g h", rate=1000), cancel_after=3)
    assert out == ["a", " b", " c"]


def test_scripted_faults() -> None:
    with pytest.raises(ScriptedFailure):
        collect(ScriptedSource("a b c d", rate=1000, error_after=2))
    out, times = on_a_fake_clock(text="a b c", rate=1000, stall_after=1, stall_for=0.3)
    assert "".join(out) == "a b c"
    assert times[1] - times[0] >= 0.3  # it stalled before the second piece
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
    """An async source runs on a private loop of the worker thread: the caller's
    loop (the kernel's) keeps running meanwhile, and is never used."""
    seen: list[tuple[int, int]] = []  # (loop id, thread id) where the generator ran
    opened = threading.Event()  # set by a task of the caller's loop

    async def agen(msgs: Sequence[ChatMessage]) -> AsyncIterator[str]:
        seen.append((id(asyncio.get_running_loop()), threading.get_ident()))
        yield "one"
        # this piece needs the caller's loop to run while the generator awaits
        for _ in range(6000):
            if opened.is_set():
                break
            await asyncio.sleep(0.005)  # awaiting (polling) the caller's task
        yield " two" if opened.is_set() else " (the caller's loop was blocked)"

    async def caller() -> tuple[list[str], int, int]:
        loop = asyncio.get_running_loop()

        async def open_gate() -> None:
            while not seen:
                await asyncio.sleep(0.001)  # polling, on the caller's loop
            opened.set()

        opener = loop.create_task(open_gate())
        worker: list[int] = []

        def run() -> list[str]:
            worker.append(threading.get_ident())
            return collect(IteratorSource(agen))[0]

        out = await loop.run_in_executor(None, run)
        await opener
        return out, id(loop), worker[0]

    out, caller_loop, worker_thread = asyncio.run(caller())
    assert "".join(out) == "one two"
    (loop_id, thread_id), = seen
    assert loop_id != caller_loop and thread_id == worker_thread


def test_iterator_source_async_stop_while_awaiting() -> None:
    finalized = threading.Event()

    awaiting = threading.Event()

    async def slow(msgs: Sequence[ChatMessage]) -> AsyncIterator[str]:
        try:
            yield "first"
            awaiting.set()
            await asyncio.Event().wait()  # a stalled server: this never completes
            yield "never"
        finally:
            finalized.set()

    src = IteratorSource(slow)
    cancel = threading.Event()
    out: list[str] = []

    def stop_once_awaiting() -> None:
        awaiting.wait(60)
        cancel.set()

    threading.Thread(target=stop_once_awaiting, daemon=True).start()
    # returning at all proves the stop interrupted the await (it never completes)
    with pytest.raises(Cancelled):
        src.generate(MSGS, out.append, cancel)
    assert out == ["first"]
    assert finalized.is_set()


def test_iterator_source_rejects_bad_output() -> None:
    with pytest.raises(TypeError):
        collect(IteratorSource(lambda m: "a plain string"))  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError):
        collect(IteratorSource(lambda m: [1, 2]))  # type: ignore[list-item]
    with pytest.raises(TypeError):
        IteratorSource(["not", "callable"])  # type: ignore[arg-type]
