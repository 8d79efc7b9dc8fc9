"""Reading many HTTP replies at once in one process: one shared event loop against a loop per reply.

N ``OpenAISource`` replies stream at once from the project's fake OpenAI-compatible
server (tests/_servers.py, a separate process), each ``--pieces`` model-shaped pieces
at ``--rate`` pieces/s, in this process with no widget: only the reading. Three ways,
in interleaved rounds:

* **shared loop** (as shipped, nbstream/sources/sse.py): every request runs on one
  event loop thread (``nbstream-http``), each reply's worker thread emits its pieces,
  handed over one ``SimpleQueue.put`` a piece (which wakes the worker if it waits);
* **shared loop, wakes at the turn's end** (tried 2026-12-02, not shipped:
  :class:`TurnEndRelay`): the same loop, the pieces in a list the worker takes whole,
  a worker woken only when it parked on an empty list, and the wakes of one turn of
  the loop sent once the turn ran;
* **a loop per reply** (the way before): each worker thread runs its own event loop
  for its request and emits on it (``asyncio.run`` of the same request coroutine).

Printed per way, medians (min-max) over the rounds: the process's CPU time per piece
(and the system's part of it, where the wakes go) and as a share of one core; how late
the main thread (a kernel's, which runs the cells) wakes from a 1 ms sleep while they
stream (p95 and max): the time it waits for its turn; and for the two shared-loop ways,
the hand-off: from a piece put on the loop to its worker taking it (p50 and p95 of
all the pieces of the round). The machine's load average with them. Not a timed test.

    .venv/bin/python benchmarks/http_reading.py [--streams 32] [--rate 100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from many_streams import pieces_of  # noqa: E402
from soak import ANSWER  # noqa: E402

from nbstream.sources import OpenAISource, sse  # noqa: E402
from nbstream.sources.base import ChatMessage  # noqa: E402
from nbstream.sources.toolcalls import CallIds  # noqa: E402

MSGS: list[ChatMessage] = [{"role": "user", "content": "go"}]


def shared(source: OpenAISource, emit: Any) -> None:
    source.generate(MSGS, emit, threading.Event())


def per_reply(source: OpenAISource, emit: Any) -> None:
    """The previous way: this thread's own loop runs the request and emits on it."""
    cancel = threading.Event()
    work = source._attempts(MSGS, emit, cancel, {}, (), CallIds(MSGS))
    asyncio.run(source._watch(work, cancel))


