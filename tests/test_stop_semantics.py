"""One meaning of Stop: the view's button and Escape (both send ``{"kind": "stop"}``),
``chat.stop()`` and a kernel interrupt during ``wait()`` stop the running reply AND
cancel the widget's queued ones; ``reply.cancel()`` stays per reply."""

from __future__ import annotations

import _thread
import sys
import threading
from collections.abc import Callable

import pytest
from _held import Held
from _kernel import iopub, shell_reply, value
from _wait import wait_until
from _wire import send_from_view

from nbstream import ChatWidget, Compare, Reply
from nbstream.core import lanes


def running_and_queued(w: ChatWidget, held: Held) -> tuple[Reply, Reply]:
    r1, r2 = w.send("one"), w.send("two")
    wait_until(lambda: held.asked == ["one"] and r1.status == "running", 10)
    assert r2.status == "queued"
    return r1, r2


def assert_both_stopped(held: Held, r1: Reply, r2: Reply) -> None:
    assert r1.wait(10) == r1.text and r1.status == "stopped"
    assert held.first.startswith(r1.text)  # what was shown, nothing after
    assert r2.wait(10) == "" and r2.status == "stopped"
    # the lane ran the cancelled job (it returned at once) and went away: r2 never started
    wait_until(lambda: lanes.get(held.source.lane_key()) is None, 10)
    assert held.asked == ["one"]


@pytest.mark.parametrize("how", ["view stop (button / Escape)", "chat.stop()"])
def test_stop_stops_the_running_reply_and_cancels_the_queued(how: str) -> None:
    held = Held()
    w = ChatWidget(held.source)
    r1, r2 = running_and_queued(w, held)
    if how == "chat.stop()":
        assert w.stop() == 2
    else:
        send_from_view(w, {"kind": "stop"})
    assert_both_stopped(held, r1, r2)
    # the widget keeps working
    held.release.set()
    assert w.send("three").wait(10) == "first end"
    w.close()


def _in_reply_wait(thread_id: int) -> bool:
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if frame.f_code.co_name == "wait" and frame.f_code.co_filename.endswith("reply.py"):
            return True
        frame = frame.f_back
    return False


def interrupt_main_when(condition: Callable[[], object]) -> threading.Thread:
    """Like Ctrl-C / the notebook's interrupt, once ``condition`` holds and the main
    thread is blocked in Reply.wait()."""
    main = threading.main_thread().ident
    assert main is not None

    def run() -> None:
        wait_until(lambda: condition() and _in_reply_wait(main), 10)
        _thread.interrupt_main()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_kernel_interrupt_during_wait_stops_the_widget_with_its_queued_reply() -> None:
    held = Held()
    w = ChatWidget(held.source)
    r1, r2 = running_and_queued(w, held)
    with pytest.raises(KeyboardInterrupt):
        t = interrupt_main_when(lambda: r1.text)
        r1.wait()
    t.join(10)
    assert_both_stopped(held, r1, r2)
    w.close()


def test_interrupt_while_waiting_on_the_queued_reply_stops_the_running_one_too() -> None:
    held = Held()
    w = ChatWidget(held.source)
    r1, r2 = running_and_queued(w, held)
    with pytest.raises(KeyboardInterrupt):
        t = interrupt_main_when(lambda: True)
        r2.wait()
    t.join(10)
    assert_both_stopped(held, r1, r2)
    w.close()


def test_reply_cancel_stays_per_reply() -> None:
    held = Held()
    w = ChatWidget(held.source)
    r1, r2 = running_and_queued(w, held)
    held.release.set()
    assert r1.cancel() is True and r1.cancel() is False
    assert r1.status == "stopped"
    assert r2.wait(10) == "first end"  # the queued one starts next and finishes
    assert held.asked == ["one", "two"]
    w.close()


