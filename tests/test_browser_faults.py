"""What happens around a live chat in a real browser (#22): its kernel goes away, or the
page's connection to the server drops (test_a_dropped_connection_loses_nothing).

**The kernel goes away mid-answer** (tests/browser/kernel_gone.mjs): restarted or shut
down through the server's REST API (as another tab or a terminal would: the page is
told least that way), in JupyterLab and in Notebook 7; or the notebook is saved with
widget state mid-stream and reopened on a fresh kernel that never knew the widget. The
view must stop saying "streaming", keep the text it showed, say plainly that it is not
connected and that running the cell again gives a live chat, offer nothing that asks
the kernel (Copy all still works), and show no error dialog (js/src/connection.ts).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from conftest import JupyterLab, RunScenario
from test_browser_flow import WIDGETS_SETTING, _chat_cell, _numbered, lab_setting

pytestmark = pytest.mark.browser

__all__ = ["lab_setting"]  # a fixture, used by name

#: js/src/messages.ts DISCONNECTED_LABEL
CUT_OFF = "cut off: not connected to the kernel"
RUN_AGAIN = "Run its cell again for a live chat."


@pytest.mark.parametrize(("how", "front_end"), [
    ("restart", "lab"),
    ("shutdown", "lab"),
    ("restart", "notebook7"),
    ("reopen", "lab"),
])
def test_the_kernel_goes_away_mid_answer(
    jupyterlab: JupyterLab,
    run_scenario: RunScenario,
    notebook_name: str,
    lab_setting: Callable[[str, dict[str, Any]], None],
    how: str,
    front_end: str,
) -> None:
    if how == "reopen":
        lab_setting(WIDGETS_SETTING, {"saveState": True})
    # 4,000 words at 100/s: 40 s, so the answer is live when the kernel goes
    path = jupyterlab.write_notebook(notebook_name, [_chat_cell(_numbered("r", 4000), rate=100)])
    r = run_scenario("kernel_gone", timeout=180, notebook=path, how=how,
                     notebook7=front_end == "notebook7")
    print(f"\n{how} ({front_end}): lost {r['lost_after_ms']} ms after; "
          f"{json.dumps(r['gone'])}")
    live, gone = r["live"], r["gone"]
    assert live["connection"] == "live" and live["label"].startswith("streaming"), live
    assert live["busy"] and not live["input_disabled"]
    # not streaming any more: cut off, not busy, no "working" indicator
    assert gone["connection"] == "lost"
    assert gone["label"] == CUT_OFF and gone["cut_off"]
    assert not gone["busy"] and not gone["waiting"]
    # the text it showed is kept (what arrived before the kernel was gone)
    assert gone["chars"] >= r["chars_before"] > 0
    # said plainly, with what to do. A kernel shut down from elsewhere tells the page
    # nothing: the view finds no kernel answering it; JupyterLab may later learn that the
    # kernel is dead (its reconnection fails), and the view then says so
    why = {"restart": ("The kernel restarted",),
           "shutdown": ("No kernel is running this chat", "The kernel stopped"),
           "reopen": ("No kernel is running this chat",)}[how]
    for said in (gone, r["later"]):
        assert said["offline"].startswith(why) and said["offline"].endswith(RUN_AGAIN), said
    # nothing that asks the kernel is offered; copying still works; no error dialog
    assert gone["input_disabled"] and gone["send_disabled"] and gone["stop_disabled"]
    assert gone["copy_all_disabled"] is False
    assert gone["dialogs"] == 0
    # and nothing else changes afterwards
    assert {**r["later"], "offline": None} == {**gone, "offline": None}, r["later"]


@pytest.mark.parametrize("variant", ["mid", "end"])
def test_a_dropped_connection_loses_nothing(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str, variant: str,
) -> None:
    """The page goes offline for 3 s and JupyterLab reconnects (tests/browser/connection_drop.mjs):
    the answer ends complete, in order, with no duplicate, and with the right status.

    ``mid``: back while the answer streams (the server replays what it kept meanwhile).
    ``end``: the answer ends while offline and the message carrying its final meta is
    thrown away in the page when the server replays it: the view still ends right
    (JupyterLab asks the widget's whole state again on reconnection; the view's hello
    on reconnection is the second way, unit-tested in test_widget.py).
    """
    n, rate = (3000, 100) if variant == "mid" else (400, 200)
    text = _numbered("d", n)
    path = jupyterlab.write_notebook(notebook_name, [_chat_cell(text, rate=rate)])
    r = run_scenario("connection_drop", timeout=180, notebook=path, variant=variant)
    print(f"\ndropped connection ({variant}): {json.dumps(r)}")
    assert r["link"][0] != "connected" and "connected" in r["link"], r["link"]
    assert r["status_while_offline"] == "running"
    if variant == "end":
        assert r["dropped_final_meta"] and r["dropped_messages"] > 0  # really lost
    # never a gap, a duplicate or a shrink; the end is exactly the kernel's
    assert r["prefix"]["ok"] and r["prefix"]["checked"] >= (10 if variant == "mid" else 2), \
        r["prefix"]
    assert r["kernel_status"] == r["dom_status"] == "done"
    assert r["kernel_words"] == n and r["dom_equals_kernel"], (r["dom_words"], r["kernel_words"])
    assert r["dom_connection"] == "live"


def test_32_streams_at_once_from_one_server_through_one_kernel(jupyterlab: JupyterLab) -> None:
    """8 Compare widgets x 4 panes stream from one server at once (benchmarks/many_streams.py,
    one round): every answer complete, in order, done, on the page and in the kernel. The
    end lags and the probe are the benchmark's figures, printed, not asserted."""
    import sys
    from pathlib import Path

    from _servers import start_fake_server

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import many_streams

    server = start_fake_server()
    try:
        r = many_streams.run(jupyterlab, server.base_url, widgets=8, panes=4, rate=200.0,
                             repeat=1, name="many-streams-test", probes=1)
    finally:
        server.stop()
    lags = sorted(r["lags_ms"])
    print(f"\n32 streams: end lag median {lags[len(lags) // 2]:.0f} ms, max {lags[-1]:.0f} ms; "
          f"probe {r['probe_during_ms']} ms (idle {r['probe_idle_ms']} ms)")
    assert r["answers"] == 32
    assert r["wrong"] == []
    assert len(r["lags_ms"]) == 32  # every end seen on the page
    # each view acks a round of its 4 panes as one message (AcksMsg), and the kernel took
    # every message (none ignored) and advanced the panes' windows by them
    for v in r["views"]:
        assert v["ignored"] == 0 and v["kernel_acks"] >= 4, v
        assert 1 <= v["ack_msgs"] < v["acks"], v
    print("acks / their messages per widget:", [(v["acks"], v["ack_msgs"]) for v in r["views"]])
    # the page loop heard the clicks and Shift+Enter that ran cells while the answers streamed
    # (it answers a person's input first: js/src/scheduler.ts)
    assert r["loop"] is not None and r["loop"]["inputs"] >= 2, r["loop"]


