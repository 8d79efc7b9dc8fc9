"""Browser end-to-end tests: real JupyterLab in headless Chromium.

Each test writes a notebook into the session's JupyterLab root and runs a Node
scenario from tests/browser/ against it (see tests/conftest.py and
tests/browser/lab.mjs). Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import pytest
from conftest import JupyterLab, RunScenario

pytestmark = pytest.mark.browser


def test_lab_smoke(jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str) -> None:
    """The harness itself: open a notebook, run its cells, read an output."""
    path = jupyterlab.write_notebook(notebook_name, ['print("hi")', "1 + 1"])
    result = run_scenario("smoke", notebook=path, needle="hi")
    assert result["ok"] is True
    assert result["outputs"][0].strip() == "hi"
    assert "2" in result["outputs"][1]
    # how long the keyboard run took (result["keyboard_output_ms"]) is a figure, not a test
    assert not [line for line in result["console"] if line.startswith("external request")]


def _chat_cell(words: int, rate: float) -> str:
    return (
        "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        f'TEXT = " ".join(f"word{{i}}" for i in range({words}))\n'
        f"chat = ChatWidget(ScriptedSource(TEXT, rate={rate}))\n"
        "chat"
    )


def _words(text: str | None) -> list[str]:
    return (text or "").split()


def _full_length(words: int) -> int:
    return len(" ".join(f"word{i}" for i in range(words)))


def test_stream_grows_then_stops(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str
) -> None:
    """Type a prompt, press Enter, see the answer grow over frames; Stop freezes it."""
    words = 400
    path = jupyterlab.write_notebook(notebook_name, [_chat_cell(words, rate=40.0)])
    r = run_scenario("stream_stop", notebook=path, prompt="Hello there", grow_ms=1500, after_ms=500)
    assert r["status_before_stop"] == "running"
    assert r["distinct_lengths"] >= 3, r["lengths"]
    assert r["increasing"], r["lengths"]
    assert r["final_status"] == "stopped"
    assert r["sampled_after_stop_ms"] >= 500
    assert r["growth_after_stop"] == 0
    assert 0 < r["final_length"] < _full_length(words)
    # the page shows exactly the partial text the kernel kept
    kernel = r["kernel_message"]
    assert kernel.get("status") == "stopped", kernel
    assert _words(r["dom_text"]) == _words(kernel["content"])
    counters = r["counters_after"]
    assert counters is not None, "the .nbs-chat root has no __nbstream counters"
    assert set(counters) >= {"renders", "frames", "deltas", "acks", "resyncs"}, counters
    assert counters["deltas"] > 0 and counters["renders"] > 0, counters


def test_kernel_free_while_streaming(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str
) -> None:
    """A long answer streams while another cell runs and prints at once."""
    path = jupyterlab.write_notebook(
        notebook_name, [_chat_cell(2000, rate=100.0), 'print("probe-ok")']
    )
    r = run_scenario(
        "probe_while_streaming",
        notebook=path,
        chat_cell=0,
        probe_cell=1,
        needle="probe-ok",
        prompt="Go on",
    )
    # the order is the test: the probe printed while the answer was still running
    assert r["status_when_probe_seen"] == "running"
    assert r["length_when_probe_seen"] > 0
    assert r["growth_after_probe"] > 0


@pytest.mark.model
def test_quickstart_streams_a_real_answer(
    jupyterlab: JupyterLab, run_scenario: RunScenario
) -> None:
    """notebooks/quickstart.ipynb on the embedded model: run all, ask, watch, stop."""
    notebook = "notebooks/quickstart.ipynb"
    if not (jupyterlab.root_dir / notebook).is_file():
        pytest.fail(f"{notebook} is missing")
    r = run_scenario(
        "quickstart",
        timeout=480,
        notebook=notebook,
        question="Tell me a long story about a lighthouse keeper and a storm.",
        min_lengths=4,
        grow_ms=3000,
    )
    assert r["distinct_lengths"] >= 3, r["text"]
    assert r["increasing"]
    assert any(ch.isalpha() for ch in r["text"]), r["text"]
    assert r["status_before_stop"] == "running"
    assert r["final_status"] == "stopped"
    assert r["growth_after_stop"] == 0
    kernel = r["kernel_message"]
    assert kernel.get("status") == "stopped", kernel
    assert kernel.get("content"), kernel