def test_cancelling_a_queued_reply_lets_the_running_one_finish() -> None:
    held = Held()
    w = ChatWidget(held.source)
    r1, r2 = running_and_queued(w, held)
    assert r2.cancel() is True
    held.release.set()
    assert r1.wait(10) == "first end"
    assert r2.status == "stopped" and r2.text == ""
    wait_until(lambda: lanes.get(held.source.lane_key()) is None, 10)
    assert held.asked == ["one"]
    w.close()


def test_view_stop_with_an_id_stops_that_reply_only() -> None:
    held = Held()
    w = ChatWidget(held.source)
    r1, r2 = running_and_queued(w, held)
    held.release.set()
    send_from_view(w, {"kind": "stop", "id": r2.id})
    assert r1.wait(10) == "first end"
    assert r2.status == "stopped"
    w.close()


def test_compare_stop_all_and_stop_pane() -> None:
    a, b = Held(), Held()
    c = Compare([a.source, b.source])
    first = c.send("q1")
    second = c.send("q2")  # queued behind q1 in each pane's lane
    wait_until(lambda: a.asked == ["q1"] and b.asked == ["q1"], 10)
    assert [r.status for r in second] == ["queued", "queued"]
    assert c.stop_pane(1) == 2  # pane 1: its running and its queued reply
    assert [r.status for r in c.replies_of(1)] == ["stopped", "stopped"]
    assert first[0].status == "running" and second[0].status == "queued"
    send_from_view(c, {"kind": "stop"})  # Stop all
    assert [r.wait(10) for r in c.replies_of(0)] == [first[0].text, ""]
    assert all(r.status == "stopped" for r in c.replies)
    wait_until(lambda: lanes.get(a.source.lane_key()) is None, 10)
    assert a.asked == ["q1"] and b.asked == ["q1"]
    c.close()


# ------------------------------------------------------------- in a real kernel
KERNEL_SETUP = """
import threading
from nbstream import ChatWidget
from nbstream.sources import IteratorSource

ASKED = []
def answer(messages):
    ASKED.append(messages[-1]["content"])
    yield "first "
    while not threading.Event().wait(0.01):  # an answer that never ends is the scenario
        yield ""

chat = ChatWidget(IteratorSource(answer))
r1, r2 = chat.send("one"), chat.send("two")

def announce_wait():
    # print a marker once the main thread is blocked in Reply.wait()
    import sys
    main = threading.main_thread().ident
    while True:
        f = sys._current_frames().get(main)
        while f is not None and not (f.f_code.co_name == "wait"
                                     and f.f_code.co_filename.endswith("reply.py")):
            f = f.f_back
        if f is not None:
            print("IN-WAIT", flush=True)
            return
        threading.Event().wait(0.005)
"""


@pytest.mark.kernel
def test_a_kernel_interrupt_during_wait_stops_the_queued_reply_too() -> None:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", env={"HF_HUB_OFFLINE": "1"})
    try:
        setup = shell_reply(kc, kc.execute(KERNEL_SETUP), 60)
        assert setup["content"]["status"] == "ok", setup["content"]
        wait_until(lambda: value(kc, "r1.status") == "running", 30)
        assert value(kc, "r2.status") == "queued"
        msg_id = kc.execute("threading.Thread(target=announce_wait).start()\nr1.wait()")
        # interrupt once the kernel is blocked in wait() (a thread there says so)
        for msg in iopub(kc, 30, "IN-WAIT: the cell in wait()"):
            if msg["msg_type"] == "stream" and "IN-WAIT" in msg["content"]["text"]:
                break
        km.interrupt_kernel()
        reply = shell_reply(kc, msg_id, 30)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        wait_until(lambda: value(kc, "(r1.status, r2.status)") == ("stopped", "stopped"), 30)
        assert value(kc, "r2.text") == ""
        wait_until(lambda: value(kc, "[t.name for t in threading.enumerate() "
                                      "if t.name.startswith('nbstream-worker')]") == [], 30)
        assert value(kc, "ASKED") == ["one"]  # the queued reply never started
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
