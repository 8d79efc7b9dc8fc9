"""The kernel benchmark (benchmarks/kernel_bench.py) on a tiny configuration, so it cannot rot.

It asserts that the harness measures what it says (counts, completeness, one
way against another), never timings: the machine may be loaded.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

from nbstream.sources import ScriptedSource

# the benchmarks are scripts, not a package
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _harness as H


class _NoWait:
    """A cancel event that records how long the source asked to wait, and never waits."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def wait(self, timeout: float) -> bool:
        self.asked.append(timeout)
        return False

    def is_set(self) -> bool:
        return False


def test_schedule_is_scripted_sources_schedule() -> None:
    # with a clock stuck at 0, ScriptedSource asks to wait exactly until each piece is due
    cancel = _NoWait()
    text = "".join(f" w{i}" for i in range(50))
    src = ScriptedSource(text, rate=100, jitter=0.3, seed=7, clock=lambda: 0.0)
    pieces: list[str] = []
    src.generate([], pieces.append, cancel)  # type: ignore[arg-type]
    assert "".join(pieces) == text and len(pieces) == 50
    expected = H.schedule(50, 100, 0.3, 7)
    assert cancel.asked == pytest.approx(expected[1:])


def test_messages_are_read_as_the_browser_would() -> None:
    assert H.last_index(" w0 w1 w12") == 12
    assert H.last_index("<p>w3 w4</p>\n") == 4
    assert H.last_index('{"name":"Row00237"}') == -1  # not a piece
    assert H.last_index("") == -1
    delta = {"comm_id": "c", "data": {"method": "custom",
                                      "content": {"kind": "delta", "id": "m2", "seq": 3,
                                                  "text": " w7 w8"}}}
    assert H.extract("comm_msg", delta) == ("c", 8, False)
    state = {"comm_id": "c", "data": {"method": "update", "state": {"conversation": [
        {"role": "user", "text": "go w99"},
        {"role": "assistant", "text": " w0 w1", "status": "done"}]}}}
    assert H.extract("comm_msg", state) == ("c", 1, True)
    keys = {"comm_id": "c", "data": {"method": "update", "state": {
        "m2.4": [["reasoning", " w5"], ["answer", " w6 w7"]],
        "m2": {"role": "assistant", "seq": 4, "status": "done", "stats": {}}, "live": {}}}}
    assert H.extract("comm_msg", keys) == ("c", 7, True)
    keys = {"comm_id": "c", "data": {"method": "update", "state": {"m2.1": " w0", "live": {}}}}
    assert H.extract("comm_msg", keys) == ("c", 0, False)
    html = {"comm_id": "h", "data": {"method": "update", "state": {"value": " w0 w5"}}}
    assert H.extract("comm_msg", html) == ("h", 5, False)
    update = {"data": {"text/markdown": " w0 w1 w2", "text/plain": "<Markdown>"},
              "transient": {"display_id": "d"}}
    assert H.extract("update_display_data", update) == ("d", 2, False)


@pytest.mark.kernel
def test_harness_runs_nbstream_and_a_naive_way_through_a_real_server() -> None:
    cfg = H.Config(ways=("nbstream", "html"), rates=(1000,), streams=(2,), duration=0.3,
                   budget=10, idle_probes=2, control=False, drain_quiet=0.3)
    rows, skipped = H.run_matrix(cfg, progress=lambda _line: None)
    assert not skipped
    assert [(r["way"], r["pass"]) for r in rows] == [
        ("nbstream", "wire"), ("nbstream", "probe"), ("html", "both")]
    agg: dict[str, dict[str, Any]] = {r["way"]: r for r in H.aggregate(rows)}
    nb, naive = agg["nbstream"], agg["html"]
    assert nb["errors"] == [] and naive["errors"] == []
    n = cfg.pieces(1000)

    # nbstream: everything the kernel sent went through the server, and the whole text shows
    assert nb["sent"] == nb["recv"] > 0
    assert nb["lost"] == nb["lost_queue"] == nb["lost_limit"] == nb["warnings"] == 0
    assert nb["complete"] == 2 and nb["shown"] == 1.0 and nb["final_text_ok"]
    assert nb["deltas_sent"] + nb["publishes"] == nb["sent"]
    # the naive way: one message per piece per stream, each carrying the whole text so far
    assert naive["sent"] == 2 * n
    assert naive["bytes_x_text"] > 20
    # the comparison the benchmark exists for
    assert nb["sent"] * 5 < naive["sent"]
    assert nb["sent_bytes"] * 5 < naive["sent_bytes"]

    # lag and probes were measured; the naive loop's probe waited for the cell
    for r in (nb, naive):
        assert math.isfinite(r["lag_p50"]) and r["lag_p50"] > -5  # ms; a piece may be 1 ms early
        assert r["lag_p95"] >= r["lag_p50"]
        assert r["probe_n"] >= 1 and r["idle_p50"] > 0
    assert nb["probe_n"] > naive["probe_n"] == 1
    assert naive["probe_p50"] > naive["idle_p50"]


@pytest.mark.server
def test_http_reading_bench_runs_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/http_reading.py, tiny: both ways read every piece (one_round raises
    otherwise) and the table prints. Never its values."""
    import http_reading

    assert http_reading.main(["--streams", "3", "--rate", "500", "--repeat", "1",
                              "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "| shared loop |" in out and "| a loop per reply |" in out, out
