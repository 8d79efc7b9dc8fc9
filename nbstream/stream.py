"""One message in flight: its text, its coalescing buffer and its status.

Threads and ownership (all fields are guarded by ``self._cond``):

* the **producer** (a worker thread running a source) calls :meth:`put`,
  :meth:`set_status`, :meth:`finish` and :meth:`fail`;
* the **pump** thread calls :meth:`take`, :meth:`settle` and :meth:`state`;
  it alone sends, so it alone advances ``seq``;
* **any** thread may call :meth:`cancel`, read :attr:`text` / :attr:`status`
  and :meth:`wait`.

The text of a message is the concatenation of ``_sent`` (pieces already sent
as deltas, numbered ``1..seq``) and ``_pending`` (received, not yet sent). A
delta moves all of ``_pending`` to ``_sent`` at once, so however fast pieces
arrive, the number of deltas depends only on how often the pump flushes.
Text is coalesced, never dropped, except on a stop: the unsent tail of a
stopped message was never shown and is discarded, so that nothing appears
after the user pressed Stop.

``_pending`` is bounded (``max_pending`` characters): a producer that outruns
the pump waits in :meth:`put` (backpressure) instead of growing memory.

This module knows nothing of widgets, comms or threads other than through
the callbacks it is given, so a list and a fake clock test it.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from .pieces import Cancelled
from .protocol import Status

Clock = Callable[[], float]


class Delta(NamedTuple):
    """Text appended to message ``id``; the ``seq``-th delta of that message."""

    id: str
    seq: int
    text: str


@dataclass(frozen=True)
class Limits:
    """Time limits of one reply, in seconds (None: no limit).

    ``first_piece`` counts from the start of generation (after any model
    loading) to the first piece; ``stall`` is the longest allowed gap between
    two pieces; ``total`` counts from the start of generation to the end.
    """

    first_piece: float | None = None
    stall: float | None = None
    total: float | None = None


@dataclass
class Flush:
    """One delta as the trace sees it (times from the stream's clock)."""

    seq: int
    first_piece_at: float
    sent_at: float
    chars: int
    #: when the view acknowledged it (rendered), and how long its frame's DOM work took
    acked_at: float | None = None
    render_ms: float | None = None


class Stream:
    """Coalescing buffer and lifecycle of one message (see module docstring)."""

    def __init__(
        self,
        stream_id: str,
        *,
        max_pending: int = 1 << 20,
        clock: Clock = time.monotonic,
        limits: Limits | None = None,
    ) -> None:
        self.id = stream_id
        self.max_pending = max_pending
        self.limits = limits or Limits()
        self._clock = clock
        self._cond = threading.Condition()
        #: called (without the lock held) when the pump should look at this stream
        self.on_wake: Callable[[Stream], None] = lambda s: None
        #: called (without the lock held) when the status changed: the view must hear of it
        self.on_status: Callable[[Stream], None] = lambda s: None
        self.interval = 0.04  # set by the pump
        #: flow control, set by the pump: deltas that may be unacknowledged (None: no limit)
        self.window: int | None = None
        self._acked = 0
        self._acked_at: float | None = None
        self.render_ms: list[float] = []  # as reported by the view, per acked delta
        self.ack_lag_ms: list[float] = []  # sent -> acknowledged (render included)
        self.cancel_event = threading.Event()

        self._sent: list[str] = []
        self._sent_chars = 0
        self._pending: list[str] = []
        self._pending_chars = 0
        self._pending_since = 0.0
        self._seq = 0
        self._last_flush = -math.inf

        self._status: Status = "queued"
        self._final = False  # status is final and published-ready
        self._finishing: Status | None = None  # producer ended; pump settles
        self._error: BaseException | None = None
        self._error_text: str | None = None
        self._detail: str | None = None

        # figures
        self.created_at = clock()
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self._piece_times = array("d")
        self._piece_chars = array("q")
        self.flushes: list[Flush] = []
        self.discarded_chars = 0
        #: tokens generated, when the source reports them (else pieces stand in)
        self.tokens: int | None = None
        self.backpressure_waits = 0
        self.backpressure_s = 0.0
        self._done = threading.Event()

    # ------------------------------------------------------------------ producer
    def put(self, piece: str) -> None:
        """Append a piece. Blocks while the unsent buffer is full.

        Raises :class:`Cancelled` once the stream was stopped or ended.
        """
        if not piece:
            self._check_open()
            return
        with self._cond:
            if self._pending_chars >= self.max_pending and self._open():
                self.backpressure_waits += 1
                t0 = self._clock()
                while self._pending_chars >= self.max_pending and self._open():
                    self._cond.wait(0.5)
                self.backpressure_s += self._clock() - t0
            if not self._open():
                raise Cancelled(self.id)
            now = self._clock()
            was_empty = not self._pending
            if was_empty:
                self._pending_since = now
            self._pending.append(piece)
            self._pending_chars += len(piece)
            self._piece_times.append(now)
            self._piece_chars.append(len(piece))
        if was_empty:
            self.on_wake(self)

    def set_status(self, status: Status) -> None:
        """Move a live stream to ``loading`` or ``running``."""
        with self._cond:
            if self._final or self._finishing:
                return
            changed = self._status != status
            self._status = status
            if status == "running" and self.started_at is None:
                self.started_at = self._clock()
        if changed:
            self.on_status(self)

    def finish(self) -> None:
        """The producer ended normally; the pump sends the rest and marks it done."""
        self._end("done")

    def fail(self, error: BaseException, detail: str | None = None) -> None:
        """The producer raised; keep the text so far and record the error."""
        with self._cond:
            if self._final or self._finishing:
                return
            self._error = error
            self._error_text = f"{type(error).__name__}: {error}".strip().rstrip(":")
            self._detail = detail
        self._end("error")

    def _end(self, status: Status) -> None:
        with self._cond:
            if self._final or self._finishing:
                return
            self._finishing = status
            self._cond.notify_all()
        self.on_wake(self)

    # ----------------------------------------------------------------- any thread
    def cancel(self, status: Status = "stopped", reason: str | None = None) -> bool:
        """Stop now: discard the unsent tail, mark final. True if it was live."""
        with self._cond:
            if self._final:
                return False
            self._stop(status, reason)
        self.on_wake(self)
        return True

    @property
    def status(self) -> Status:
        with self._cond:
            return self._status

    @property
    def final(self) -> bool:
        with self._cond:
            return self._final

    @property
    def error(self) -> BaseException | None:
        with self._cond:
            return self._error

    @property
    def text(self) -> str:
        """All text received so far (sent or not); after a stop, what was sent."""
        with self._cond:
            return "".join(self._sent) + "".join(self._pending)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the status is final; False on timeout."""
        return self._done.wait(timeout)

    # ------------------------------------------------------------------- pump
    def due_at(self) -> float | None:
        """When the pump should next act on this stream (None: not until woken)."""
        with self._cond:
            if self._final:
                return None
            if self._finishing:
                return -math.inf
            t = math.inf
            if self._pending and not self._window_full():
                t = self._last_flush + self.interval
            return min(t, self._deadline())

    def _window_full(self) -> bool:
        return self.window is not None and self._seq - self._acked >= self.window

    def unacked_since(self) -> float | None:
        """When the oldest unacknowledged delta was sent (None: all acknowledged)."""
        with self._cond:
            if self._acked >= self._seq:
                return None
            return self.flushes[self._acked].sent_at

    def ack(self, seq: int, render_ms: float, now: float) -> bool:
        """The view rendered deltas up to ``seq``. True if that was news."""
        with self._cond:
            if seq <= self._acked or seq > self._seq:
                return False
            sent_at = self.flushes[seq - 1].sent_at
            for f in self.flushes[self._acked:seq]:  # an ack covers every delta up to seq
                f.acked_at = now
            self.flushes[seq - 1].render_ms = float(render_ms)
            self._acked = seq
            self._acked_at = now
            self.render_ms.append(float(render_ms))
            self.ack_lag_ms.append((now - sent_at) * 1000.0)
            return True

    def _deadline(self) -> float:
        lim = self.limits
        if self.started_at is None or self._status != "running":
            return math.inf
        t = math.inf
        if lim.total is not None:
            t = min(t, self.started_at + lim.total)
        last_piece = self._piece_times[-1] if self._piece_times else None
        if last_piece is None or last_piece < self.started_at:
            if lim.first_piece is not None:
                t = min(t, self.started_at + lim.first_piece)
        elif lim.stall is not None:
            t = min(t, last_piece + lim.stall)
        return t

    def take(self, now: float) -> Delta | None:
        """Return the pending text as one delta if one is due at ``now``."""
        with self._cond:
            if self._final or not self._pending or now < self._last_flush + self.interval:
                return None
            if self._window_full():
                return None
            return self._flush(now)

    def _flush(self, now: float) -> Delta:
        text = "".join(self._pending)
        self._seq += 1
        self.flushes.append(Flush(self._seq, self._pending_since, now, len(text)))
        self._sent.append(text)
        self._sent_chars += len(text)
        self._pending.clear()
        self._pending_chars = 0
        self._last_flush = now
        self._cond.notify_all()  # room for a producer waiting in put()
        return Delta(self.id, self._seq, text)

    def settle(self, now: float) -> bool:
        """Pump step for a stream that ended or ran out of time.

        An ended stream's unsent tail is folded into its final state (no
        separate delta: the state carries it). A stream past a time limit is
        ended with status ``timeout``. Returns True if the stream became final.
        """
        with self._cond:
            if self._final:
                return False
            if self._finishing:
                if self._pending:
                    self._flush(now)
                self._make_final(self._finishing, self._error_text)
                return True
            if now >= self._deadline():
                self._stop("timeout", self._timeout_reason(now))
                return True
            return False

    def _timeout_reason(self, now: float) -> str:
        lim, start = self.limits, self.started_at or now
        if lim.total is not None and now >= start + lim.total:
            return f"no end after {lim.total:g} s"
        if not self._piece_times or self._piece_times[-1] < start:
            return f"no first token after {lim.first_piece:g} s"
        return f"no token for {lim.stall:g} s"

    def _stop(self, status: Status, reason: str | None) -> None:
        # caller holds the lock: the unsent tail was never shown, so it is discarded
        self.cancel_event.set()
        self.discarded_chars += self._pending_chars
        self._pending.clear()
        self._pending_chars = 0
        self._finishing = None
        self._make_final(status, reason)

    def _make_final(self, status: Status, reason: str | None) -> None:
        # caller holds the lock
        self._status = status
        self._final = True
        if status in ("error", "timeout", "stopped") and reason:
            self._error_text = reason
        self.ended_at = self._clock()
        self._cond.notify_all()
        self._done.set()

    def state(self) -> tuple[str, int, Status, str | None, str | None]:
        """(text, seq, status, error, detail): text is exactly deltas 1..seq."""
        with self._cond:
            return (
                "".join(self._sent),
                self._seq,
                self._status,
                self._error_text if self._status in ("error", "timeout") else None,
                self._detail,
            )

    # ------------------------------------------------------------------ figures
    def stats(self) -> dict[str, Any]:
        """Figures of this message so far (times in milliseconds)."""
        with self._cond:  # one consistent snapshot; the figures are computed outside
            times = list(self._piece_times)
            start = self.started_at
            end = self.ended_at if self.ended_at is not None else self._clock()
            tokens = self.tokens
            r = sorted(self.render_ms)
            lag = sorted(self.ack_lag_ms)
            out: dict[str, Any] = {
                "pieces": len(times),
                "chars": self._sent_chars + self._pending_chars,
                "flushes": len(self.flushes),
                "discarded_chars": self.discarded_chars,
                "backpressure_waits": self.backpressure_waits,
                "backpressure_ms": round(self.backpressure_s * 1000, 3),
                "acked": self._acked,
            }
        if r:
            out["render_ms_p50"] = round(_quantile(r, 0.5), 3)
            out["render_ms_max"] = round(r[-1], 3)
            out["ack_lag_ms_p50"] = round(_quantile(lag, 0.5), 3)
            out["ack_lag_ms_p95"] = round(_quantile(lag, 0.95), 3)
        if start is not None and times:
            out["ttft_ms"] = round((times[0] - start) * 1000, 3)
            gen_s = max(end - start, 1e-9)
            out["pieces_per_s"] = round(len(times) / gen_s, 2)
            if tokens is not None:
                out["tokens"] = tokens
                out["tokens_per_s"] = round(tokens / gen_s, 2)
            gaps = sorted(b - a for a, b in itertools.pairwise(times))
            if gaps:
                out["gap_p50_ms"] = round(_quantile(gaps, 0.5) * 1000, 3)
                out["gap_p95_ms"] = round(_quantile(gaps, 0.95) * 1000, 3)
                out["gap_max_ms"] = round(gaps[-1] * 1000, 3)
        if start is not None:
            out["duration_ms"] = round((end - start) * 1000, 3)
        return out

    def timeline(self) -> tuple[float | None, list[tuple[float, int]], list[Flush]]:
        """(generation start, [(time, chars) per piece], flushes): a copy, for traces."""
        with self._cond:
            pieces = list(zip(self._piece_times, self._piece_chars, strict=True))
            flushes = [Flush(f.seq, f.first_piece_at, f.sent_at, f.chars, f.acked_at, f.render_ms)
                       for f in self.flushes]
            return self.started_at, pieces, flushes

    # ---------------------------------------------------------------- internals
    def _open(self) -> bool:
        return not self._final and self._finishing is None

    def _check_open(self) -> None:
        with self._cond:
            if not self._open():
                raise Cancelled(self.id)


def _quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    idx = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[idx]
