"""The view is not trusted: malformed or hostile messages (unknown kind, wrong types,
huge payloads, negative or enormous seq, a stop for an unknown id, content that is
not an object) are checked against the protocol's declared types (widgets/wire.py)
and ignored, each reason logged once as a warning (a bounded number of reasons), and
the widget keeps working. Messages go through the comm, as a view sends them
(``send_from_view``). A property test feeds random messages."""

from __future__ import annotations

import logging
import typing
from typing import Any

import pytest
from _wire import send_from_view
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbstream import ChatWidget
from nbstream.sources import ScriptedSource
from nbstream.widgets.protocol import MAX_ACKS
from nbstream.widgets.wire import (
    MAX_LOGGED_REASONS,
    VIEW_MSG_TYPES,
    BadViewMessage,
    parse_view_msg,
)

ANSWER = "a b c"

HOSTILE: list[tuple[Any, str]] = [
    ("not a dict", "content is not an object: a string"),
    (None, "content is not an object: null"),
    ([{"kind": "send", "text": "hi"}], "content is not an object: an array"),
    ({}, "message without a str kind"),
    ({"kind": 7}, "message without a str kind"),
    ({"kind": "launch_missiles"}, "unknown kind"),
    ({"kind": "delta", "id": "m1", "seq": 1, "text": "x"}, "unknown kind"),  # kernel -> view
    ({"kind": "send"}, "send: Object missing required field `text`"),
    ({"kind": "send", "text": 42}, "send: Expected `str`, got `int` - at `$.text`"),
    ({"kind": "send", "text": "x" * 2_000_001},
     "send: Expected `str` of length <= 1000000 - at `$.text`"),
    ({"kind": "send", "text": "   "}, "send of a blank text"),
    ({"kind": "stop", "id": "m999"}, "stop for an unknown id"),
    ({"kind": "stop", "id": ["m1"]}, "stop: Expected `str`, got `array` - at `$.id`"),
    ({"kind": "switch"}, "switch: Object missing required field `id`"),
    ({"kind": "ack", "id": "m2", "seq": -1}, "ack: Expected `int` >= 1 - at `$.seq`"),
    ({"kind": "ack", "id": "m2", "seq": 0}, "ack: Expected `int` >= 1 - at `$.seq`"),
    ({"kind": "ack", "id": "m2", "seq": 10**30}, "ack: Expected `int` <= 9007199254740992"),
    ({"kind": "ack", "id": "m2", "seq": True}, "ack: Expected `int`, got `bool` - at `$.seq`"),
    ({"kind": "ack", "id": "m2", "seq": "1"}, "ack: Expected `int`, got `str` - at `$.seq`"),
    ({"kind": "ack", "id": None, "seq": 1}, "ack: Expected `str`, got `null` - at `$.id`"),
    ({"kind": "ack", "id": "m" * 10_000, "seq": 1},
     "ack: Expected `str` of length <= 256 - at `$.id`"),
    ({"kind": "ack", "id": "m2", "seq": 1, "render_ms": float("nan")},
     "ack: Expected `float` >= 0.0 - at `$.render_ms`"),
    ({"kind": "ack", "id": "m2", "seq": 1, "render_ms": -5},
     "ack: Expected `float` >= 0.0 - at `$.render_ms`"),
    ({"kind": "ack", "id": "m2", "seq": 1, "render_ms": float("inf")},
     "ack: Expected `float` <= 3600000.0 - at `$.render_ms`"),
    # a round of acks (AcksMsg): its entries checked as single acks are, the whole refused
    ({"kind": "acks"}, "acks: Object missing required field `acks`"),
    ({"kind": "acks", "acks": []}, "acks: Expected `array` of length >= 1 - at `$.acks`"),
    ({"kind": "acks", "acks": [{"id": "m2", "seq": 1}] * (MAX_ACKS + 1)},
     f"acks: Expected `array` of length <= {MAX_ACKS} - at `$.acks`"),
    ({"kind": "acks", "acks": {"id": "m2", "seq": 1}},
     "acks: Expected `array`, got `object` - at `$.acks`"),
    ({"kind": "acks", "acks": "m2"}, "acks: Expected `array`, got `str` - at `$.acks`"),
    ({"kind": "acks", "acks": [1]}, "acks: Expected `object`, got `int` - at `$.acks[0]`"),
    ({"kind": "acks", "acks": [{"id": "m2"}]},
     "acks: Object missing required field `seq` - at `$.acks[0]`"),
    ({"kind": "acks", "acks": [{"id": "m2", "seq": 1}, {"id": None, "seq": 1}]},
     "acks: Expected `str`, got `null` - at `$.acks[1].id`"),
    ({"kind": "acks", "acks": [{"id": "m" * 10_000, "seq": 1}]},
     "acks: Expected `str` of length <= 256 - at `$.acks[0].id`"),
    ({"kind": "acks", "acks": [{"id": "m2", "seq": 0}]},
     "acks: Expected `int` >= 1 - at `$.acks[0].seq`"),
    ({"kind": "acks", "acks": [{"id": "m2", "seq": 10**30}]},
     "acks: Expected `int` <= 9007199254740992 - at `$.acks[0].seq`"),
    ({"kind": "acks", "acks": [{"id": "m2", "seq": True}]},
     "acks: Expected `int`, got `bool` - at `$.acks[0].seq`"),
    ({"kind": "acks", "acks": [{"id": "m2", "seq": "1"}]},
     "acks: Expected `int`, got `str` - at `$.acks[0].seq`"),
    ({"kind": "acks", "acks": [{"id": "m2", "seq": 1}], "render_ms": float("nan")},
     "acks: Expected `float` >= 0.0 - at `$.render_ms`"),
    ({"kind": "resync", "id": "m2", "have": -1}, "resync: Expected `int` >= 0 - at `$.have`"),
    ({"kind": "tool_approval", "id": "m2", "call": "c1", "decision": "sudo"},
     "tool_approval: Invalid enum value 'sudo' - at `$.decision`"),
    ({"kind": "tool_approval", "id": "m2", "call": "c" * 10_000, "decision": "allow"},
     "tool_approval: Expected `str` of length <= 256 - at `$.call`"),
    ({"kind": "tool_approval", "id": "m2", "call": "c1", "decision": "allow"},
     "refused tool approval: no such reply"),  # m2 is there, but called no tool
    # a view asks the kernel's runtime widget for a chunk, never a widget
    ({"kind": "chunk", "name": "math"}, "chunk: not a command of ChatWidget"),
    ({"kind": "chunk", "name": "tables"}, "chunk: Invalid enum value 'tables' - at `$.name`"),
]


