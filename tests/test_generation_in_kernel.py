"""benchmarks/generation_in_kernel.py stays runnable: its order schedule is fair, and a
short run in two real kernels on the embedded model gives every way's rate on the very
same prompt (the figures themselves are the benchmark's, never asserted here)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import generation_in_kernel as gik  # noqa: E402


def test_each_way_takes_each_place_equally_often() -> None:
    ways = list(gik.WAYS)
    n = len(ways)
    schedule = gik.orders(ways, 2 * n)
    assert all(sorted(order) == sorted(ways) for order in schedule)
    for place in range(n):
        assert Counter(order[place] for order in schedule) == dict.fromkeys(ways, 2)
    # and no way always follows the same one
    followers = {w: {o[o.index(w) + 1] for o in schedule if o.index(w) + 1 < n} for w in ways}
    assert all(len(f) >= 2 for f in followers.values()), followers


@pytest.mark.kernel
@pytest.mark.model
def test_a_short_run_measures_every_way_in_two_kernels() -> None:
    lines: list[str] = []
    got = gik.run(tokens=3, rounds=1, model=None, progress=lines.append)
    assert set(got["rates"]) == set(gik.WAYS)
    assert all(len(v) == 1 and v[0] > 0 for v in got["rates"].values())
    assert len(lines) == 1 and lines[0].startswith("round 1 (")
    text = gik.report(got, 3)
    for way in gik.WAYS:
        assert way in text
    assert "widget, own kernel       median" in text
