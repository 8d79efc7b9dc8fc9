"""ChatWidget in this process: messages to the view captured at the comm boundary."""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Iterator, Sequence

import pytest
from _sources import SlowLoading
from _wire import Wire, delta_keys, view_text

from nbstream import ChatWidget, ReplyError
from nbstream.sources import IteratorSource, ScriptedSource
from nbstream.sources.base import ChatMessage

TEXT = " ".join(f"word{i}" for i in range(400))


def test_stream_reaches_view_in_order_and_state_holds_final_text() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=4000), interval=0.02)
    wire = Wire(w)
    r = w.send("go")
    assert r.wait(10) == TEXT
    time.sleep(0.05)
    ds = wire.deltas(r.id)
    assert [d["seq"] for d in ds] == list(range(1, len(ds) + 1))
    assert len(ds) >= 2
    final = wire.states()[-1]
    assert [e["role"] for e in final] == ["user", "assistant"]
    assert final[1]["text"] == TEXT and final[1]["status"] == "done"
    assert final[1]["stats"]["pieces"] == 400
    assert view_text(wire, r.id) == TEXT
    assert w.messages == [
        {"role": "user", "content": "go", "id": "m1", "status": "done"},
        {"role": "assistant", "content": TEXT, "id": "m2", "status": "done"},
    ]


def test_repr_is_stable_for_nbval() -> None:
    w = ChatWidget(ScriptedSource("hi there"))
    assert repr(w) == "ChatWidget(source=ScriptedSource(<8 chars>, rate=40, jitter=0), messages=0)"
    bundle = w._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert data["text/plain"] == repr(w)
    assert "0x" not in repr(w)


def test_send_validates_input() -> None:
    w = ChatWidget(ScriptedSource("x"))
    with pytest.raises(ValueError):
        w.send("   ")
    with pytest.raises(TypeError):
        w.send(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ChatWidget(lambda m: ["x"])  # type: ignore[arg-type]


def test_shared_source_queues_replies_in_order_without_mixing() -> None:
    src = ScriptedSource(lambda msgs: f"answer to {msgs[-1]['content']} " * 20, rate=500)
    a, b = ChatWidget(src), ChatWidget(src)
    ra = a.send("A")
    rb = b.send("B")
    time.sleep(0.02)
    assert rb.status == "queued"
    assert ra.wait(10) == "answer to A " * 20
    assert rb.wait(10) == "answer to B " * 20


def test_multi_turn_conversation_reaches_the_source() -> None:
    seen: list[list[ChatMessage]] = []

    def echo(msgs: Sequence[ChatMessage]) -> Iterator[str]:
        seen.append(list(msgs))
        yield f"echo:{msgs[-1]['content']}"

    w = ChatWidget(IteratorSource(echo), system_prompt="be brief")
    w.send("one")
    w.send("two").wait(5)  # queued behind the first: sees its final answer
    assert seen[1] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "echo:one"},
        {"role": "user", "content": "two"},
    ]


def test_source_error_keeps_partial_text_and_widget_recovers() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=2000, error_after=5))
    wire = Wire(w)
    r = w.send("go")
    with pytest.raises(ReplyError) as info:
        r.wait(5)
    assert r.status == "error"
    assert r.text == "word0 word1 word2 word3 word4"
    assert isinstance(info.value.__cause__, RuntimeError)
    assert r.error is info.value.__cause__
    time.sleep(0.05)
    last = wire.states()[-1][-1]
    assert last["status"] == "error"
    assert "scripted failure" in last["error"]
    assert "Traceback" in last["detail"]
    w.source = ScriptedSource("fine now", rate=1000)
    assert w.send("again").wait(5) == "fine now"


def test_stop_keeps_what_was_shown_and_sends_nothing_after() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=200))
    wire = Wire(w)
    r = w.send("go")
    time.sleep(0.3)
    assert w.stop() == 1
    r.wait(2)
    assert r.status == "stopped"
    n = len(wire.msgs)
    time.sleep(0.2)
    assert TEXT.startswith(r.text) and 0 < len(r.text) < len(TEXT)
    assert view_text(wire, r.id) == r.text
    assert all(not delta_keys(m) for m in wire.msgs[n:])