def ignored_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "ignored a view message" in r.getMessage()]


@pytest.mark.parametrize(("content", "reason"), HOSTILE,
                         ids=[reason for _, reason in HOSTILE])
def test_a_hostile_message_is_ignored_and_logged_once_as_a_warning(
    content: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="nbstream")
    w = ChatWidget(ScriptedSource(ANSWER, rate=1000))
    for _ in range(3):
        send_from_view(w, content)
    records = ignored_records(caplog)
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].levelno == logging.WARNING
    assert f"({reason}" in records[0].getMessage(), records[0].getMessage()
    assert len(records[0].getMessage()) < 1000  # a huge payload is not copied into the log
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert w._ignored.count == 3
    assert w.replies == []
    assert w.send("go").wait(10) == ANSWER
    w.close()


def test_a_compare_ignores_a_stop_for_an_unknown_pane(caplog: pytest.LogCaptureFixture) -> None:
    from nbstream import Compare

    caplog.set_level(logging.DEBUG, logger="nbstream")
    c = Compare([ScriptedSource(ANSWER, rate=1000), ScriptedSource(ANSWER, rate=1000)])
    for pane in (2, 10**20):
        send_from_view(c, {"kind": "stop", "pane": pane})
    for pane in (-1, True, "0"):  # not even a pane number
        send_from_view(c, {"kind": "stop", "pane": pane})
    reasons = [r.getMessage() for r in ignored_records(caplog)]
    assert len(reasons) == 4 and sum("stop for an unknown pane" in r for r in reasons) == 1
    assert c._ignored.count == 5
    assert c.wait(10) == [] and [r.wait(10) for r in c.send("go")] == [ANSWER, ANSWER]
    c.close()


