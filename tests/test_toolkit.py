"""StreamView / stream(), Compare and the cell magics, in this process."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from _wait import wait_until
from _wire import Wire, send_from_view

import nbstream
from nbstream import Compare, StreamView
from nbstream.sources import IteratorSource, ScriptedSource
from nbstream.sources.base import ChatMessage

TEXT = " ".join(f"w{i}" for i in range(300))


def test_stream_view_from_a_source_a_generator_and_an_async_generator() -> None:
    v = StreamView(ScriptedSource(TEXT, rate=3000), "go")
    assert v.wait(10) == TEXT and v.status == "done"
    assert v.mode == "stream"
    # the view's state: the prompt and the finished answer, once the pump published it
    wait_until(lambda: v.conversation and v.conversation[-1]["status"] == "done",
               message="the final state")
    assert [e["role"] for e in v.conversation] == ["user", "assistant"]
    assert v.conversation[0]["text"] == "go" and v.conversation[1]["text"] == TEXT
    assert v.stats["pieces"] == 300

    def gen() -> Iterator[str]:
        yield from ["a", "b", "c"]

    assert StreamView(gen()).wait(5) == "abc"

    async def agen() -> AsyncIterator[str]:
        for x in ["x", "y"]:
            await asyncio.sleep(0)  # an async source awaits between pieces
            yield x

    assert StreamView(agen()).wait(5) == "xy"
    with pytest.raises(TypeError):
        StreamView("a plain string")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        StreamView(42)  # type: ignore[arg-type]


def test_stream_view_is_bounded_and_stoppable() -> None:
    v = StreamView(ScriptedSource(TEXT, rate=2000), interval=0.05)
    v.wait(10)
    # bounded: on the pump's own clock, two deltas are never closer than the interval
    # (the last flush, which the final state carries, may come at any time)
    sent = [d.sent for d in v.trace().deltas[:-1]]
    assert len(sent) >= 1
    assert all(b - a >= 0.05 - 1e-9 for a, b in itertools.pairwise(sent)), sent
    assert len(v.trace().deltas) < 300  # coalesced: far fewer deltas than pieces
    s = StreamView(ScriptedSource(TEXT, rate=100))
    wait_until(lambda: s.text, message="some text")
    assert s.stop() == 1
    s.wait(2)
    assert s.status == "stopped" and TEXT.startswith(s.text)


def test_stream_function_headless_returns_a_handle() -> None:
    h = nbstream.stream(ScriptedSource("one two", rate=1000), prompt="p")
    assert isinstance(h, StreamView)
    assert h.wait(5) == "one two"
    assert repr(h) == "StreamView(source=ScriptedSource(<7 chars>, rate=1000, jitter=0))"


def test_compare_streams_each_pane_without_cross_talk() -> None:
    a = ScriptedSource(lambda m: "A " * 50, rate=2000)
    b = ScriptedSource(lambda m: "B " * 80, rate=2000)
    c = Compare([a, b], labels=["left", "right"])
    wire = Wire(c)
    ra, rb = c.send("same prompt")
    assert (ra.pane, rb.pane) == (0, 1)
    assert c.wait(10) == ["A " * 50, "B " * 80]
    wait_until(lambda: [e["status"] for e in c.conversation] == ["done", "done", "done"],
               message="the final state of both panes")
    by_id: dict[str, str] = {}
    for d in wire.deltas():
        by_id[d["id"]] = by_id.get(d["id"], "") + d["text"]
    assert set(by_id[ra.id]) <= {"A", " "} and set(by_id[rb.id]) <= {"B", " "}
    final = c.conversation
    assert [(e["role"], e.get("pane")) for e in final] == [("user", None), ("assistant", 0),
                                                          ("assistant", 1)]
    assert c.panes == [{"label": "left"}, {"label": "right"}]


def test_compare_on_one_model_takes_turns_and_keeps_per_pane_history() -> None:
    seen: list[tuple[str, list[ChatMessage]]] = []
    gate = threading.Event()  # holds the first answer until the test looked at pane 2

    def make(name: str) -> Any:
        def fn(msgs: Sequence[ChatMessage]) -> Iterator[str]:
            seen.append((name, list(msgs)))
            gate.wait(30)
            for _ in range(20):
                yield name
        return fn

    shared = IteratorSource(make("S"))
    c = Compare([shared, shared])
    assert c.labels == ["fn #1", "fn #2"]
    r1, r2 = c.send("q1")
    wait_until(lambda: r1.status == "running", message="pane 1 running")
    assert r2.status == "queued"  # one model: the second pane waits its turn
    gate.set()
    c.wait(10)
    c.send("q2")
    c.wait(10)
    assert seen[2][1] == [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "S" * 20},
        {"role": "user", "content": "q2"},
    ]


def test_compare_different_lanes_run_at_once_and_stop_one_pane() -> None:
    # 300 words at 50/s: both run for 6 s unless stopped
    c = Compare([ScriptedSource(TEXT, rate=50), ScriptedSource(TEXT, rate=50)])
    r1, r2 = c.send("go")
    wait_until(lambda: r1.status == r2.status == "running", message="both panes running")
    send_from_view(c, {"kind": "stop", "pane": 1})
    r2.wait(2)
    assert r2.status == "stopped" and r1.status == "running"
    c.stop()
    r1.wait(2)
    assert r1.status == "stopped"
    with pytest.raises(ValueError):
        Compare([ScriptedSource("x")])


class FakeIPython:
    def __init__(self) -> None:
        self.user_ns: dict[str, Any] = {}
        self.magics: dict[str, Any] = {}

    def register_magic_function(self, fn: Any, kind: str, name: str) -> None:
        self.magics[name] = fn


def test_magics_stream_and_chat_remember() -> None:
    from nbstream.widgets import magic

    ip = FakeIPython()
    nbstream.load_ipython_extension(ip)
    seen: list[list[ChatMessage]] = []

    def echo(msgs: Sequence[ChatMessage]) -> Iterator[str]:
        seen.append(list(msgs))
        yield f"re:{msgs[-1]['content']}"

    ip.user_ns["src"] = IteratorSource(echo)
    ip.magics["stream"]("src --system be-kind", "hello there\n")
    v = ip.user_ns["_stream"]
    assert v.wait(5) == "re:hello there"
    assert seen[-1] == [{"role": "system", "content": "be-kind"},
                        {"role": "user", "content": "hello there"}]
    magic.forget()
    ip.magics["chat"]("src", "first")
    ip.user_ns["_stream"].wait(5)
    ip.magics["chat"]("src", "second")
    ip.user_ns["_stream"].wait(5)
    assert seen[-1] == [{"role": "user", "content": "first"},
                        {"role": "assistant", "content": "re:first"},
                        {"role": "user", "content": "second"}]
    chat = nbstream.ChatWidget(IteratorSource(echo))
    ip.user_ns["chat"] = chat
    r = ip.magics["chat"]("chat", "into the chat")
    assert r is None
    wait_until(lambda: chat.last, message="the chat's reply")
    assert chat.last is not None and chat.last.wait(5) == "re:into the chat"
    assert ip.user_ns["_stream"] is chat.last
    with pytest.raises(NameError):
        ip.magics["stream"]("nope", "x")
    with pytest.raises(ValueError):
        ip.magics["stream"]("src", "   ")
    with pytest.raises(ValueError):
        ip.magics["stream"]("src --bogus", "x")
    ip.user_ns["n"] = 3
    with pytest.raises(TypeError):
        ip.magics["stream"]("n", "x")
