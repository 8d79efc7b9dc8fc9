"""The figures of one message: what was produced and sent when, and what it cost.

A :class:`Figures` records, for one :class:`~nbstream.core.stream.Stream`, the
time and size of each piece, each delta sent (:class:`Flush`, with when the
view acknowledged it and its render time), the render times and ack lags the
view reported, the producer's waits on a full buffer (backpressure), the text
discarded by a stop, when reasoning and answer began, the tokens the source
counted and the bytes sent to the view. :meth:`Figures.stats` turns them into
the dict ``reply.stats`` returns, :meth:`Figures.timeline` into what a
:class:`~nbstream.core.trace.Trace` is drawn from.

Ownership: a ``Figures`` is its stream's, and not thread-safe on its own. The
stream records into it and copies it (:meth:`Figures.copy`) only while it
holds its condition; the copy is computed on outside the lock, by whichever
thread asked for the figures.
"""

from __future__ import annotations

import itertools
import math
from array import array
from dataclasses import dataclass, replace
from typing import Any

from .pieces import Outcome, PartType

__all__ = ["Figures", "Flush"]


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


class Figures:
    """Everything measured of one message (see the module docstring)."""

    def __init__(self) -> None:
        self._piece_times = array("d")
        self._piece_chars = array("q")
        self._flushes: list[Flush] = []
        #: as reported by the view, per acked delta
        self._render_ms: list[float] = []
        #: sent -> acknowledged (render included), per ack
        self._ack_lag_ms: list[float] = []
        self._discarded_chars = 0
        self._backpressure_waits = 0
        self._backpressure_s = 0.0
        self._first_reasoning_at: float | None = None
        self._last_reasoning_at: float | None = None
        self._first_answer_at: float | None = None
        #: tokens generated, when the source reports them (else pieces stand in)
        self.tokens: int | None = None
        #: bytes sent to the view for this message
        self._wire_bytes = 0

    # ------------------------------------------------------------ producer side
    def piece(self, now: float, kind: PartType, chars: int) -> None:
        """A piece of ``chars`` characters of part ``kind`` arrived at ``now``."""
        if kind == "reasoning":
            if self._first_reasoning_at is None:
                self._first_reasoning_at = now
            self._last_reasoning_at = now
        elif kind == "answer" and self._first_answer_at is None:
            self._first_answer_at = now
        self._piece_times.append(now)
        self._piece_chars.append(chars)

    def waiting(self) -> None:
        """The producer starts waiting on a full buffer (once per blocked put)."""
        self._backpressure_waits += 1

    def waited(self, seconds: float) -> None:
        """... and waited ``seconds`` before it could go on (or was stopped)."""
        self._backpressure_s += seconds

    def discarded(self, chars: int) -> None:
        """A stop dropped ``chars`` characters that were never sent."""
        self._discarded_chars += chars

    @property
    def last_piece_at(self) -> float | None:
        """When the latest piece arrived (None: none yet)."""
        return self._piece_times[-1] if self._piece_times else None

    @property
    def pieces(self) -> int:
        return len(self._piece_times)

    # ---------------------------------------------------------------- pump side
    def flushed(self, seq: int, first_piece_at: float, now: float, chars: int) -> None:
        """Delta ``seq`` (``chars`` characters, its first piece from ``first_piece_at``)
        was made at ``now``."""
        self._flushes.append(Flush(seq, first_piece_at, now, chars))

    def sent_at(self, seq: int) -> float:
        """When delta ``seq`` (from 1) was made."""
        return self._flushes[seq - 1].sent_at

    def acked(self, after: int, seq: int, now: float, render_ms: float) -> float:
        """The view acknowledged deltas ``after + 1 .. seq`` at ``now``, the last one
        rendered in ``render_ms``; returns the ack lag of delta ``seq``, ms."""
        lag_ms = (now - self.sent_at(seq)) * 1000.0
        for f in self._flushes[after:seq]:  # an ack covers every delta up to seq
            f.acked_at = now
        self._flushes[seq - 1].render_ms = render_ms
        self._render_ms.append(render_ms)
        self._ack_lag_ms.append(lag_ms)
        return lag_ms

    def add_wire_bytes(self, n: int) -> None:
        """``n`` more bytes of this message went to the view."""
        self._wire_bytes += n

    # ------------------------------------------------------------------ reading
    def copy(self) -> Figures:
        """A copy that the stream's lock no longer needs to guard."""
        c = Figures()
        c._piece_times = array("d", self._piece_times)
        c._piece_chars = array("q", self._piece_chars)
        c._flushes = [replace(f) for f in self._flushes]
        c._render_ms = list(self._render_ms)
        c._ack_lag_ms = list(self._ack_lag_ms)
        c._discarded_chars = self._discarded_chars
        c._backpressure_waits = self._backpressure_waits
        c._backpressure_s = self._backpressure_s
        c._first_reasoning_at = self._first_reasoning_at
        c._last_reasoning_at = self._last_reasoning_at
        c._first_answer_at = self._first_answer_at
        c.tokens = self.tokens
        c._wire_bytes = self._wire_bytes
        return c

    def stats(self, *, start: float | None, end: float, chars: int, acked: int,
              reasoning_chars: int, outcome: Outcome | None) -> dict[str, Any]:
        """The figures as ``reply.stats`` has them (times in milliseconds): ``start``
        and ``end`` of generation (``end``: now while it runs), the characters
        received, deltas acknowledged, characters of reasoning, and how the source
        said it ended."""
        times = self._piece_times
        tokens = self.tokens
        out: dict[str, Any] = {
            "pieces": len(times),
            "chars": chars,
            "flushes": len(self._flushes),
            "discarded_chars": self._discarded_chars,
            "backpressure_waits": self._backpressure_waits,
            "backpressure_ms": round(self._backpressure_s * 1000, 3),
            "acked": acked,
            "wire_bytes": self._wire_bytes,
        }
        if outcome is not None:
            if outcome.usage:
                out["usage"] = dict(outcome.usage)
            for k, v in outcome.figures.items():
                if k == "tokens" and isinstance(v, int):
                    tokens = v
                else:
                    out[k] = v
        first_reasoning, last_reasoning = self._first_reasoning_at, self._last_reasoning_at
        if first_reasoning is not None and last_reasoning is not None:
            out["reasoning_chars"] = reasoning_chars
            # thinking lasts from the start of generation until the answer starts
            # (or, with no answer, until the last piece of reasoning)
            first_answer = self._first_answer_at
            t0 = start if start is not None else first_reasoning
            t1 = first_answer if first_answer is not None and first_answer >= last_reasoning \
                else last_reasoning
            out["reasoning_ms"] = round(max(0.0, t1 - t0) * 1000, 3)
        r = sorted(self._render_ms)
        if r:
            lag = sorted(self._ack_lag_ms)
            out["render_ms_p50"] = round(quantile(r, 0.5), 3)
            out["render_ms_max"] = round(r[-1], 3)
            out["ack_lag_ms_p50"] = round(quantile(lag, 0.5), 3)
            out["ack_lag_ms_p95"] = round(quantile(lag, 0.95), 3)
        if start is not None and times:
            out["ttft_ms"] = round((times[0] - start) * 1000, 3)
            gen_s = max(end - start, 1e-9)
            out["pieces_per_s"] = round(len(times) / gen_s, 2)
            if tokens is not None:
                out["tokens"] = tokens
                out["tokens_per_s"] = round(tokens / gen_s, 2)
            gaps = sorted(b - a for a, b in itertools.pairwise(times))
            if gaps:
                out["gap_p50_ms"] = round(quantile(gaps, 0.5) * 1000, 3)
                out["gap_p95_ms"] = round(quantile(gaps, 0.95) * 1000, 3)
                out["gap_max_ms"] = round(gaps[-1] * 1000, 3)
        if start is not None:
            out["duration_ms"] = round((end - start) * 1000, 3)
        return out

    def timeline(self) -> tuple[list[tuple[float, int]], list[Flush]]:
        """([(time, chars) per piece], flushes): copies, for traces."""
        pieces = list(zip(self._piece_times, self._piece_chars, strict=True))
        return pieces, [replace(f) for f in self._flushes]


def quantile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``sorted_values``; nan when empty."""
    if not sorted_values:
        return math.nan
    idx = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[idx]