def test_view_messages_drive_the_widget() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=200))
    wire = Wire(w)
    w._on_view_msg(w, {"kind": "send", "text": "from the view"}, [])
    w._on_view_msg(w, {"kind": "send", "text": "   "}, [])  # ignored
    w._on_view_msg(w, {"kind": "bogus"}, [])  # ignored
    w._on_view_msg(w, "not even a dict", [])  # ignored
    time.sleep(0.1)
    (r,) = w.replies
    assert r.prompt == "from the view"
    w._on_view_msg(w, {"kind": "stop", "id": r.id}, [])
    r.wait(2)
    assert r.status == "stopped"
    time.sleep(0.05)
    # a new view starts from the whole state (ipywidgets' request_state -> get_state)
    state = w.get_state()
    assert state["last_id"] == 2 and state["m2"]["status"] == "stopped"
    before = len(wire.msgs)
    w._on_view_msg(w, {"kind": "hello"}, [])  # nothing live: nothing to re-send
    time.sleep(0.1)
    assert len(wire.msgs) == before


def test_kernel_interrupt_during_wait_stops_the_reply() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=100))
    r = w.send("go")
    threading.Timer(0.3, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt):
        r.wait()
    assert r.status == "stopped"
    assert 0 < len(r.text) < len(TEXT)


def test_wait_timeout_raises_and_reply_goes_on() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=400))
    r = w.send("go")
    with pytest.raises(TimeoutError):
        r.wait(0.1)
    assert r.status == "running"
    r.cancel()


def test_stop_while_queued_never_runs() -> None:
    src = ScriptedSource(TEXT, rate=400)
    w = ChatWidget(src)
    first, second = w.send("1"), w.send("2")
    assert second.status == "queued"
    second.cancel()
    first.cancel()
    assert second.wait(2) == ""
    assert second.status == "stopped"


def test_start_stop_cycles_leave_no_threads_behind() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=1000))
    base = threading.active_count()
    for _ in range(100):
        r = w.send("go")
        time.sleep(0.002)
        r.cancel()
        r.wait(2)
    deadline = time.monotonic() + 5
    while threading.active_count() > base and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= base
    assert all(r.status in ("stopped", "done") for r in w.replies)


def test_clear_forgets_the_conversation() -> None:
    w = ChatWidget(ScriptedSource("short answer", rate=1000))
    w.send("q").wait(5)
    w.clear()
    assert w.messages == []
    assert repr(w).endswith("messages=0)")


def test_regenerate_replaces_the_last_answer() -> None:
    answers = iter(["first answer", "second answer"])
    w = ChatWidget(IteratorSource(lambda m: [next(answers)]))
    w.send("q").wait(5)
    w._on_view_msg(w, {"kind": "regenerate"}, [])
    time.sleep(0.05)
    r = w.last
    assert r is not None and r.wait(5) == "second answer"
    assert [(m["role"], m["content"]) for m in w.messages] == [
        ("user", "q"), ("assistant", "second answer")]
    w._on_view_msg(w, {"kind": "clear"}, [])
    assert w.messages == []
    assert ChatWidget(ScriptedSource("x")).regenerate() is None


def test_every_status_change_reaches_the_view() -> None:
    w = ChatWidget(SlowLoading(TEXT, rate=2000, load_s=0.1))
    wire = Wire(w)
    r = w.send("go")
    r.wait(10)
    time.sleep(0.05)
    seen = [s[-1]["status"] for s in wire.states() if s and s[-1]["id"] == r.id]
    assert seen[0] == "queued" or seen[0] == "loading"
    assert "loading" in seen and "running" in seen and seen[-1] == "done"
    assert seen.index("loading") < seen.index("running")
    # and "running" arrived while deltas were still coming, not only at the end
    with wire.lock:
        msgs = list(wire.msgs)
    first_running = next(i for i, m in enumerate(msgs) if m.get("method") == "update"
                         and m["state"].get(r.id, {}).get("status") == "running")
    assert any(delta_keys(m) for m in msgs[first_running:])
