"""A widget whose last view left the page stops what it runs (#22 item 4: closing the tab).

Views say hello (with their own id) when rendered and bye when removed from the page
(widgets/presence.py). The last bye starts a grace period; another hello
within it keeps everything running, as after a re-rendered output. A page that
unloads (closed, or reloading) says a page's bye, whose grace is longer (a reload's
views say hello again within it). A page whose messages are lost says nothing: nothing
is stopped for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest
from _wait import wait_until
from _wire import send_from_view

from nbstream import ChatWidget, Reply
from nbstream.core.pieces import ChatMessage
from nbstream.sources import IteratorSource
from nbstream.widgets import presence


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(presence, "VIEW_GONE_GRACE", 0.3)
    monkeypatch.setattr(presence, "PAGE_GONE_GRACE", 1.5)


@contextmanager
def endless() -> Iterator[ChatWidget]:
    """A chat whose replies say "first " and then wait (until the test ends)."""
    gate = threading.Event()

    def gen(_: Sequence[ChatMessage]) -> Iterator[str]:
        yield "first "
        gate.wait(60)  # released at the end of the test
        yield "never shown"

    w = ChatWidget(IteratorSource(gen))
    try:
        yield w
    finally:
        gate.set()
        w.close()


def running_reply(w: ChatWidget, view_id: str) -> Reply:
    """View ``view_id`` says hello, then a reply starts and shows its first piece."""
    view(w, "hello", view_id)
    r = w.send("go")
    wait_until(lambda: r.text == "first ", 30, "the first piece")
    return r


def view(w: ChatWidget, kind: str, view_id: str) -> None:
    send_from_view(w, {"kind": kind, "view": view_id})


def test_the_last_view_gone_stops_the_running_reply() -> None:
    with endless() as w:
        view(w, "hello", "a")
        r = running_reply(w, "b")
        view(w, "bye", "a")  # another view remains
        view(w, "bye", "a")  # (a repeated bye changes nothing)
        with pytest.raises(TimeoutError):  # an absence: watched for three times the grace
            r.wait(0.9)
        view(w, "bye", "b")  # the last one
        wait_until(lambda: r.done, 30, "the stop")
        assert r.status == "stopped" and r.text == "first "


def test_a_view_back_within_the_grace_keeps_the_reply() -> None:
    with endless() as w:
        r = running_reply(w, "a")
        view(w, "bye", "a")
        view(w, "hello", "c")  # the output re-rendered
        # an absence can only be watched for a while: three times the grace
        with pytest.raises(TimeoutError):
            r.wait(0.9)
        assert r.status == "running"


def test_no_bye_no_stop_and_a_view_less_widget_runs() -> None:
    with endless() as w:
        r = w.send("go")  # headless: no view ever said hello
        wait_until(lambda: r.text == "first ", 30, "the first piece")
        view(w, "bye", "x")  # a bye from a view never seen is no news
        with pytest.raises(TimeoutError):
            r.wait(0.9)
        assert r.status == "running"


def test_a_pages_bye_waits_the_longer_grace_then_stops() -> None:
    with endless() as w:
        r = running_reply(w, "a")
        send_from_view(w, {"kind": "bye", "view": "a", "leaving": "page"})  # a tab closed
        with pytest.raises(TimeoutError):  # three times the view's grace: still running
            r.wait(0.9)
        assert r.status == "running"
        wait_until(lambda: r.done, 30, "the stop after the page's grace")
        assert r.status == "stopped" and r.text == "first "


def test_a_reload_keeps_the_reply() -> None:
    with endless() as w:
        r = running_reply(w, "a")
        send_from_view(w, {"kind": "bye", "view": "a", "leaving": "page"})
        view(w, "hello", "reloaded")  # the reloaded page's view
        with pytest.raises(TimeoutError):  # longer than the page's grace
            r.wait(2.5)
        assert r.status == "running"
        send_from_view(w, {"kind": "bye", "view": "reloaded", "leaving": "view"})
        wait_until(lambda: r.done, 30, "the stop after the view's grace")
        assert r.status == "stopped"


def test_bad_view_ids_are_ignored() -> None:
    with endless() as w:
        for bad in ({"kind": "bye"}, {"kind": "bye", "view": 3}, {"kind": "bye", "view": ""},
                    {"kind": "hello", "view": "x" * 1000},
                    {"kind": "bye", "view": "a", "leaving": "tab"}):
            send_from_view(w, bad)
        assert w._ignored.count == 5
