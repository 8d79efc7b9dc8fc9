"""A few hundred replies in one kernel with a view attached, cleared between batches
(benchmarks/soak.py, scaled down): nothing may grow without bound.

Counts where counts exist (threads, nbstream streams alive, the pump's channels, the
widget's DOM nodes and event listeners; the page's listeners grow at most once), and for the rest (Python objects,
resident memory, JS heap) a bound far below what one leaked reply per reply would add
(a reply is ~700 characters of Markdown; a leaked Stream keeps dozens of objects and
its text). benchmarks/soak.py runs thousands and prints the slopes.
"""

from __future__ import annotations

import sys
from itertools import pairwise
from pathlib import Path

import pytest
from conftest import JupyterLab

from nbstream.core.pump import KEEP_ENDED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import soak

pytestmark = pytest.mark.browser

BATCHES, PER_BATCH, WARMUP = 6, 40, 1


def test_a_day_in_one_kernel_scaled_down(jupyterlab: JupyterLab) -> None:
    r = soak.run_soak(jupyterlab, BATCHES, PER_BATCH, timeout=900)
    kernel, page = r["kernel"], r["page"]
    assert [k["batch"] for k in kernel] == [p["batch"] for p in page] == list(
        range(1, BATCHES + 1))
    figures = soak.analyse(kernel, page, PER_BATCH, WARMUP)
    print("\n" + "\n".join(f"{k}: {v}" for k, v in figures.items()))
    after = kernel[WARMUP:]
    # counts: flat
    assert max(k["threads"] for k in after) - min(k["threads"] for k in after) <= 1, kernel
    assert all(k["streams_alive"] <= KEEP_ENDED for k in kernel), kernel
    assert len({k["channels"] for k in kernel}) == 1, kernel
    shown = page[WARMUP:]
    assert len({p["chat_nodes"] for p in shown}) == 1, page  # a cleared chat is a cleared chat
    assert len({p["chat_listeners"] for p in shown}) == 1, page
    # the page's count holds JupyterLab's too, which steps up once now and then (seen: +133
    # listeners and +1,481 nodes between two batches, the widget's own unchanged); a leak
    # per reply or per batch grows at every batch
    steps = sum(b["listeners"] > a["listeners"] for a, b in pairwise(shown))
    assert steps <= 1, page
    # the rest: far below a leak of anything per reply (200 replies after the warm-up)
    leaked_per_reply = (BATCHES - WARMUP) * PER_BATCH
    assert figures["objects"]["growth"] < 5 * leaked_per_reply, figures["objects"]
    assert figures["rss_mb"]["growth"] < 10, figures["rss_mb"]
    assert figures["js_heap_mb"]["growth"] < 2, figures["js_heap_mb"]
