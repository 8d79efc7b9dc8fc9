"""A ChatWidget streaming in a real IPython kernel, observed on IOPub (no browser).

This is what the browser would receive: every comm message is captured, so
the tests check the wire itself (order, completeness, rate) and that the
kernel answers other requests while a stream runs. The pump sends from a
background thread, so this also checks that ipykernel routes those messages.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _kernel import cell_idle, drain_iopub, execute, iopub, shell_reply, value
from _wire import body_parts, delta_keys
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

from nbstream.core.pieces import FINAL_STATUSES
from nbstream.core.pump import DEFAULT_INTERVAL

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def kernel() -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    km, kc = start_new_kernel(kernel_name="python3", env={"HF_HUB_OFFLINE": "1"})
    try:
        execute(kc, """
from nbstream import ChatWidget
from nbstream.sources import ScriptedSource
TEXT = ''.join(f'w{i} ' for i in range(3000))
""")
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def comm_msgs(kc: BlockingKernelClient, comm_id: str, until: Any, timeout: float = 30
              ) -> list[tuple[float, dict[str, Any]]]:
    """Collect (arrival time, data) of comm_msgs of ``comm_id`` until ``until(data)``."""
    got: list[tuple[float, dict[str, Any]]] = []
    for msg in iopub(kc, timeout, f"end of the stream on comm {comm_id}"):
        if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == comm_id:
            data = msg["content"]["data"]
            got.append((time.monotonic(), data))
            if until(data):
                return got
    raise AssertionError("unreachable")  # iopub() raises when the time is up


def final_state(data: dict[str, Any], mid: str) -> dict[str, Any] | None:
    """The meta of message ``mid`` in this update, if it is final."""
    if data.get("method") != "update":
        return None
    e = data.get("state", {}).get(mid)
    if isinstance(e, dict) and e.get("status") in FINAL_STATUSES:
        return e
    return None


def delta_texts(data: dict[str, Any]) -> list[tuple[str, int, str]]:
    """(id, seq, answer text) of the deltas one comm message carries."""
    return [(i, seq, body_parts(body)[0]) for i, seq, body in delta_keys(data)]


def is_delta(data: dict[str, Any]) -> bool:
    return bool(delta_keys(data))


def flush_times(kc: BlockingKernelClient, reply: str, wire_deltas: int) -> list[float]:
    """When the pump sent each delta of ``reply`` (the pump's clock, in the kernel).

    ``wire_deltas`` is how many deltas of it came over the wire: every flush is
    one. The last may be the unsent tail of a stream that ended, sent at once
    with its final meta rather than paced, so it is left out of the times.
    """
    flushes = list(value(kc, f"[d.sent for d in {reply}.trace().deltas]"))
    assert wire_deltas == len(flushes), (wire_deltas, len(flushes))
    return flushes[:-1]


def assert_bounded(sent: list[float], interval: float) -> None:
    """Two deltas of one stream are never closer than ``interval`` on the pump's clock."""
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert all(g >= interval - 1e-6 for g in gaps), min(gaps)


def wait_for_stream_output(kc: BlockingKernelClient, msg_id: str, text: str,
                           timeout: float = 30) -> None:
    """Read IOPub until the cell ``msg_id`` printed ``text``."""
    for msg in iopub(kc, timeout, f"{text!r} printed by the cell"):
        if (msg["msg_type"] == "stream" and msg["parent_header"].get("msg_id") == msg_id
                and text in msg["content"]["text"]):
            return


def test_3000_pieces_at_2000_per_s_arrive_complete_in_order_and_bounded(
    kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    _, kc = kernel
    drain_iopub(kc)
    execute(kc, """
chat = ChatWidget(ScriptedSource(TEXT, rate=2000), interval=0.04)
""")
    comm_id = value(kc, "chat.model_id")
    t_send = time.monotonic()
    kc.execute("reply = chat.send('go')", silent=True)
    # probe the kernel while the stream runs (it lasts ~1.5 s): once text flows, the
    # kernel answers another request while the reply is still running
    msgs = comm_msgs(kc, comm_id, is_delta)
    probe_t0 = time.monotonic()
    assert value(kc, "reply.status") == "running", "the probe was answered only after the stream"
    probe_s = time.monotonic() - probe_t0
    msgs += comm_msgs(kc, comm_id, lambda d: final_state(d, "m2") is not None)
    t_end = msgs[-1][0]
    deltas = [(t, c) for t, d in msgs for c in delta_texts(d)]
    seqs = [c[1] for _, c in deltas]
    assert seqs == list(range(1, len(seqs) + 1))
    text = value(kc, "TEXT")
    final = final_state(msgs[-1][1], "m2")
    assert final is not None and final["status"] == "done"
    assert final["seq"] == len(deltas)
    streamed = "".join(c[2] for _, c in deltas)
    assert streamed == text  # the text travels once, in the deltas (the tail with the end)
    duration = t_end - t_send
    # bounded rate: on the pump's clock no two deltas closer than 40 ms; every delta
    # it sent arrived, and besides them only a few state updates
    assert_bounded(flush_times(kc, "reply", len(deltas)), 0.04)
    assert len(msgs) - len(deltas) <= 8
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(deltas)]
    print(f"\n3000 pieces at 2000/s: {len(msgs)} comm messages ({len(deltas)} deltas) in "
          f"{duration:.2f} s = {len(msgs) / duration:.1f}/s; median gap "
          f"{statistics.median(gaps) * 1000:.1f} ms; probe answered in {probe_s * 1000:.0f} ms")
    assert value(kc, "reply.status") == "done"


def test_stop_from_python_mid_stream(kernel: tuple[KernelManager, BlockingKernelClient]) -> None:
    _, kc = kernel
    drain_iopub(kc)
    execute(kc, """
chat2 = ChatWidget(ScriptedSource(TEXT, rate=500))
r2 = chat2.send('go')
""")
    comm_id = value(kc, "chat2.model_id")
    msgs = comm_msgs(kc, comm_id, is_delta)  # stop once text is flowing
    execute(kc, "chat2.stop()")
    msgs += comm_msgs(kc, comm_id, lambda d: final_state(d, "m2") is not None, timeout=30)
    final = final_state(msgs[-1][1], "m2")
    assert final is not None and final["status"] == "stopped"
    deltas = [c for _, d in msgs for c in delta_texts(d)]
    assert final["seq"] == len(deltas)  # exactly what was shown, nothing after
    streamed = "".join(c[2] for c in deltas)
    assert value(kc, "r2.text") == streamed
    assert 0 < len(streamed) < len(value(kc, "TEXT"))


def test_interrupt_during_wait_stops_generation(
    kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    km, kc = kernel
    drain_iopub(kc)
    execute(kc, "chat3 = ChatWidget(ScriptedSource(TEXT, rate=300)); r3 = chat3.send('go')")
    # A kernel interrupt is SIGINT to the kernel's process. Sent from outside after the
    # cell printed, it could land just before wait() under load; so a thread of the
    # kernel sends it once the main thread is inside Reply.wait (the event, not a delay).
    msg_id = kc.execute("""
import os, signal, sys, threading, time
def _interrupt_once_in_wait(main=threading.main_thread().ident):
    while True:
        f = sys._current_frames().get(main)
        while f is not None and not (f.f_code.co_name == "wait"
                                     and f.f_code.co_filename.endswith("reply.py")):
            f = f.f_back
        if f is not None:
            os.kill(os.getpid(), signal.SIGINT)
            return
        time.sleep(0.005)  # polling the main thread's position
threading.Thread(target=_interrupt_once_in_wait, daemon=True).start()
r3.wait()
""")
    reply = shell_reply(kc, msg_id, 30)
    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert value(kc, "r3.status") == "stopped"
    assert 0 < value(kc, "len(r3.text)") < value(kc, "len(TEXT)")


def test_eight_widgets_at_once_stay_within_the_global_budget(
    kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    _, kc = kernel
    drain_iopub(kc)
    execute(kc, """
chats8 = [ChatWidget(ScriptedSource(TEXT, rate=2000)) for _ in range(8)]
ids8 = [c.model_id for c in chats8]
""")
    ids = set(value(kc, "ids8"))
    execute(kc, "replies8 = [c.send('go') for c in chats8]")
    t0 = time.monotonic()
    probes: list[float] = []
    running_at_probe: list[int] = []
    ended: set[str] = set()
    counts: dict[str, int] = {i: 0 for i in ids}
    deltas: dict[str, int] = {i: 0 for i in ids}
    times: list[float] = []
    texts: dict[str, str] = {i: "" for i in ids}
    next_probe = t0 + 0.1
    for msg in iopub(kc, 60, "end of the 8 streams", poll=0.05, ticks=True):
        if len(ended) == 8:
            break
        if time.monotonic() >= next_probe:
            p0 = time.monotonic()
            running_at_probe.append(value(kc, "sum(r.status == 'running' for r in replies8)"))
            probes.append(time.monotonic() - p0)
            next_probe = time.monotonic() + 0.1
        if msg is None or msg["msg_type"] != "comm_msg" or msg["content"]["comm_id"] not in ids:
            continue
        cid = msg["content"]["comm_id"]
        data = msg["content"]["data"]
        counts[cid] += 1
        times.append(time.monotonic())
        texts[cid] += "".join(c[2] for c in delta_texts(data))
        deltas[cid] += len(delta_texts(data))
        if final_state(data, "m2") is not None:
            ended.add(cid)
    assert len(ended) == 8
    text = value(kc, "TEXT")
    assert all(t == text for t in texts.values())
    duration = times[-1] - t0
    total_rate = sum(counts.values()) / duration
    # peak over any 1 s window
    peak = max(sum(1 for t in times if s <= t < s + 1.0) for s in times)
    probes.sort()
    p50 = probes[len(probes) // 2]
    print(f"\n8 widgets x 3000 pieces at 2000/s: {sum(counts.values())} messages in "
          f"{duration:.2f} s = {total_rate:.0f}/s (peak {peak}/s in 1 s); "
          f"probe p50 {p50 * 1000:.0f} ms, max {probes[-1] * 1000:.0f} ms over {len(probes)}")
    # the budget, on the pump's clock: at most 180 deltas/s for all widgets together
    # (each stream's interval is max(DEFAULT_INTERVAL, active streams / 180 per s)), plus
    # the leading edge of each stream
    order = value(kc, "ids8")
    per_reply = [flush_times(kc, f"replies8[{i}]", deltas[cid]) for i, cid in enumerate(order)]
    for sent in per_reply:
        assert_bounded(sent, DEFAULT_INTERVAL)
    everything = sorted(t for sent in per_reply for t in sent)
    sent_peak = max(sum(1 for t in everything if s <= t < s + 1.0) for s in everything)
    assert sent_peak <= 180 + 8, sent_peak
    # besides the deltas only a few state updates per widget
    assert all(counts[i] - deltas[i] <= 8 for i in ids)
    # the kernel answered requests while the streams ran
    assert running_at_probe and running_at_probe[0] > 0, running_at_probe


def test_stream_keeps_flowing_while_the_main_thread_is_blocked(
    kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    _, kc = kernel
    drain_iopub(kc)
    execute(kc, "chat4 = ChatWidget(ScriptedSource(TEXT, rate=1000))")
    comm_id = value(kc, "chat4.model_id")
    # a busy cell: the main thread polls in a loop (the scenario) until the reply ends
    busy_cell = "r4 = chat4.send('go')\nimport time\nwhile not r4.done:\n    time.sleep(0.05)"
    msg_id = kc.execute(busy_cell)  # its time.sleep is the scenario: a main thread kept busy
    # IOPub is ordered: everything the pump sent while the cell ran comes before the
    # cell's "idle" status
    deltas = 0
    final = None
    for msg in iopub(kc, 60, "end of the busy cell"):
        if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == comm_id:
            data = msg["content"]["data"]
            deltas += len(delta_texts(data))
            final = final_state(data, "m2") or final
        if cell_idle(msg, msg_id):
            break
    assert final is not None and final["status"] == "done"  # the stream ended during the cell
    # deltas kept going out while the main thread was busy, at the bounded rate: as
    # many as the pump sent for this reply (the ratio to the stream's length is loose)
    assert_bounded(flush_times(kc, "r4", deltas), DEFAULT_INTERVAL)
    assert deltas >= 2
    duration_s = value(kc, "r4.stats['duration_ms']") / 1000
    assert deltas >= 0.25 * duration_s / DEFAULT_INTERVAL, (deltas, duration_s)
