"""ChatWidget in this process: messages to the view captured at the comm boundary."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence

import pytest
from _sources import Held
from _wait import wait_until
from _wire import Wire, delta_keys, send_from_view, view_text

from nbstream import ChatWidget, Compare, ReplyError
from nbstream.sources import IteratorSource, ScriptedSource
from nbstream.sources.base import ChatMessage
from nbstream.widgets.widget import StreamingWidget


def last_status(wire: Wire, mid: str) -> str | None:
    """The status of message ``mid`` in the latest state the view received."""
    states = wire.states()
    if not states:
        return None
    return next((e["status"] for e in states[-1] if e["id"] == mid), None)


def in_reply_wait(thread_id: int | None) -> bool:
    """Whether the thread ``thread_id`` is blocked inside ``Reply.wait``."""
    frame = sys._current_frames().get(thread_id or 0)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "wait" and code.co_filename.endswith("reply.py"):
            return True
        frame = frame.f_back
    return False

TEXT = " ".join(f"word{i}" for i in range(400))


def test_stream_reaches_view_in_order_and_state_holds_final_text() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=4000), interval=0.02)
    wire = Wire(w)
    r = w.send("go")
    assert r.wait(10) == TEXT
    wait_until(lambda: last_status(wire, r.id) == "done", message="the final state")
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
    gate = threading.Event()  # holds A's answer until the test has looked at B

    def answer(msgs: Sequence[ChatMessage]) -> Iterator[str]:
        if msgs[-1]["content"] == "A":
            gate.wait(30)
        for _ in range(20):
            yield f"answer to {msgs[-1]['content']} "

    src = IteratorSource(answer)
    a, b = ChatWidget(src), ChatWidget(src)
    ra = a.send("A")
    rb = b.send("B")
    wait_until(lambda: ra.status == "running", message="A running")
    assert rb.status == "queued"  # one source: B waits for A's turn to end
    gate.set()
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
    wait_until(lambda: last_status(wire, r.id) == "error", message="the error state")
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
    wait_until(lambda: wire.deltas(r.id), message="a first delta")
    assert w.stop() == 1
    r.wait(2)
    assert r.status == "stopped"
    wait_until(lambda: last_status(wire, r.id) == "stopped", message="the stopped state")
    # the pump sends in order: the next message it sends for this widget (a new
    # reply's) comes after anything it could still have sent for the stopped one
    stopped_at = len(wire.msgs)
    w.source = ScriptedSource("next", rate=1000)
    w.send("again").wait(10)
    wait_until(lambda: len(wire.msgs) > stopped_at, message="the next reply's messages")
    assert TEXT.startswith(r.text) and 0 < len(r.text) < len(TEXT)
    assert view_text(wire, r.id) == r.text
    assert all(mid != r.id for m in wire.msgs[stopped_at:] for mid, _, _ in delta_keys(m))


def test_view_messages_drive_the_widget() -> None:
    w = ChatWidget(ScriptedSource(TEXT, rate=200))
    wire = Wire(w)
    send_from_view(w, {"kind": "send", "text": "from the view"})
    send_from_view(w, {"kind": "send", "text": "   "})  # ignored
    send_from_view(w, {"kind": "bogus"})  # ignored
    send_from_view(w, "not even a dict")  # ignored
    wait_until(lambda: w.replies, message="the reply the view asked for")
    (r,) = w.replies
    assert r.prompt == "from the view"
    send_from_view(w, {"kind": "stop", "id": r.id})
    r.wait(2)
    assert r.status == "stopped"
    wait_until(lambda: last_status(wire, r.id) == "stopped", message="the stopped state")
    # a new view starts from the whole state (ipywidgets' request_state -> get_state)
    state = w.get_state()
    assert state["last_id"] == 2 and state["m2"]["status"] == "stopped"
    before = len(wire.msgs)
    send_from_view(w, {"kind": "hello"})
    # nothing live: the meta of the reply that ended lately (a view whose link dropped
    # may have lost it), then the answer that tells the view it is heard
    welcome = {"method": "custom", "content": {"kind": "welcome"}}
    wait_until(lambda: welcome in wire.msgs[before:], message="the welcome")
    sent = wire.msgs[before:]
    assert sent[-1] == welcome and len(sent) == 2, sent
    assert sent[0]["state"][r.id]["status"] == "stopped"
    assert set(sent[0]["state"]) == {r.id, "live"}
    send_from_view(w, {"kind": "hello"})  # every hello is answered, once
    wait_until(lambda: wire.msgs[before:].count(welcome) == 2, message="the second welcome")
    # an absence cannot be awaited: the scenario gives the pump 0.1 s to (wrongly) send more
    time.sleep(0.1)
    assert len(wire.msgs[before:]) == 4


def test_kernel_interrupt_during_wait_stops_the_reply() -> None:
    # the reply cannot end by itself before the interrupt: it waits on a gate after
    # its first piece, so wait() can only end by the Ctrl-C
    gate = threading.Event()

    def first_then_wait(_: Sequence[ChatMessage]) -> Iterator[str]:
        yield "first "
        gate.wait(30)
        yield "second"

    w = ChatWidget(IteratorSource(first_then_wait))
    r = w.send("go")
    main = threading.main_thread().ident
    fired: list[bool] = []

    def interrupt_once_waiting() -> None:
        # Ctrl-C lands while the main thread is inside Reply.wait(), not before. A
        # real SIGINT, as a kernel interrupt sends: it also breaks the main thread's
        # blocking wait at once (_thread.interrupt_main() only sets a flag, which the
        # main thread handles at its next bytecode, maybe inside a finalizer that a
        # garbage collection runs there, which swallows the KeyboardInterrupt)
        # (and once the first piece was sent: a stop keeps what was shown, and drops
        # what the pump had not sent yet, which a loaded machine can leave unsent)
        wait_until(lambda: r.stream.seq >= 1 and in_reply_wait(main), 60,
                   "the first piece sent and the main thread in wait()")
        fired.append(True)
        signal.pthread_kill(main or 0, signal.SIGINT)

    # Python's own Ctrl-C handler, as in a kernel: something earlier in the full suite
    # leaves SIGINT ignored (SIG_IGN), which made this test fail only there
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=interrupt_once_waiting, daemon=True).start()
    interrupted = False
    try:
        r.wait()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        gate.set()
        signal.signal(signal.SIGINT, previous)
    assert interrupted, (f"wait() ended without the interrupt (sent: {fired}, SIGINT handler: "
                         f"{signal.getsignal(signal.SIGINT)!r}, status {r.status})")
    assert fired == [True]
    assert r.status == "stopped"
    assert r.text == "first "  # kept; nothing after the stop


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
        time.sleep(0.002)  # the scenario: stop a reply just after it started
        r.cancel()
        r.wait(2)
    # the workers end once their lane is empty
    wait_until(lambda: threading.active_count() <= base, message="the worker threads ended")
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
    first = w.send("q")
    first.wait(5)
    send_from_view(w, {"kind": "regenerate"})
    wait_until(lambda: w.last is not first, message="the regenerated reply")
    r = w.last
    assert r is not None and r.wait(5) == "second answer"
    assert [(m["role"], m["content"]) for m in w.messages] == [
        ("user", "q"), ("assistant", "second answer")]
    send_from_view(w, {"kind": "clear"})
    assert w.messages == []
    assert ChatWidget(ScriptedSource("x")).regenerate() is None


def test_every_status_change_reaches_the_view() -> None:
    # The pump publishes the state as it is when it sends (coalesced), so the
    # source holds each stage until the view has seen it.
    src = Held([w if i == 0 else " " + w for i, w in enumerate(TEXT.split(" "))])
    w = ChatWidget(src)
    wire = Wire(w)
    r = w.send("go")
    wait_until(lambda: last_status(wire, r.id) == "loading", message="loading shown")
    src.load.set()
    wait_until(lambda: last_status(wire, r.id) == "running", message="running shown")

    def first_running() -> int:
        with wire.lock:
            return next(i for i, m in enumerate(wire.msgs) if m.get("method") == "update"
                        and m["state"].get(r.id, {}).get("status") == "running")

    def deltas_after_running() -> int:
        start = first_running()
        with wire.lock:
            return sum(bool(delta_keys(m)) for m in wire.msgs[start:])

    # "running" arrived while deltas were still coming, not only at the end
    src.second.set()
    wait_until(deltas_after_running, message="a delta after the running state")
    src.rest.set()
    r.wait(10)
    wait_until(lambda: last_status(wire, r.id) == "done", message="the final state")
    seen = [s[-1]["status"] for s in wire.states() if s and s[-1]["id"] == r.id]
    assert seen[0] == "queued" or seen[0] == "loading"
    assert "loading" in seen and "running" in seen and seen[-1] == "done"
    assert seen.index("loading") < seen.index("running") < seen.index("done")
    assert view_text(wire, r.id) == TEXT


# --------------------------------------------- a round of acks in one message (#22, #19)
def _finished_compare(panes: int = 4) -> Compare:
    """A Compare whose panes streamed to the end, no view acking: every stream's window
    still holds all its deltas."""
    # 0.2 s each: the first piece goes at once, the rest after: at least 2 deltas each
    c = Compare([ScriptedSource(" ".join(f"p{i}w{k}" for k in range(60)), rate=300)
                 for i in range(panes)])
    for r in c.send("go"):
        assert r.wait(10) is not None
    wait_until(lambda: len(c._channel.ended) == panes, message="every pane's stream settled")
    return c


def _acked(w: StreamingWidget) -> dict[str, int]:
    """Per stream of ``w``: the last delta its view acknowledged (the window's start)."""
    ch = w._channel
    with w._pump._cond:
        return {s.id: s._acked for s in [*ch.streams, *ch.ended]}


def _made(w: StreamingWidget) -> dict[str, int]:
    ch = w._channel
    with w._pump._cond:
        return {s.id: s.seq for s in [*ch.streams, *ch.ended]}


def test_a_round_of_acks_in_one_message_acks_each_stream_as_single_acks_do() -> None:
    batched, single = _finished_compare(), _finished_compare()
    try:
        seqs = _made(batched)
        assert len(seqs) == 4 and all(seq > 1 for seq in seqs.values())
        assert set(_acked(batched).values()) == {0}
        # the view of this version: the round, one message
        send_from_view(batched, {"kind": "acks", "render_ms": 3.0,
                                 "acks": [{"id": i, "seq": s} for i, s in seqs.items()]})
        # a view of an earlier version: one ack per stream
        for i, s in _made(single).items():
            send_from_view(single, {"kind": "ack", "id": i, "seq": s, "render_ms": 3.0})
        assert _acked(batched) == seqs and _acked(single) == _made(single)
        for w in (batched, single):
            ch = w._channel
            assert ch.acks == 4 and ch.last_ack_at is not None
            assert all(s.unacked_since() is None for s in ch.ended)  # windows emptied
            assert w._ignored.count == 0
        # but the round is one ack of the view for its figures (Pump.acks): one step of
        # the render time's average, where 4 single acks take 4 (and 3 gaps of ~0 that
        # shrink the measured ack period)
        assert batched._channel.render_ms_ewma == pytest.approx(3.0 * 0.2, rel=0.05)
        assert single._channel.render_ms_ewma == pytest.approx(3.0 * (1 - 0.8 ** 4), rel=0.05)
    finally:
        batched.close()
        single.close()


def test_a_round_of_acks_applies_its_entries_in_order_or_none_of_them() -> None:
    c = _finished_compare(2)
    try:
        (a, n), (b, m) = _made(c).items()
        assert n > 1 and m > 1
        # in order, as single acks would be: the older seq after the newer is no news
        send_from_view(c, {"kind": "acks", "acks": [{"id": a, "seq": n}, {"id": a, "seq": 1}]})
        assert _acked(c)[a] == n and c._channel.acks == 1
        # an id the widget does not stream is skipped, as a single ack of it is
        send_from_view(c, {"kind": "acks", "acks": [{"id": "m99", "seq": 1},
                                                   {"id": b, "seq": 1}]})
        assert _acked(c)[b] == 1 and c._channel.acks == 2
        # one entry that does not fit the protocol: the message is refused whole
        send_from_view(c, {"kind": "acks", "acks": [{"id": b, "seq": m},
                                                   {"id": b, "seq": "1"}]})
        assert _acked(c)[b] == 1 and c._channel.acks == 2
        assert c._ignored.count == 1
    finally:
        c.close()
