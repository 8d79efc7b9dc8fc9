"""benchmarks/batched_generation.py stays runnable: a short run on the embedded model prints
both ways for each count, the same greedy tokens batched as taking turns, and the summary
lines (the figures themselves are the benchmark's, never asserted here)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import batched_generation as bg  # noqa: E402


@pytest.mark.model
def test_a_short_run_prints_both_ways_for_each_count(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    out = tmp_path / "raw.json"
    assert bg.main(["--tokens", "3", "--rounds", "1", "--counts", "1,2",
                    "--json", str(out)]) == 0
    text = capsys.readouterr().out
    rows = re.findall(r"^\| (\d) \| (lane|batched) \| [\d.]+ \| .*\| (\d)/(\d) \|$", text,
                      re.MULTILINE)
    assert [(k, way) for k, way, _, _ in rows] == [
        ("1", "lane"), ("1", "batched"), ("2", "lane"), ("2", "batched")]
    assert all(same == of for _, _, same, of in rows)  # greedy: the same tokens both ways
    assert "up to 2 replies together on cpu" in text  # the batched way really batched
    assert "load average at start:" in text and "load average at end:" in text
    assert "one reply, decoding rate against a bare generate()" in text
    raw = json.loads(out.read_text())
    assert set(raw["summary"]) == {"lane_1", "batched_1", "lane_2", "batched_2"}
    assert all(v["aggregate"] > 0 for v in raw["summary"].values())
