"""``reply.wait()`` returns once the reply's ending is in the widget's state.

The pump marks a stream final (``wait`` wakes) inside a step, then sends the
final meta; a cell that ended with ``chat.send(...).wait()`` could finish in
between, and a notebook saved by nbclient right after kept the reply as
"running". Now the pump tells the stream when the update carrying its ending
went to the comm (``final_sent``), and ``Reply.wait`` waits for that too.
"""

from __future__ import annotations

import threading

from _wire import Wire, conversation_of

from nbstream import ChatWidget
from nbstream.core.pump import Outgoing, Pump
from nbstream.core.stream import Stream
from nbstream.sources import IteratorSource, ScriptedSource


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_final_sent_only_after_the_update_carrying_the_ending() -> None:
    clock = FakeClock()
    pump = Pump(clock=clock, start=False, max_rate=1e9)
    seen: list[tuple[list[str], bool]] = []
    s = Stream("m1", clock=clock)

    def send(out: Outgoing) -> None:
        # while the ending is being sent, nobody has been told it was sent
        seen.append(([x.id for x in out.ended], s.wait_final_sent(0)))

    ch = pump.open_channel(send)
    pump.add_stream(ch, s)
    s.set_status("running")
    s.put("hello")
    pump.step(clock())
    s.finish()
    assert not s.wait_final_sent(0)
    pump.step(clock())
    assert s.wait(0) and s.status == "done"
    assert seen[-1] == (["m1"], False)
    assert all(ended == [] for ended, _ in seen[:-1])
    assert s.wait_final_sent(0)


def test_a_send_that_fails_still_releases_the_waiter() -> None:
    clock = FakeClock()
    pump = Pump(clock=clock, start=False, max_rate=1e9)

    def send(out: Outgoing) -> None:
        raise RuntimeError("comm closed")

    ch = pump.open_channel(send)
    s = Stream("m1", clock=clock)
    pump.add_stream(ch, s)
    s.finish()
    pump.step(clock())
    assert s.wait_final_sent(0)


def test_closing_the_channel_releases_its_streams() -> None:
    clock = FakeClock()
    pump = Pump(clock=clock, start=False, max_rate=1e9)
    ch = pump.open_channel(lambda out: None)
    live = Stream("m1", clock=clock)
    pump.add_stream(ch, live)
    assert not live.wait_final_sent(0)
    pump.close_channel(ch)
    assert live.wait_final_sent(0)
    late = Stream("m2", clock=clock)
    pump.add_stream(ch, late)  # a closed channel sends nothing: no one waits
    assert late.wait_final_sent(0)


def test_a_stream_no_pump_carries_is_never_waited_for() -> None:
    s = Stream("m1")
    assert s.wait_final_sent(0)


def test_wait_returns_with_the_ending_already_in_the_widget_state() -> None:
    # the comm's send is held until the test lets it go: the reply is final,
    # its ending not yet sent, so wait() must not have returned
    w = ChatWidget(ScriptedSource("one two three", rate=10_000))
    wire = Wire(w)
    gate = threading.Event()
    captured = w._send

    def held_send(msg: dict, buffers: object = None) -> None:
        if any(isinstance(v, dict) and v.get("role") == "assistant" and v.get("status") == "done"
               for v in msg.get("state", {}).values()):
            assert gate.wait(30), "the test never let the final update go"
        captured(msg, buffers)

    w._send = held_send  # type: ignore[method-assign]
    r = w.send("go")
    returned = threading.Event()
    statuses: list[str | None] = []

    def waiter() -> None:
        r.wait(30)
        statuses.append(next((e["status"] for e in conversation_of(wire.model)
                              if e["id"] == r.id), None))
        returned.set()

    t = threading.Thread(target=waiter)
    t.start()
    assert r.stream.wait(30)  # final: wait() used to return here
    assert not returned.wait(0.3)  # and still waits (the ending is held back)
    gate.set()
    assert returned.wait(30)
    t.join()
    assert statuses == ["done"]


def test_a_failed_reply_is_in_the_state_when_wait_raises() -> None:
    def boom(messages: object) -> object:
        yield "partial"
        raise ValueError("model fell over")

    w = ChatWidget(IteratorSource(boom))
    wire = Wire(w)
    r = w.send("go")
    try:
        r.wait(30)
    except Exception:
        pass
    assert [e["status"] for e in conversation_of(wire.model)] == ["done", "error"]