def test_a_view_cannot_flood_the_log_with_new_reasons(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="nbstream")
    w = ChatWidget(ScriptedSource(ANSWER, rate=1000))
    # every field of every kind, wrong: many distinct reasons
    kinds = sorted(VIEW_MSG_TYPES)
    for kind in kinds:
        for field in ("id", "text", "seq", "have", "render_ms", "pane"):
            for value in (None, [1], {"a": 1}, -1, "x" * 2_000_000):
                send_from_view(w, {"kind": kind, field: value})
    logged = ignored_records(caplog)
    assert len(logged) == MAX_LOGGED_REASONS
    assert "so are messages of any new reason from now on" in logged[-1].getMessage()
    assert len(w._ignored.reasons) == MAX_LOGGED_REASONS
    assert w._ignored.count > 3 * MAX_LOGGED_REASONS  # counted, every one
    assert w.send("go").wait(10) == ANSWER
    w.close()


def test_each_kind_a_view_sends_is_declared_and_parsed_to_its_type() -> None:
    from nbstream.widgets import protocol

    good: dict[str, dict[str, Any]] = {
        "send": {"kind": "send", "text": "hi"},
        "stop": {"kind": "stop"},
        "regenerate": {"kind": "regenerate"},
        "clear": {"kind": "clear"},
        "continue": {"kind": "continue", "id": "m2"},
        "switch": {"kind": "switch", "id": "m1"},
        "edit": {"kind": "edit", "id": "m1", "text": "again"},
        "system_prompt": {"kind": "system_prompt", "text": ""},
        "hello": {"kind": "hello", "view": "v1"},
        "bye": {"kind": "bye", "view": "v1"},
        "resync": {"kind": "resync", "id": "m2", "have": 3},
        "ack": {"kind": "ack", "id": "m2", "seq": 4, "render_ms": 2},
        "acks": {"kind": "acks", "acks": [{"id": "m2", "seq": 4}, {"id": "m3", "seq": 1}],
                 "render_ms": 2},
        "chunk": {"kind": "chunk", "name": "highlight"},
        "tool_approval": {"kind": "tool_approval", "id": "m2", "call": "c1",
                          "decision": "always"},
    }
    assert set(VIEW_MSG_TYPES) == set(good)
    assert set(VIEW_MSG_TYPES.values()) == set(typing.get_args(protocol.ViewMsg))
    for kind, content in good.items():
        msg = parse_view_msg({**content, "extra": "dropped"})
        assert msg == content or kind in ("ack", "acks"), msg
    assert parse_view_msg(good["ack"]) == {**good["ack"], "render_ms": 2.0}
    # every entry's fields of other names are dropped too; MAX_ACKS entries fit
    most = {"kind": "acks", "acks": [{"id": f"m{i}", "seq": i + 1, "x": 1}
                                     for i in range(MAX_ACKS)]}
    assert parse_view_msg(most) == {
        "kind": "acks", "acks": [{"id": f"m{i}", "seq": i + 1} for i in range(MAX_ACKS)]}
    with pytest.raises(BadViewMessage, match="unknown kind"):
        parse_view_msg({"kind": "delta"})


# ------------------------------------------------------------ property test
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)
kinds = st.sampled_from(["hello", "bye", "resync", "ack", "acks", "send", "stop", "clear", "regenerate",
                         "switch", "edit", "chunk", "delta", "tool_approval", "Send", ""]
                        ) | st.text(max_size=10) | json_values
view_messages = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"kind": kinds},
        optional={
            "id": st.sampled_from(["m1", "m2", "m3", "m4"]) | json_values,
            "seq": st.integers(min_value=-(2**70), max_value=2**70) | json_values,
            "render_ms": st.floats() | json_values,
            "acks": st.lists(st.fixed_dictionaries(
                {}, optional={"id": st.sampled_from(["m1", "m2", "m99"]) | json_values,
                              "seq": st.integers(min_value=-3, max_value=2**60) | json_values}),
                max_size=5) | json_values,
            "text": st.text(max_size=30) | json_values,
            "pane": st.integers() | json_values,
            "view": st.sampled_from(["v1", "v2", ""]) | json_values,
            "name": st.sampled_from(["math", "highlight", "x"]) | json_values,
            "call": st.sampled_from(["c1", "call_0_0"]) | json_values,
            "decision": st.sampled_from(["allow", "always", "deny"]) | json_values,
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
            send_from_view(w, m)
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
