"""scripts/gpu_check.py: a CPU smoke run here, the real check on CUDA machines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"


def run(*args: str, timeout: float = 600) -> str:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json", *args], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.model
def test_cpu_smoke_run_measures_bare_and_streamed() -> None:
    import json

    out = run("--size", "tiny", "--new-tokens", "8", "--runs", "1")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert rows and "skipped" not in rows[0], out
    row = rows[0]
    assert row["bare_tok_s"] > 0 and row["streamed_tok_s"] > 0
    assert row["ttft_ms"] > 0
    assert row["dtype"] == "float32" or row["device"] != "cpu"
    together = {r["variant"]: r for r in rows if "at once" in r["variant"]}
    assert set(together) == {"default, 1 at once", "default, 2 at once"}, out
    two = together["default, 2 at once"]
    assert "skipped" not in two, two
    assert two["lane_tok_s"] > 0 and two["batched_tok_s"] > 0 and two["batched_ttft_ms"] > 0
    assert two["batching"].startswith("up to 8 replies together on cpu"), two


@pytest.mark.gpu
def test_gpu_variants() -> None:
    import json

    out = run("--runs", "2")
    rows = {r["variant"]: r for r in map(json.loads, (x for x in out.splitlines()
                                                     if x.startswith("{")))}
    bf16 = rows["bf16 sdpa"]
    assert "skipped" not in bf16, bf16
    assert bf16["dtype"] == "bfloat16" and bf16["device"].startswith("cuda")
    assert bf16["ratio"] > 0.9  # streaming keeps the bare throughput
    # several replies at once: computed together on the GPU, taking turns in 4 bit
    four = rows["bf16 sdpa, 4 at once"]
    assert "skipped" not in four and "together on cuda" in four["batching"], four
    assert four["ratio"] > 1.5, four
    if "4-bit nf4, 2 at once" in rows:
        assert "take turns" in rows["4-bit nf4, 2 at once"]["batching"]
