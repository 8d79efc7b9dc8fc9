"""reply.wait() and the four ways a reply ends: done and stopped return the text,
error raises ReplyError, a time limit raises ReplyTimeout (a ReplyError); the
builtin TimeoutError only means that wait(timeout=...) gave up while the reply runs."""

from __future__ import annotations

import pytest
from _held import Held
from _wait import wait_until

import nbstream
from nbstream import ChatWidget, ReplyError, ReplyTimeout
from nbstream.sources import ScriptedSource


def test_the_exceptions_are_exported_and_distinct() -> None:
    assert {"ReplyError", "ReplyTimeout"} <= set(nbstream.__all__)
    assert issubclass(ReplyTimeout, ReplyError)
    assert not issubclass(ReplyTimeout, TimeoutError)
    assert not issubclass(TimeoutError, ReplyError)
    for word in ("done", "stopped", "error", "timeout", "TimeoutError", "ReplyTimeout"):
        assert word in (nbstream.Reply.wait.__doc__ or "")


def test_done_returns_the_whole_text() -> None:
    w = ChatWidget(ScriptedSource("all of it", rate=1000))
    r = w.send("go")
    assert r.wait(10) == "all of it" and r.status == "done"


def test_stopped_returns_the_text_shown() -> None:
    held = Held()
    w = ChatWidget(held.source)
    r = w.send("go")
    wait_until(lambda: r.status == "running" and r.stats["flushes"] >= 1, 10)
    w.stop()
    assert r.wait(10) == held.first and r.status == "stopped"


def test_error_raises_reply_error_with_the_cause() -> None:
    w = ChatWidget(ScriptedSource("a b c d e f", rate=1000, error_after=2))
    r = w.send("go")
    with pytest.raises(ReplyError) as info:
        r.wait(10)
    assert type(info.value) is ReplyError
    assert info.value.reply is r and r.status == "error"
    assert "scripted failure" in str(info.value) and info.value.__cause__ is r.error


def test_a_time_limit_raises_reply_timeout_naming_it() -> None:
    held = Held()
    w = ChatWidget(held.source, stall_timeout=0.2)
    r = w.send("go")
    with pytest.raises(ReplyTimeout) as info:
        r.wait(10)
    assert r.status == "timeout"
    assert "no token for 0.2 s" in str(info.value)
    assert info.value.reply is r and r.text == held.first  # what was shown is kept
    assert not isinstance(info.value, TimeoutError)


def test_wait_timeout_raises_builtin_timeout_error_and_the_reply_goes_on() -> None:
    held = Held()
    w = ChatWidget(held.source)
    r = w.send("go")
    with pytest.raises(TimeoutError) as info:
        r.wait(timeout=0.05)
    assert not isinstance(info.value, ReplyError)
    assert not r.done
    held.release.set()
    assert r.wait(10) == "first end"
