"""The responsiveness benchmark (benchmarks/browser_responsiveness.py) end to end, tiny.

A short answer streams in JupyterLab and in Notebook 7 while the probe cell
runs from the keyboard; the run is traced. Checks that the script produces
every figure and that its table and trace explanation print, never the
figures' values (timing targets live in the benchmark, not in tests).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from conftest import REPO, JupyterLab

pytestmark = pytest.mark.browser


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "browser_responsiveness", REPO / "benchmarks" / "browser_responsiveness.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_responsiveness_bench_runs_end_to_end(jupyterlab: JupyterLab) -> None:
    bench = _bench()
    results = bench.run_all(
        jupyterlab, ["lab", "notebook7"], ["shipped"], pieces=600, rate=600.0, repeat=1,
        idle_probes=2,
    )
    assert set(results) == {("lab", "shipped"), ("notebook7", "shipped")}
    for (frontend, _variant), runs in results.items():
        (r,) = runs
        assert r["frontend"] == frontend and r["status"] == "done", r
        assert r["chars"] > 0 and r["widget"]["renders"] > 0, r["widget"]
        assert r["probe_idle_ms"]["n"] == 2, r["probe_idle_ms"]
        assert len(r["probes"]["stream"]) == r["probe_stream_ms"]["n"], r["probes"]
        # the long tasks of the stream (none is fine): each over 50 ms, counted once (the
        # browser gives a long task's duration in whole ms: one of 50.0x ms reads 50)
        lt = r["long_tasks"]
        assert isinstance(lt["count"], int) and isinstance(lt["idle_count"], int), lt
        if lt["count"] == 0:
            assert lt["max_ms"] == 0 and lt["total_ms"] == 0, lt
        else:
            assert 50 <= lt["max_ms"] <= lt["total_ms"] + 0.1, lt
        trace = r["trace"]
        assert "error" not in trace, trace
        # the page's main thread was found, and the stream was marked in it
        assert trace["tasks"] > 0 and trace["stream_ms"] is not None, trace
        assert trace["frames_in_stream"]["painted"] > 0, trace["frames_in_stream"]
        assert trace["long_tasks"] == len(trace["tasks_explained"]) or trace["long_tasks"] > 40
    printed = bench.table(results)
    assert "| lab " in printed and "| notebook7 " in printed, printed
    assert "main thread during the stream" in bench.explain(results)