class TurnEndRelay(sse._Relay):
    """Tried and not shipped (2026-12-02): the pieces in a list the worker takes whole,
    a wake only for a worker parked on an empty list, and the wakes of one turn of the
    loop sent together once the turn ran (:func:`_wake_at_turn_end`). The same
    backpressure as ``sse._Relay`` (its ``room`` and ``_took``), counted piece by piece."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._pending: list[Any] = []
        self._signal: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._parked = False

    def put(self, piece: Any) -> None:
        with self._lock:
            self._pending.append(piece)
            self._waiting += 1
            if self._waiting >= sse.RELAY_HIGH:
                self._paused = True
            if not self._parked:
                return
            self._parked = False
        _wake_at_turn_end(self._loop, self._signal)

    def close(self) -> None:
        with self._lock:
            self._pending.append(sse._END)
            wake, self._parked = self._parked, False
        if wake:
            self._signal.put(None)

    def pieces(self) -> Any:
        while True:
            with self._lock:
                batch, self._pending = self._pending, []
                if not batch:
                    self._parked = True
            if not batch:
                try:
                    self._signal.get(timeout=30.0)
                except queue.Empty:
                    raise SystemExit("a worker waited 30 s for its pieces") from None
                continue
            for piece in batch:
                if piece is sse._END:
                    return
                yield piece
                self._took()


_due: dict[asyncio.AbstractEventLoop, list[queue.SimpleQueue[None]]] = {}


def _wake_at_turn_end(loop: asyncio.AbstractEventLoop, signal: queue.SimpleQueue[None]) -> None:
    """(loop thread) Wake ``signal``'s worker once the loop's current turn ran."""
    due = _due.setdefault(loop, [])
    if not due:
        def wake() -> None:
            for s in due:
                s.put(None)
            due.clear()
        loop.call_soon(wake)
    due.append(signal)


#: seconds from a piece put on the loop to its worker taking it, this round
HANDOFF: list[float] = []


def timed(relay: type) -> type:
    """``relay`` with the hand-off of each piece timed into :data:`HANDOFF`."""
    class Timed(relay):  # type: ignore[valid-type,misc]
        def put(self, piece: Any) -> None:
            super().put((time.perf_counter(), piece))

        def pieces(self) -> Any:
            for put_at, piece in super().pieces():
                HANDOFF.append(time.perf_counter() - put_at)
                yield piece
    return Timed


WAYS = {"shared loop": shared, "shared loop, wakes at the turn's end": shared,
        "a loop per reply": per_reply}
#: the relay each shared-loop way's requests hand their pieces over with
RELAYS: dict[str, type] = {"shared loop": timed(sse._Relay),
                           "shared loop, wakes at the turn's end": timed(TurnEndRelay)}


def one_round(base_url: str, way: str, streams: int, pieces: list[str], rate: float
              ) -> dict[str, float]:
    sources = [OpenAISource("fake", base_url, x_pieces=[f"[s{i}] ", *pieces],
                            x_delay=1.0 / rate) for i in range(streams)]
    counts = [0] * streams

    def run(i: int) -> None:
        def emit(piece: Any) -> None:
            counts[i] += 1
        WAYS[way](sources[i], emit)

    workers = [threading.Thread(target=run, args=(i,), name=f"reply-{i}")
               for i in range(streams)]
    late: list[float] = []
    HANDOFF.clear()
    shipped = sse._Relay
    sse._Relay = RELAYS.get(way, shipped)
    try:
        t0, c0, s0 = time.monotonic(), time.process_time(), os.times().system
        for w in workers:
            w.start()
        while any(w.is_alive() for w in workers):
            a = time.perf_counter()
            time.sleep(0.001)
            late.append((time.perf_counter() - a - 0.001) * 1000)
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
        system = os.times().system - s0
    finally:
        sse._Relay = shipped
    total = sum(counts)
    if total != streams * (len(pieces) + 1):
        raise SystemExit(f"{way}: {total} pieces arrived, {streams * (len(pieces) + 1)} sent")
    late.sort()
    handoff = sorted(HANDOFF) or [float("nan")]
    return {"us_per_piece": cpu / total * 1e6, "sys_us_per_piece": system / total * 1e6,
            "core_pct": cpu / wall * 100,
            "late_p95_ms": late[int(0.95 * (len(late) - 1))], "late_max_ms": late[-1],
            "handoff_p50_ms": handoff[len(handoff) // 2] * 1000,
            "handoff_p95_ms": handoff[int(0.95 * (len(handoff) - 1))] * 1000}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--streams", type=int, default=32)
    ap.add_argument("--rate", type=float, default=100.0, help="pieces per second per reply")
    ap.add_argument("--repeat", type=int, default=3, help="the answer, this many times over")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    from _servers import start_fake_server

    pieces = pieces_of(ANSWER * args.repeat, "x")[1:]
    server = start_fake_server()
    results: dict[str, list[dict[str, float]]] = {w: [] for w in WAYS}
    loads: list[float] = []
    try:
        one_round(server.base_url, "shared loop", 1, pieces[:20], 1000.0)  # warm up
        for r in range(args.rounds):
            for way in (list(WAYS) if r % 2 == 0 else list(WAYS)[::-1]):
                loads.append(os.getloadavg()[0])
                results[way].append(one_round(server.base_url, way, args.streams, pieces,
                                              args.rate))
                print(f"[{way} #{r + 1}] " + ", ".join(
                    f"{k} {v:.1f}" for k, v in results[way][-1].items()), file=sys.stderr)
    finally:
        server.stop()
    print(f"\n{args.streams} replies at once, {len(pieces) + 1} pieces each at "
          f"{args.rate:.0f}/s, read in one process (no widget); medians (min-max) of "
          f"{args.rounds} interleaved rounds; load average median "
          f"{statistics.median(loads):.1f} on {os.cpu_count()} CPUs\n")
    cols = [("CPU per piece", "us_per_piece", "{:.0f} us"),
            ("system's part", "sys_us_per_piece", "{:.0f} us"),
            ("of one core", "core_pct", "{:.0f} %"),
            ("main thread late, p95", "late_p95_ms", "{:.1f} ms"),
            ("max", "late_max_ms", "{:.1f} ms"),
            ("hand-off p50", "handoff_p50_ms", "{:.2f} ms"),
            ("p95", "handoff_p95_ms", "{:.2f} ms")]
    print("| way | " + " | ".join(c for c, _, _ in cols) + " |")
    print("|---|" + "--:|" * len(cols))
    for way, rows in results.items():
        cells = []
        for _, key, fmt in cols:
            v = [row[key] for row in rows if row[key] == row[key]]  # (NaN: not measured)
            cells.append(f"{fmt.format(statistics.median(v))} "
                         f"({fmt.format(min(v))}–{fmt.format(max(v))})" if v else "–")
        print(f"| {way} | " + " | ".join(cells) + " |")
    cpu = {w: statistics.median(r["us_per_piece"] for r in results[w]) for w in WAYS}
    print()
    for way in list(WAYS)[1:]:
        print(f"{way} / shared loop, CPU per piece: {cpu[way] / cpu['shared loop']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
