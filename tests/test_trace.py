"""Per-reply figures and the produced / sent / rendered trace."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from _wait import wait_until
from _wire import delta_keys, send_from_view

from nbstream import ChatWidget
from nbstream.sources import IteratorSource, ScriptedSource
from nbstream.sources.base import ChatMessage

TEXT = " ".join(f"t{i}" for i in range(200))


def test_trace_accounts_for_every_character_and_orders_stages() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=1000), interval=0.02)
    r = w.send("go")
    r.wait(10)
    tr = r.trace()
    assert sum(n for _, n in tr.pieces) == len(TEXT)
    assert sum(d.chars for d in tr.deltas) == len(TEXT)
    assert [d.seq for d in tr.deltas] == list(range(1, len(tr.deltas) + 1))
    for d in tr.deltas:
        assert d.produced <= d.sent  # text waits in the buffer, never the other way
    rows = tr.rows()
    # a row per delta, with how long its first piece waited in the buffer
    assert [(row["seq"], row["chars"], row["buffer_wait_ms"]) for row in rows] == [
        (d.seq, d.chars, round((d.sent - d.produced) * 1000, 2)) for d in tr.deltas]
    stats = r.stats
    assert stats["pieces"] == 200 and stats["chars"] == len(TEXT)
    assert stats["flushes"] == len(tr.deltas)
    # the rate is the pieces over the generation's duration (both measured here)
    assert stats["pieces_per_s"] == pytest.approx(200 / (stats["duration_ms"] / 1000), rel=0.01)
    assert stats["gap_p50_ms"] <= stats["gap_p95_ms"] <= stats["gap_max_ms"]


def test_the_leading_edge_goes_at_once() -> None:
    """The first piece is sent without waiting for more text or for an interval."""
    gate = threading.Event()

    def first_then_wait(_: Sequence[ChatMessage]) -> Iterator[str]:
        yield "first"
        gate.wait(60)
        yield " second"

    # an interval far longer than the wait below: only a leading edge can arrive in time
    w = ChatWidget(IteratorSource(first_then_wait), interval=120)
    r = w.send("go")
    try:
        wait_until(lambda: r.trace().deltas, 60, "the first delta")
        (first,) = r.trace().deltas
        assert (first.seq, first.chars) == (1, len("first"))
    finally:
        gate.set()
    assert r.wait(30) == "first second"


def test_acks_show_up_as_render_times_in_trace_and_stats() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=500), interval=0.02)
    sent: list[dict[str, object]] = []

    def fake_view(msg: dict[str, Any], buffers: object = None) -> None:
        for mid, seq, _ in delta_keys(msg):  # a view renders each delta and acks it
            sent.append({"id": mid, "seq": seq})
            send_from_view(w, {"kind": "ack", "id": mid, "seq": seq, "render_ms": 1.5})

    w._send = fake_view  # type: ignore[method-assign]
    r = w.send("go")
    r.wait(10)
    tr = r.trace()
    acked = [d for d in tr.deltas if d.acked is not None]
    assert len(acked) == len(sent) > 3
    assert all(d.acked >= d.sent for d in acked)  # type: ignore[operator]
    assert r.stats["render_ms_p50"] == 1.5
    assert r.stats["acked"] == len(sent)


def test_plot_draws_the_three_stages() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=2000))
    r = w.send("go")
    r.wait(10)
    fig = r.plot()
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["produced (pieces)", "sent (deltas)"]
    assert "200 pieces" in fig.axes[0].get_title()


def test_logging_is_quiet_by_default_and_debug_logs_stages(capsys: object) -> None:
    import io

    import nbstream

    w = ChatWidget(ScriptedSource("a b c d e f", rate=100))  # 10 ms gaps: real deltas
    w.send("go").wait(5)
    out = capsys.readouterr()  # type: ignore[attr-defined]
    assert out.err == "" and out.out == ""
    buf = io.StringIO()
    nbstream.set_debug(True, buf)
    try:
        w.send("again").wait(5)
        # the pump logs the end when it settles the stream, after wait() returned
        wait_until(lambda: "m4 ended: done" in buf.getvalue(), message="the end logged")
    finally:
        nbstream.set_debug(False)
    text = buf.getvalue()
    assert "delta m4#1" in text
    assert "m4 ended: done" in text