def test_a_closed_notebook_tab_stops_the_running_reply(
        jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str) -> None:
    """The chat's notebook tab closed mid-answer, its kernel left running (tests/browser/
    tab_closed.mjs): the view says bye while the notebook's session closes, before
    JupyterLab drops the page's kernel connection, and the kernel stops the reply once no
    view came back within the grace (a reply ran to its end for nobody before)."""
    # 4,000 words at 50/s: 80 s, far longer than the scenario
    path = jupyterlab.write_notebook(notebook_name, [_chat_cell(_numbered("c", 4000), rate=50)])
    r = run_scenario("tab_closed", timeout=180, notebook=path)
    print(f"\ntab closed: {json.dumps(r)}")
    assert r["reply"]["status"] == "stopped", r["reply"]
    assert r["reply"]["chars"] > 0
    assert r["page_errors"] == []


@pytest.mark.parametrize("front", ["lab", "notebook7"])
def test_a_closed_browser_page_stops_the_running_reply(
        jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str, front: str) -> None:
    """The chat's browser page closed mid-answer, its kernel left running (tests/browser/
    page_closed.mjs): the view says a page's bye from `pagehide`, and the kernel stops the
    reply once no view came back within the page's grace (a reply ran to its end for
    nobody before). A reload says the same bye and comes back within the grace:
    test_browser_flow.py's reload tests keep their replies running to the end."""
    # 4,000 words at 50/s: 80 s, far longer than the scenario; the page's grace made short
    # here (30 s by default, for a reload to come back on a busy machine)
    cell = ("from nbstream.widgets import presence\npresence.PAGE_GONE_GRACE = 3.0\n"
            + _chat_cell(_numbered("p", 4000), rate=50))
    path = jupyterlab.write_notebook(notebook_name, [cell])
    r = run_scenario("page_closed", timeout=180, notebook=path, notebook7=front == "notebook7")
    print(f"\npage closed ({front}): {json.dumps(r)}")
    assert r["first"]["views"] == 0, r  # the page's bye reached the kernel
    assert r["first"]["status"] == "running", r  # (and the grace had not passed yet)
    assert r["reply"]["status"] == "stopped", r["reply"]
    assert r["reply"]["chars"] > 0


def test_a_removed_view_stops_the_running_reply(
        jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str) -> None:
    """The chat's output cleared mid-answer (tests/browser/view_removed.mjs): its view says
    bye, and the kernel stops the reply once no view came back within the grace."""
    # 4,000 words at 50/s: 80 s, far longer than the scenario
    path = jupyterlab.write_notebook(notebook_name, [_chat_cell(_numbered("t", 4000), rate=50)])
    r = run_scenario("view_removed", timeout=180, notebook=path)
    print(f"\nview removed: {json.dumps(r)}")
    assert r["reply"]["status"] == "stopped", r["reply"]
    assert r["reply"]["chars"] > 0
    assert r["page_errors"] == []
