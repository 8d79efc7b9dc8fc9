"""The view is not trusted: malformed or hostile messages (unknown kind, wrong types,
huge payloads, negative or enormous seq, a stop for an unknown id, content that is
not a dict) are ignored, each reason logged once at debug level, and the widget
keeps working. A property test feeds random messages to the handler."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbstream import ChatWidget
from nbstream.sources import ScriptedSource

ANSWER = "a b c"

HOSTILE: list[tuple[Any, str]] = [
    ("not a dict", "content is not a dict"),
    (None, "content is not a dict"),
    ([{"kind": "send", "text": "hi"}], "content is not a dict"),
    ({}, "message without a str kind"),
    ({"kind": 7}, "message without a str kind"),
    ({"kind": "launch_missiles"}, "unknown kind"),
    ({"kind": "send"}, "send without a str text"),
    ({"kind": "send", "text": 42}, "send without a str text"),
    ({"kind": "send", "text": "x" * 2_000_001}, "send of more than 1000000 characters"),
    ({"kind": "send", "text": "   "}, "send of a blank text"),
    ({"kind": "stop", "id": "m999"}, "stop for an unknown id"),
    ({"kind": "stop", "id": ["m1"]}, "stop for an unknown id"),
    ({"kind": "ack", "id": "m2", "seq": -1}, "ack with an invalid seq"),
    ({"kind": "ack", "id": "m2", "seq": 0}, "ack with an invalid seq"),
    ({"kind": "ack", "id": "m2", "seq": 10**30}, "ack with an invalid seq"),
    ({"kind": "ack", "id": "m2", "seq": True}, "ack with an invalid seq"),
    ({"kind": "ack", "id": "m2", "seq": "1"}, "ack with an invalid seq"),
    ({"kind": "ack", "id": None, "seq": 1}, "ack without a valid id"),
    ({"kind": "ack", "id": "m" * 10_000, "seq": 1}, "ack without a valid id"),
    ({"kind": "ack", "id": "m2", "seq": 1, "render_ms": float("nan")},
     "ack with an invalid render_ms"),
    ({"kind": "ack", "id": "m2", "seq": 1, "render_ms": -5}, "ack with an invalid render_ms"),
    ({"kind": "ack", "id": "m2", "seq": 1, "render_ms": float("inf")},
     "ack with an invalid render_ms"),
]


def ignored_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "ignored a view message" in r.getMessage()]


@pytest.mark.parametrize(("content", "reason"), HOSTILE,
                         ids=[reason for _, reason in HOSTILE])
def test_a_hostile_message_is_ignored_and_logged_once(
    content: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="nbstream")
    w = ChatWidget(ScriptedSource(ANSWER, rate=1000))
    for _ in range(3):
        w._on_view_msg(w, content, [])
    records = ignored_records(caplog)
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].levelno == logging.DEBUG and reason in records[0].getMessage()
    assert len(records[0].getMessage()) < 1000  # a huge payload is not copied into the log
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert w.replies == []
    assert w.send("go").wait(10) == ANSWER
    w.close()


def test_a_compare_ignores_a_stop_for_an_unknown_pane(caplog: pytest.LogCaptureFixture) -> None:
    from nbstream import Compare

    caplog.set_level(logging.DEBUG, logger="nbstream")
    c = Compare([ScriptedSource(ANSWER, rate=1000), ScriptedSource(ANSWER, rate=1000)])
    for pane in (2, -1, True, "0", 10**20):
        c._on_view_msg(c, {"kind": "stop", "pane": pane}, [])
    assert len(ignored_records(caplog)) == 1
    assert c.wait(10) == [] and [r.wait(10) for r in c.send("go")] == [ANSWER, ANSWER]
    c.close()


# ------------------------------------------------------------ property test
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)
kinds = st.sampled_from(["hello", "resync", "ack", "send", "stop", "clear", "regenerate",
                         "switch", "edit", "delta", "Send", ""]) | st.text(max_size=10) | json_values
view_messages = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"kind": kinds},
        optional={
            "id": st.sampled_from(["m1", "m2", "m3", "m4"]) | json_values,
            "seq": st.integers(min_value=-(2**70), max_value=2**70) | json_values,
            "render_ms": st.floats() | json_values,
            "text": st.text(max_size=30) | json_values,
            "pane": st.integers() | json_values,
        },
    ),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(messages=st.lists(view_messages, max_size=12))
def test_random_view_messages_never_break_the_widget(
    messages: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger="nbstream")
    w = ChatWidget(ScriptedSource(ANSWER, rate=5000))
    try:
        for m in messages:
            w._on_view_msg(w, m, [])
        # the handler never failed: nothing logged as an error
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        # each reason at most once
        reasons = [r.getMessage().split("(")[1].split(")")[0] for r in ignored_records(caplog)]
        assert len(reasons) == len(set(reasons))
        # a normal send still streams and finishes
        r = w.send("still there?")
        assert r.wait(20) == ANSWER and r.status == "done"
    finally:
        w.close()
