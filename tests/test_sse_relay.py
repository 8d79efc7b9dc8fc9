"""The hand-off of pieces from the shared HTTP loop to a reply's worker thread
(nbstream/sources/sse.py ``_Relay``): every piece in order, backpressure counted
piece by piece (the request reads on once half of what waited was emitted), the
end seen from any thread, pieces after the end never emitted, a dead loop thread
noticed. No server: the loop side's calls are made on the shared loop, the
worker's on a thread of the test."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from _wait import wait_until

from nbstream.sources import sse
from nbstream.sources.base import SourceError


def on_loop(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on the shared loop's thread (where ``put`` and ``room`` run)."""
    async def call() -> Any:
        return fn()
    return asyncio.run_coroutine_threadsafe(call(), sse.shared_loop()).result(10)


class Worker:
    """A reply's worker: iterates ``relay.pieces()`` on its own thread and records
    what it got; with ``gated``, each emit waits for a permit of the test."""

    def __init__(self, relay: sse._Relay, gated: bool = False) -> None:
        self.got: list[Any] = []
        self.entered = 0  # emits begun (the last may wait for its permit)
        self.error: BaseException | None = None
        self._gate = threading.Semaphore(0) if gated else None
        self._relay = relay
        self.thread = threading.Thread(target=self._run, name="relay-worker", daemon=True)
        self.thread.start()

    def allow(self, n: int = 1) -> None:
        assert self._gate is not None
        self._gate.release(n)

    def _run(self) -> None:
        try:
            for piece in self._relay.pieces():
                self.entered += 1
                if self._gate is not None:
                    assert self._gate.acquire(timeout=30)
                self.got.append(piece)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def join(self) -> None:
        self.thread.join(30)
        assert not self.thread.is_alive(), "the worker did not see the end"


def put_all(relay: sse._Relay, pieces: list[Any]) -> None:
    on_loop(lambda: [relay.put(p) for p in pieces])


def test_pieces_put_in_bursts_arrive_in_order() -> None:
    """Bursts put while the worker is busy and while it waits: every piece, in order,
    the end after the last."""
    relay = sse._Relay(sse.shared_loop())
    worker = Worker(relay, gated=True)
    expected: list[Any] = []
    for burst in range(20):
        pieces = [f"b{burst}-{i}" for i in range(burst % 7 + 1)]
        expected += pieces
        put_all(relay, pieces)
        if burst % 3 == 0:  # now and then the worker runs dry and waits again
            worker.allow(len(pieces) + 50)
    worker.allow(10_000)
    relay.close()
    worker.join()
    assert worker.error is None
    assert worker.got == expected


def test_backpressure_is_counted_piece_by_piece() -> None:
    """RELAY_HIGH pieces waiting pause the request (``room()`` waits); it reads on
    once half of them were emitted, not before."""
    relay = sse._Relay(sse.shared_loop())
    worker = Worker(relay, gated=True)
    put_all(relay, [f"p{i}" for i in range(sse.RELAY_HIGH)])
    room = asyncio.run_coroutine_threadsafe(relay.room(), sse.shared_loop())
    half = sse.RELAY_HIGH // 2
    wait_until(lambda: worker.entered >= 1, 30, "the worker to take the first piece")
    # the worker emitted half - 1 pieces and waits in the next emit: still paused
    worker.allow(half - 1)
    wait_until(lambda: worker.entered == half, 30, "the worker to reach the mark")
    on_loop(lambda: None)  # a resume sent by then would have run on the loop
    assert not room.done(), "the request read on before half the pieces were emitted"
    worker.allow(1)  # the half-th piece emitted: the request reads on
    room.result(30)
    assert len(worker.got) == half
    worker.allow(10_000)
    relay.close()
    worker.join()
    assert worker.error is None
    assert worker.got == [f"p{i}" for i in range(sse.RELAY_HIGH)]


def test_a_relay_under_the_mark_never_pauses() -> None:
    relay = sse._Relay(sse.shared_loop())
    put_all(relay, list(range(sse.RELAY_HIGH - 1)))
    assert asyncio.run_coroutine_threadsafe(relay.room(), sse.shared_loop()).result(10) is None
    relay.close()
    worker = Worker(relay)
    worker.join()
    assert worker.got == list(range(sse.RELAY_HIGH - 1))


def test_the_end_reaches_a_waiting_worker_from_any_thread() -> None:
    """``close()`` from a thread that is not the loop's (the request's future may end
    before the worker added its callback) ends a worker that waits for pieces."""
    relay = sse._Relay(sse.shared_loop())
    worker = Worker(relay)
    put_all(relay, ["a", "b"])
    wait_until(lambda: worker.got == ["a", "b"], 30, "the two pieces")
    relay.close()  # this test's thread
    worker.join()
    assert worker.error is None and worker.got == ["a", "b"]


def test_pieces_after_the_end_are_never_emitted() -> None:
    relay = sse._Relay(sse.shared_loop())
    put_all(relay, ["a"])
    relay.close()
    put_all(relay, ["late"])
    worker = Worker(relay)
    worker.join()
    assert worker.got == ["a"]


def test_a_worker_waiting_on_a_dead_loop_thread_gets_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop thread ended (the interpreter shutting down): a waiting worker
    notices at its next look (every second) instead of waiting for ever."""
    relay = sse._Relay(sse.shared_loop())
    dead = threading.Thread(target=lambda: None)
    dead.start()
    dead.join()
    monkeypatch.setattr(sse, "_loop_thread", dead)
    worker = Worker(relay)
    worker.join()
    assert isinstance(worker.error, SourceError)
    assert "HTTP thread ended" in str(worker.error)
