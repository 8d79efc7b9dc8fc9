"""Many views, one frame loop, in real JupyterLab (js/src/scheduler.ts).

Three ChatWidgets, a Compare of two panes and a ``stream()`` output stream the
benchmark corpus (model-shaped Markdown: headings, lists, tables, code, math,
CJK, emoji) at once. With the shipped front end every view renders from one
animation-frame callback: in no frame does nbstream's code run more than one
(counted from the page, by the stack of each ``requestAnimationFrame`` call, not
by the widget's own counters); with each widget's ``debug`` trait set to
``{"frames": "per-view"}`` (the previous way, kept for benchmarks) they do, which shows that the count can tell. Either way
every answer ends complete: the kernel's text is the corpus text sent, and each
view shows what a fresh view of the same widget renders from the whole text.
Counts and order only, no timings.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any

import pytest
from conftest import REPO, JupyterLab, RunScenario

sys.path.insert(0, str(REPO / "benchmarks"))
from _corpus import kernel_source

pytestmark = pytest.mark.browser

PIECES, RATE = 600, 250.0
CHATS = 3


def _cells(debug: dict[str, str]) -> list[str]:
    """Cell 0: three chats and a Compare, with ``debug`` switches; cell 1: every one
    asked, and a stream() output (a StreamView shown by hand when it has switches:
    they must be set before a view renders); cell 2: every widget shown again."""
    setup = (
        kernel_source()
        + "from nbstream import ChatWidget, Compare, StreamView, stream\n"
        "from nbstream.sources import ScriptedSource\n"
        f"P, R = {PIECES}, {RATE}\n"
        f"chats = [ChatWidget(ScriptedSource(corpus_pieces(P, i), rate=R)) for i in range({CHATS})]\n"
        f"cmp = Compare([ScriptedSource(corpus_pieces(P, {CHATS} + k), rate=R) for k in range(2)],\n"
        "              labels=['left', 'right'])\n"
        f"DEBUG = {debug!r}\n"
        "for w in [*chats, cmp]:\n"
        "    w.debug = DEBUG\n"
        "    display(w)"
    )
    sv_source = f"ScriptedSource(corpus_pieces(P, {CHATS + 2}), rate=R), 'go'"
    start = (
        "for c in chats:\n"
        "    c.send('go')\n"
        "cmp.send('go')\n"
        + (f"sv = StreamView({sv_source})\nsv.debug = DEBUG\ndisplay(sv)" if debug
           else f"sv = stream({sv_source})")
    )
    again = "for w in [*chats, cmp, sv]:\n    display(w)"
    return [setup, start, again]


CHECK = (
    "print(_nbs_json.dumps("
    "[c.last.text == corpus_text(P, i) and c.last.status == 'done' for i, c in enumerate(chats)]"
    f" + [r.text == corpus_text(P, {CHATS} + k) and r.status == 'done'"
    " for k, r in enumerate(cmp.last_round)]"
    f" + [sv.text == corpus_text(P, {CHATS + 2}) and sv.status == 'done']))"
)


@pytest.mark.parametrize("frames", ["shared", "per-view"])
def test_views_share_one_frame_loop(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str, frames: str
) -> None:
    path = jupyterlab.write_notebook(
        notebook_name, _cells({} if frames == "shared" else {"frames": "per-view"}))
    r = run_scenario("frames", timeout=240, notebook=path,
                     before=CHATS + 1, streams=CHATS + 3, check_code=CHECK)
    print({k: r[k] for k in ("roots", "widget_frames", "loop")})
    # every answer complete: the kernel holds the corpus text, done
    assert r["kernel"] == [True] * (CHATS + 3), r["kernel"]
    # each view ended showing what a view rendering the whole text at once shows
    assert r["roots"] == CHATS + 2
    streamed, fresh = r["streamed"], r["fresh"]
    assert [len(s) for s in streamed] == [1] * CHATS + [2, 1], streamed
    assert streamed == fresh
    assert all(m["status"] == "done" and len(m["text"]) > 500 for s in streamed for m in s)
    # the corpus rendered as Markdown: headings, lists, tables, code in the views
    blocks = {b for s in streamed for m in s for b in m["blocks"]}
    assert {"h2", "ul", "div", "p"} <= blocks, blocks
    wf = r["widget_frames"]
    assert wf["callbacks"] > 20, wf  # the views rendered from animation frames
    if frames == "shared":
        # one loop: never two nbstream callbacks in a frame; the loop served every view
        assert wf["max_per_frame"] == 1 and wf["frames_with_more"] == 0, wf
        assert r["loop"] is not None and r["loop"]["views"] == CHATS + 2, r["loop"]
        assert r["loop"]["max_callbacks_per_frame"] == 1, r["loop"]
        assert r["loop"]["runs"] > r["loop"]["render_frames"], r["loop"]  # several views a frame
    else:
        # a loop per view: the count sees several callbacks in one frame
        assert wf["max_per_frame"] >= 2 and wf["frames_with_more"] > 0, wf


def _acks_bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "browser_acks", REPO / "benchmarks" / "browser_acks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_many_streams_bench_runs_end_to_end(jupyterlab: JupyterLab) -> None:
    """benchmarks/browser_acks.py, tiny: both frame loops, the corpus, every figure there.

    Checks that the benchmark still measures what it says (counts, completeness, the
    tables print), never its values (timing targets live in the benchmark)."""
    bench = _acks_bench()
    args = argparse.Namespace(widgets=2, pieces=200, rate=250.0, interval=None, text="corpus",
                              ack_gap=None, idle_probes=2, trace=True, profile=False,
                              viewport_height=None)
    results = {m: [bench.run_round(jupyterlab, m, 0, args, None)] for m in ("shared", "per-view")}
    for mode, (r,) in results.items():
        # run_round itself raises unless both views ended showing all of their text
        assert r["statuses"] == ["done", "done"], r["statuses"]
        assert r["probe_idle_ms"]["n"] == 2 and r["probe_stream_ms"]["n"] >= 0
        assert r["renders"] > 0 and r["received_comm"] > 0, r
        assert "busy_ms_in_stream_by_event" in r["trace"], r["trace"]
        assert (r["page_loop"] is not None) == (mode == "shared"), r["page_loop"]
    assert results["shared"][0]["widget_raf_max_per_frame"] == 1
    assert results["shared"][0]["page_loop"]["views"] == 2
    printed = bench.table(results)
    assert "| shared " in printed and "| per-view " in printed, printed
    assert "| shared " in bench.table(results, bench.LOOP_COLUMNS)
    assert "Layerize" in bench.steps_table(results)
