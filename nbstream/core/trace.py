"""The trace of one reply: when text was produced, sent, and rendered.

A :class:`Trace` is a plain copy of a stream's timeline, taken on demand from
any thread (``reply.trace()``), so it can be inspected, tabulated or plotted
while the reply still runs. Times are seconds from the start of generation.

* **produced**: each piece as the source emitted it (worker thread);
* **sent**: each delta as the pump sent it, with the time its first piece
  was produced (how long text waited in the coalescing buffer);
* **rendered**: the time the view's acknowledgement arrived back in the
  kernel (so it includes the return trip), with the render time it reported.

:meth:`Trace.plot` draws the story a student needs: a staircase of text
produced against the (coarser) staircase of text sent and rendered, with a
tick per flush. It uses matplotlib, so it also shows in a static export.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .stream import Stream


@dataclass(frozen=True)
class DeltaTrace:
    """One delta: seq, when its first piece was produced, sent, acknowledged."""

    seq: int
    chars: int
    produced: float
    sent: float
    acked: float | None
    render_ms: float | None


@dataclass(frozen=True)
class Trace:
    """Produced / sent / rendered timeline of one reply (seconds from start)."""

    id: str
    status: str
    pieces: list[tuple[float, int]]
    deltas: list[DeltaTrace]

    @classmethod
    def of(cls, stream: Stream) -> Trace:
        start, pieces, flushes = stream.timeline()
        t0 = start if start is not None else (pieces[0][0] if pieces else 0.0)
        return cls(
            id=stream.id,
            status=stream.status,
            pieces=[(t - t0, n) for t, n in pieces],
            deltas=[
                DeltaTrace(f.seq, f.chars, f.first_piece_at - t0, f.sent_at - t0,
                           None if f.acked_at is None else f.acked_at - t0, f.render_ms)
                for f in flushes
            ],
        )

    def rows(self) -> list[dict[str, Any]]:
        """One dict per delta, with its buffer wait and render lag in ms."""
        out = []
        for d in self.deltas:
            out.append({
                "seq": d.seq,
                "chars": d.chars,
                "produced_s": round(d.produced, 4),
                "sent_s": round(d.sent, 4),
                "acked_s": None if d.acked is None else round(d.acked, 4),
                "buffer_wait_ms": round((d.sent - d.produced) * 1000, 2),
                "ack_lag_ms": None if d.acked is None else round((d.acked - d.sent) * 1000, 2),
                "render_ms": d.render_ms,
            })
        return out

    def plot(self, ax: Any = None, *, title: str | None = None) -> Any:
        """Draw the timeline with matplotlib; returns the figure."""
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("Trace.plot needs matplotlib: pip install matplotlib") from exc
        if ax is None:
            fig, ax = plt.subplots(figsize=(8, 3.6))
        else:
            fig = ax.figure
        px, py = _cumulative(self.pieces)
        ax.step(px, py, where="post", color="#999999", lw=1.2, label="produced (pieces)")
        sx, sy = _cumulative([(d.sent, d.chars) for d in self.deltas])
        ax.step(sx, sy, where="post", color="#1f77b4", lw=2, label="sent (deltas)")
        acked = [(d.acked, d.chars) for d in self.deltas if d.acked is not None]
        if acked:
            rx, ry = _cumulative(acked)
            ax.step(rx, ry, where="post", color="#2ca02c", lw=2, ls="--",
                    label="rendered (acked)")
        for d in self.deltas:
            ax.axvline(d.sent, color="#1f77b4", alpha=0.12, lw=0.8)
        ax.set_xlabel("seconds since generation started")
        ax.set_ylabel("characters")
        ax.set_title(title or f"{self.id}: {len(self.pieces)} pieces in {len(self.deltas)} deltas "
                              f"({self.status})")
        ax.legend(loc="upper left", frameon=False)
        ax.grid(alpha=0.25)
        fig.tight_layout()
        return fig


def _cumulative(points: list[tuple[float, int]]) -> tuple[list[float], list[int]]:
    xs, ys, total = [0.0], [0], 0
    for t, n in sorted(points):
        total += n
        xs.append(t)
        ys.append(total)
    return xs, ys
