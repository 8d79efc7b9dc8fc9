"""A widget's ``debug`` trait: the debugging switches its views read when they render
(ViewDebug in nbstream/widgets/protocol.py), with which the benchmarks measure the
previous ways side by side with the shipped ones. Checked when set, synced to the
views; the benchmarks' notebooks set it (not a global of the page). What the views do
with each switch: js/tests/debug.test.ts."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from _wire import Wire
from conftest import REPO

from nbstream import ChatWidget, Compare, StreamView
from nbstream.sources import ScriptedSource
from nbstream.widgets.protocol import ViewDebug

SRC = ScriptedSource("ok", rate=1000)


def test_as_shipped_by_default_and_synced_to_the_views() -> None:
    w = ChatWidget(SRC)
    wire = Wire(w)
    assert w.debug == {} and w.get_state()["debug"] == {}
    w.debug = {"markdown": "full", "acks": "every-frame", "ack_gap_ms": 250, "sized": "at-once"}
    sent = [m["state"]["debug"] for m in wire.msgs if "debug" in m.get("state", {})]
    assert sent == [{"markdown": "full", "acks": "every-frame", "ack_gap_ms": 250.0,
                     "sized": "at-once"}]
    w.close()


@pytest.mark.parametrize("widget", [
    lambda: ChatWidget(SRC),
    lambda: StreamView(["a"]),
    lambda: Compare([SRC, SRC]),
])
def test_every_widget_has_it(widget: Any) -> None:
    w = widget()
    w.debug = {"sized": "at-once"}
    assert w.get_state()["debug"] == {"sized": "at-once"}
    w.close()


@pytest.mark.parametrize(("value", "error", "match"), [
    ({"markdwon": "full"}, ValueError,
     r"ChatWidget\.debug: unknown switch 'markdwon'; the switches are markdown, acks, "),
    ({"markdown": "fast"}, ValueError, r"ChatWidget\.debug: Invalid enum value 'fast'"),
    ({"acks": 1}, TypeError, r"ChatWidget\.debug: Expected `str`, got `int` - at `\$\.acks`"),
    ({"ack_gap_ms": -1}, ValueError, r"ack_gap_ms"),
    ({"ack_gap_ms": True}, TypeError, r"ack_gap_ms"),
])
def test_a_bad_switch_is_refused_naming_it(value: Any, error: type[Exception], match: str
                                           ) -> None:
    w = ChatWidget(SRC)
    with pytest.raises(error, match=match):
        w.debug = value
    assert w.debug == {}  # unchanged
    w.close()


def test_the_switches_are_those_the_protocol_declares() -> None:
    assert set(ViewDebug.__annotations__) == {"markdown", "acks", "ack_gap_ms", "sized",
                                              "lazy", "frames"}


# --------------------------------------------------------------- the benchmarks
def _run_cell(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"display": lambda *a: None}
    exec(compile(code, "<benchmark cell>", "exec"), namespace)
    return namespace


def test_the_benchmarks_switch_their_widgets_in_the_notebook() -> None:
    sys.path[:0] = [str(REPO / "benchmarks")]
    try:
        import browser_acks
        import browser_long_chat
        import browser_markdown
        import browser_responsiveness
    finally:
        del sys.path[0]
    cells = browser_markdown.notebook_cells(
        20, 1000.0, "t.json", None, browser_markdown.mode_debug("full", 250))
    chat = _run_cell(cells[0])["chat"]
    assert chat.debug == {"markdown": "full", "ack_gap_ms": 250.0}
    chat.close()
    assert browser_markdown.mode_debug("incremental") == {}
    for name, variant in browser_responsiveness.VARIANTS.items():
        chat = _run_cell(browser_responsiveness.notebook_cells(20, 1000.0, variant["debug"])[0])[
            "chat"]
        assert chat.debug == variant["debug"], name
        chat.close()
    assert browser_markdown.mode_debug("per-view") == {"frames": "per-view"}
    for mode, expected in (("every-frame-acks", {"acks": "every-frame"}), ("shared", {}),
                           ("per-view", {"frames": "per-view"})):
        chats = _run_cell(browser_acks.notebook_cells(2, 5, 1000.0, mode, text="words")[0])[
            "chats"]
        assert [c.debug for c in chats] == [expected] * 2, mode
        for c in chats:
            c.close()
    for mode, expected in (("at-once", {"lazy": "off"}), ("lazy", {})):
        chat = _run_cell(browser_long_chat.open_cell(4, mode))["chat"]
        assert chat.debug == expected and len(chat.messages) == 4
        chat.close()
        chat = _run_cell(browser_long_chat.stream_cells(4, mode, 20, 1000.0, "t.json")[0])["chat"]
        assert chat.debug == expected and len(chat.messages) == 4
        chat.close()
