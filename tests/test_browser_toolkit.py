"""Browser end-to-end tests of the toolkit's layouts: StreamView, Compare, %%stream.

Each runs a notebook in real JupyterLab (headless Chromium, tests/browser/) and
records the answers frame by frame: the text grows over several frames, ends
equal to what the kernel holds, and the layout is the mode's (no input box in
a stream; one column per pane in a compare, each with its own Stop).
Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import JupyterLab, RunScenario

pytestmark = pytest.mark.browser


def _words(text: str | None) -> list[str]:
    return (text or "").split()


def _numbered(prefix: str, n: int, per_line: int = 0) -> str:
    words = [f"{prefix}{i}" for i in range(n)]
    if not per_line:
        return " ".join(words)
    return "\n\n".join(" ".join(words[i:i + per_line]) for i in range(0, n, per_line))


def _check_stream(r: dict, source: str, prompt: str | None) -> None:
    live, end = r["live"], r["end"]
    assert live["mode"] == "stream"
    assert live["inputs"] == 0, "a stream has no input box"
    assert live["stop_visible"], "Stop shows while the answer is live"
    assert end["roots"] == 1, "the view is shown once"
    assert end["prompts"] == ([prompt] if prompt else [])
    assert end["answer_status"] == "done"
    assert not end["stop_visible"], "Stop goes once the answer is done"
    assert end["copy_visible"]
    assert end["status_line"].startswith("done"), end["status_line"]
    # text grew over several frames, only grew, and ends as the source
    growth = r["growth"]
    assert growth["growth_frames"] >= 5, growth
    assert growth["increasing"], growth
    assert _words(end["answer_text"]) == _words(source)
    assert r["kernel"] == {"text": source, "status": "done"}
    # under its maximum height; a long answer is shown from its beginning: the
    # list followed it until its top reached the list's top, stopped there, and
    # offers "Jump to latest" (js/src/scroll.ts)
    assert end["max_height"].endswith("px"), end["max_height"]
    scroll = end["scroll"]
    assert scroll["height"] > scroll["client"], scroll  # long enough to scroll
    assert abs(scroll["top"] - max(scroll["answer"] - 4, 0)) <= 2, scroll
    assert scroll["jump"], scroll
    assert Path(r["streaming_screenshot"]).is_file()


def test_stream_view_from_a_generator(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str
) -> None:
    """``nbstream.stream(gen())`` as a cell's last line: one view, the text grows to the source."""
    source = _numbered("gen", 300, per_line=12)
    path = jupyterlab.write_notebook(
        notebook_name,
        [
            "import time\n"
            "import nbstream\n"
            f"SOURCE = {source!r}\n"
            "def gen():\n"
            "    for i, piece in enumerate(SOURCE.split(' ')):\n"
            "        time.sleep(0.008)\n"  # the scenario: a source that streams slowly
            "        yield piece if i == 0 else ' ' + piece\n"
            "view = nbstream.stream(gen())\n"
            "view",
        ],
    )
    r = run_scenario("toolkit_stream", notebook=path, variable="view")
    _check_stream(r, source, prompt=None)
    print(json.dumps({k: r[k] for k in ("growth", "distinct_lengths", "frames", "max_frame_gap_ms")}))


def test_stream_magic(jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str) -> None:
    """``%load_ext nbstream`` then ``%%stream src``: the prompt and the live answer."""
    source = _numbered("magic", 400, per_line=16)
    path = jupyterlab.write_notebook(
        notebook_name,
        [
            "%load_ext nbstream",
            "from nbstream.sources import ScriptedSource\n"
            f"src = ScriptedSource({source!r}, rate=120)",
            "%%stream src\nTell me a counting story",
        ],
    )
    r = run_scenario("toolkit_stream", notebook=path, variable="_stream")
    _check_stream(r, source, prompt="Tell me a counting story")
    print(json.dumps({k: r[k] for k in ("growth", "distinct_lengths", "frames", "max_frame_gap_ms")}))


def test_compare_two_panes_and_pane_stop(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str
) -> None:
    """Two sources stream at once into their own panes; pane 1's Stop stops only pane 1."""
    a, b = _numbered("alpha", 600, per_line=20), _numbered("beta", 600, per_line=20)
    path = jupyterlab.write_notebook(
        notebook_name,
        [
            "from nbstream import Compare\n"
            "from nbstream.sources import ScriptedSource\n"
            f"A, B = {a!r}, {b!r}\n"
            "cmp = Compare([ScriptedSource(A, rate=100), ScriptedSource(B, rate=100)],\n"
            "              'Count for me', labels=['alpha-model', 'beta-model'])\n"
            "cmp",
        ],
    )
    r = run_scenario("toolkit_compare", notebook=path, markers=["alpha", "beta"])
    layout = r["layout"]
    assert layout["mode"] == "compare" and layout["grid"] == "grid", layout
    assert layout["labels"] == ["alpha-model", "beta-model"], layout
    assert layout["side_by_side"], layout
    assert layout["inputs"] == 1 and layout["pane_stops"] == 2, layout
    assert layout["prompts_per_pane"] == [1, 1], layout
    assert all(s.startswith("streaming") or s.startswith("waiting")
               for s in r["pane_status_while_streaming"]), r["pane_status_while_streaming"]
    # both grew in the same window, each in its own pane
    both = r["both_streaming"]
    assert both["pane0"]["growth_frames"] >= 3 and both["pane1"]["growth_frames"] >= 3, both
    assert r["cross_talk"]["violations"] == [], r["cross_talk"]
    assert r["cross_talk"]["checked"] > 20, r["cross_talk"]
    assert r["recorded_texts"]["pane0_foreign"] == 0 and r["recorded_texts"]["pane1_foreign"] == 0
    # pane 1 stopped, pane 0 went on to the end
    assert r["pane0_status_when_pane1_stopped"] == "running"
    assert r["pane1_growth_after_stop"] == 0
    assert r["pane0_growth_after_pane1_stop"]["grown"] > 0, r["pane0_growth_after_pane1_stop"]
    end0, end1 = r["end"]
    assert (end0["status"], end1["status"]) == ("done", "stopped")
    assert (end0["pane_status"], end1["pane_status"]) == ("done", "stopped")
    assert end0["stop_disabled"] and end1["stop_disabled"]
    assert _words(end0["text"]) == _words(a)
    k0, k1 = r["kernel"]
    assert (k0["pane"], k0["status"], k0["text"]) == (0, "done", a)
    assert (k1["pane"], k1["status"]) == (1, "stopped")
    assert 0 < len(_words(k1["text"])) < 600
    assert _words(end1["text"]) == _words(k1["text"])
    # a narrow cell stacks the panes, with nothing sticking out sideways
    assert r["narrow"]["stacked"] and r["narrow"]["overflow"] <= 1, r["narrow"]
    print(json.dumps({k: r[k] for k in ("both_streaming", "pane_stop_latency_ms",
                                        "pane0_growth_after_pane1_stop", "frames")}))
