"""A 1,000-message chat in real JupyterLab (headless Chromium): tests/browser/long_chat.mjs.

Started from a history of model-shaped messages (``benchmarks/_history.py``:
headings, lists, tables, code, math, CJK, emoji), the chat shows its end
first, rendered and in view, while the older messages wait as placeholders
(js/src/lazy.ts) and enter the DOM a chunk per frame; "Copy all" equals
``chat.to_markdown()`` with every message; JupyterLab's search over cell outputs
reaches a message far above and shows it, rendered once the search closes;
scrolling back to the top renders every message that comes into view; and a
question asked at the end streams its answer. The same from
``ChatWidget.load(path)``, then saved with widget state and reopened with no
kernel. Not timed: benchmarks/browser_long_chat.py measures.
Screenshots: test-artifacts/<test>-end.png, <test>-search.png.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, JupyterLab, RunScenario

from nbstream import ChatWidget
from nbstream.sources import ScriptedSource

sys.path.insert(0, str(REPO / "benchmarks"))
from _history import history

pytestmark = pytest.mark.browser

COUNT = 1000
WIDGETS_SETTING = "lab/api/settings/@jupyter-widgets/jupyterlab-manager:plugin"
REPLY = "A fresh answer, at the end of a **long** chat."
QUESTION = "One more question?"
#: the text of m6, an answer far above the end (unique: "Answer 30." differs)
NEEDLE, NEEDLE_ID = "Answer 3.", "m6"


def _cell(make: str) -> str:
    return (
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'benchmarks')!r})\n"
        "from _history import history\n"
        "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        f"source = ScriptedSource({REPLY!r}, rate=200)\n"
        f"chat = {make}\n"
        "chat"
    )


def _expected_markdown() -> str:
    chat = ChatWidget(ScriptedSource(REPLY), messages=history(COUNT))
    try:
        return chat.to_markdown()
    finally:
        chat.close()


@pytest.fixture
def lab_setting(jupyterlab: JupyterLab) -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """Set a JupyterLab user setting through the REST API; put the defaults back afterwards."""
    touched: list[str] = []

    def put(endpoint: str, raw: dict[str, Any]) -> None:
        jupyterlab.api("PUT", endpoint, {"raw": json.dumps(raw)})
        touched.append(endpoint)

    try:
        yield put
    finally:
        for endpoint in touched:
            jupyterlab.api("PUT", endpoint, {"raw": "{}"})


def _check_shown_end_first(first: dict[str, Any]) -> None:
    # the first frame that showed messages showed the end, rendered and in view, with
    # most of the history not in the DOM yet
    assert first["last_id"] == f"m{COUNT}", first
    assert first["last_rendered"] and first["last_in_view"], first
    assert first["in_dom"] < COUNT // 4, first


def test_a_1000_message_chat_renders_scrolls_finds_copies_and_streams(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str,
) -> None:
    path = jupyterlab.write_notebook(
        notebook_name, [_cell(f"ChatWidget(source, messages=history({COUNT}))")])
    r = run_scenario("long_chat", timeout=900, notebook=path, count=COUNT, needle=NEEDLE,
                     needle_id=NEEDLE_ID, question=QUESTION,
                     phases=["copy", "search", "scroll", "ask"])
    _check_shown_end_first(r["first_frame"])
    # then every message in the DOM, most of them placeholders until seen
    settled = r["settled"]
    assert settled["in_dom"] == COUNT and settled["first_id"] == "m1", settled
    assert settled["deferred"] > COUNT * 0.9, settled
    assert settled["at_bottom"] and settled["in_view"][-1] == {"id": f"m{COUNT}", "deferred": False}
    # Copy all == to_markdown(), every message included
    assert r["copied"] == _expected_markdown()
    # JupyterLab's search over outputs reaches m6 and shows it; rendered once the search ends
    s = r["search"]
    assert (s["id"], s["text"]) == (NEEDLE_ID, NEEDLE), s
    assert s["in_view"] and s["visible"], s
    assert NEEDLE in s["rendered_after_text"]
    # scrolled back to the top: every message became its text when it came into view
    sc = r["scroll"]
    assert sc["seen"] == COUNT and sc["stuck"] == [], {k: sc[k] for k in ("seen", "stuck")}
    assert all(not m["deferred"] and m["text"] for m in sc["final"].values())
    assert sum(m["md"] for m in sc["final"].values()) == COUNT // 2  # every answer as Markdown
    assert "Answer 1." in sc["final"]["m2"]["text"] and "#" not in sc["final"]["m2"]["text"][:40]
    # a question at the end streams its answer there
    after = r["after_ask"]
    assert (after["in_dom"], after["last_id"]) == (COUNT + 2, f"m{COUNT + 2}")
    assert after["last_text"].split() == REPLY.replace("**", "").split()
    assert after["at_bottom"]
    # the history has math and code: both chunks were loaded, once each; and Chinese,
    # Japanese and emoji in the placeholders: the glyph warmer (js/src/glyphs.ts), which
    # laid them out and left nothing behind
    assert sorted(r["chunk_loads"]) == ["glyphs", "highlight", "math"]
    assert r["warm_boxes"] == 0
    print(json.dumps({k: r[k] for k in ("first_frame", "shown_ms", "long_tasks")}, indent=1))
    print(json.dumps({k: sc[k] for k in ("steps", "frames_to_render", "frame_gaps_over_50ms",
                                         "max_frame_gap_ms")}))


def test_a_1000_message_chat_from_a_file_then_from_the_saved_notebook(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str,
    lab_setting: Callable[[str, dict[str, Any]], None],
) -> None:
    lab_setting(WIDGETS_SETTING, {"saveState": True})
    saved = jupyterlab.root_dir / f"{Path(notebook_name).stem}.json"
    chat = ChatWidget(ScriptedSource(REPLY), messages=history(COUNT))
    try:
        chat.save(saved)
    finally:
        chat.close()
    path = jupyterlab.write_notebook(
        notebook_name, [_cell(f"ChatWidget.load({str(saved)!r}, source)")])
    r = run_scenario("long_chat", timeout=900, notebook=path, count=COUNT, phases=["copy"],
                     save_and_reopen=True)
    expected = _expected_markdown()
    _check_shown_end_first(r["first_frame"])
    assert r["copied"] == expected
    # reopened with no kernel: shown from the saved state, the end first, all of it copied
    again = r["reopened"]
    _check_shown_end_first(again["first_frame"])
    assert again["settled"]["in_dom"] == COUNT
    assert again["copied"] == expected
