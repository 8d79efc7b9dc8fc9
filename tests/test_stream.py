"""Unit tests of the coalescing stream and the pump, with a fake clock."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import pytest
from _wait import wait_until
from hypothesis import given, settings
from hypothesis import strategies as st

from nbstream.core.pump import (
    ACK_PERIOD_WINDOWS,
    ASSUMED_ACK_PERIOD,
    DEFAULT_ACK_TIMEOUT,
    DEFAULT_WINDOW,
    Outgoing,
    Pump,
)
from nbstream.core.stream import Delta, Limits, Stream
from nbstream.sources.base import Cancelled


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


def sink(deltas: list[Delta], publishes: list[int] | None = None) -> Callable[[Outgoing], None]:
    """A channel's send that keeps the deltas, and counts the updates that carry metas."""
    def send(out: Outgoing) -> None:
        deltas.extend(out.deltas)
        if out.changed and publishes is not None:
            publishes.append(1)
    return send


def make(clock: FakeClock, interval: float = 0.04, **kw: object) -> tuple[Pump, list[Delta], list[int], Stream]:
    pump = Pump(clock=clock, start=False, max_rate=1e9)
    deltas: list[Delta] = []
    publishes: list[int] = []
    ch = pump.open_channel(sink(deltas, publishes), interval)
    s = Stream("m1", clock=clock, **kw)  # type: ignore[arg-type]
    pump.add_stream(ch, s)
    s.set_status("running")
    return pump, deltas, publishes, s


def feed(clock: FakeClock, pump: Pump, s: Stream, n: int, *, every: float, piece: str) -> None:
    """The producer puts ``piece`` every ``every`` seconds, ``n`` times; the pump keeps up."""
    for _ in range(n):
        clock.advance(every)
        s.put(piece)
        pump.step(clock())


def joined(deltas: list[Delta]) -> str:
    return "".join(d.text for d in deltas)


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.text(min_size=0, max_size=12), min_size=0, max_size=120),
    gaps=st.lists(st.floats(min_value=0.0, max_value=0.2), min_size=120, max_size=120),
    interval=st.sampled_from([0.01, 0.04, 0.1]),
)
def test_coalescing_never_loses_or_reorders(pieces: list[str], gaps: list[float],
                                            interval: float) -> None:
    clock = FakeClock()
    pump, deltas, _, s = make(clock, interval)
    start = clock()
    for piece, gap in zip(pieces, gaps):
        clock.advance(gap)
        s.put(piece)
        pump.step(clock())
    elapsed = clock() - start
    # every delta is numbered 1..n without a hole
    assert [d.seq for d in deltas] == list(range(1, len(deltas) + 1))
    # flushes are bounded by the interval (+1 for the leading edge)
    assert len(deltas) <= math.floor(elapsed / interval) + 1
    s.finish()
    pump.step(clock())
    text, seq, status, _, _ = s.state()
    assert status == "done"
    assert text == "".join(pieces)
    # the deltas are a prefix of the final text; the state carries the tail
    assert text.startswith(joined(deltas))
    assert seq >= len(deltas)


def test_first_piece_is_flushed_at_once_then_rate_bounded() -> None:
    clock = FakeClock()
    pump, deltas, _, s = make(clock, 0.05)
    s.put("Hello")
    pump.step(clock())
    assert deltas == [Delta("m1", 1, "Hello")]  # leading edge: no waiting
    for _ in range(10):  # 10 pieces within one interval coalesce
        clock.advance(0.004)
        s.put(" x")
        assert pump.step(clock()) == pytest.approx(1000.05)
    assert len(deltas) == 1
    clock.advance(0.011)
    pump.step(clock())
    assert deltas[1] == Delta("m1", 2, " x" * 10)


def test_flush_count_bounded_by_elapsed_over_interval() -> None:
    clock = FakeClock()
    pump, deltas, _, s = make(clock, 0.04)
    feed(clock, pump, s, 20_000, every=0.0005, piece="a")  # 10 s at 2000 pieces/s
    assert len(deltas) <= 10.0 / 0.04 + 1
    assert len(deltas) >= 0.95 * 10.0 / 0.04  # and it does keep flushing
    assert joined(deltas) == "a" * len(joined(deltas))


def test_stop_discards_unsent_tail_and_nothing_after() -> None:
    clock = FakeClock()
    pump, deltas, _, s = make(clock, 0.04)
    s.put("shown")
    pump.step(clock())
    s.put(" never shown")
    assert s.cancel()
    with pytest.raises(Cancelled):
        s.put("late")
    clock.advance(1)
    pump.step(clock())
    assert joined(deltas) == "shown"
    text, seq, status, _, _ = s.state()
    assert (text, seq, status) == ("shown", 1, "stopped")
    assert s.stats()["discarded_chars"] == len(" never shown")
    assert s.cancel_event.is_set()
    assert not s.cancel()  # idempotent


def test_error_keeps_partial_text() -> None:
    clock = FakeClock()
    pump, deltas, _, s = make(clock)
    s.put("partial")
    s.fail(ValueError("boom"), "Traceback ...")
    pump.step(clock())
    text, _, status, error, detail = s.state()
    assert (text, status, error, detail) == ("partial", "error", "ValueError: boom", "Traceback ...")
    assert isinstance(s.error, ValueError)


@pytest.mark.parametrize(
    ("limits", "feed", "reason"),
    [
        (Limits(first_piece=1.0), [], "no first token after 1 s"),
        (Limits(stall=0.5), [0.1], "no token for 0.5 s"),
        (Limits(total=2.0), [0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3], "no end after 2 s"),
    ],
)
def test_timeouts(limits: Limits, feed: list[float], reason: str) -> None:
    clock = FakeClock()
    pump, _, _, s = make(clock, limits=limits)
    for gap in feed:
        clock.advance(gap)
        s.put("x")
        pump.step(clock())
    for _ in range(100):
        clock.advance(0.05)
        pump.step(clock())
    _, _, status, error, _ = s.state()
    assert status == "timeout"
    assert error == reason
    assert s.cancel_event.is_set()


def test_timeout_deadline_wakes_the_pump() -> None:
    clock = FakeClock()
    pump, _, _, s = make(clock, limits=Limits(first_piece=3.0))
    assert pump.step(clock()) == pytest.approx(1003.0)


def test_backpressure_blocks_a_fast_producer() -> None:
    pump = Pump(max_rate=1e9)  # real thread and clock
    try:
        deltas: list[Delta] = []
        ch = pump.open_channel(sink(deltas), 0.02)
        s = Stream("m1", max_pending=100)
        pump.add_stream(ch, s)
        s.set_status("running")
        for _ in range(2000):  # 20,000 chars through a 100-char buffer
            s.put("0123456789")
        s.finish()
        assert s.wait(30)
        assert s.text == "0123456789" * 2000
        stats = s.stats()
        assert stats["backpressure_waits"] > 0
        # bounded memory: no delta ever exceeded the buffer by more than one piece
        assert max(len(d.text) for d in deltas) <= 110
        # so the text went out in many deltas (the last flush rides on the final
        # state): the producer had to wait for the pump's flushes
        assert len(deltas) >= 20_000 // 110 - 1
    finally:
        pump.stop()


def test_cancel_releases_a_blocked_producer() -> None:
    s = Stream("m1", max_pending=5)
    s.put("12345")
    raised = threading.Event()

    def produce() -> None:
        try:
            s.put("more")
        except Cancelled:
            raised.set()

    t = threading.Thread(target=produce)
    t.start()
    wait_until(lambda: s.stats()["backpressure_waits"] > 0, message="the producer blocked")
    s.cancel()
    t.join(2)
    assert raised.is_set()


def test_global_budget_shares_rate_between_streams() -> None:
    clock = FakeClock()
    pump = Pump(clock=clock, start=False, max_rate=100.0)
    sent: list[Delta] = []
    streams = []
    for i in range(8):
        ch = pump.open_channel(sink(sent), 0.04)
        s = Stream(f"m{i}", clock=clock)
        pump.add_stream(ch, s)
        s.set_status("running")
        streams.append(s)
    for _ in range(2000):  # 2 s, every stream producing at 1000 pieces/s
        clock.advance(0.001)
        for s in streams:
            s.put("x")
        pump.step(clock())
    rate = len(sent) / 2.0
    assert rate <= 100.0 * 1.1 + 8  # the budget (8 leading-edge flushes aside)
    per_stream = {d.id: 0 for d in sent}
    for d in sent:
        per_stream[d.id] += 1
    assert max(per_stream.values()) - min(per_stream.values()) <= 2  # fair


def test_a_widgets_streams_go_together_one_message_per_interval() -> None:
    """A Compare's panes (one channel, four streams) whose pieces come at staggered
    times: once the first is due, the others with text pending and half their
    interval gone go in the same message, so the widget sends about one message per
    interval (the page handles each whole), not one per stream; every text complete,
    in order, and no stream flushed more often than its interval allows."""
    clock = FakeClock()
    pump = Pump(clock=clock, start=False, max_rate=1e9)
    messages: list[list[Delta]] = []
    ch = pump.open_channel(lambda out: messages.append(list(out.deltas)) if out.deltas
                           else None, 0.1)
    streams = [Stream(f"p{i}", clock=clock) for i in range(4)]
    for s in streams:
        pump.add_stream(ch, s)
        s.set_status("running")
    pump.step(clock())
    put = {s.id: "" for s in streams}
    for tick in range(2000):  # 5 s; each pane a piece every 10 ms, the panes 2.5 ms apart
        clock.advance(0.0025)
        s = streams[tick % 4]
        piece = f"{s.id}.{tick} "
        s.put(piece)
        put[s.id] += piece
        pump.step(clock())
    for s in streams:
        s.finish()
    pump.step(clock())
    got: dict[str, str] = {s.id: "" for s in streams}
    for m in messages:
        assert len({d.id for d in m}) == len(m)  # a stream at most once a message
        for d in m:
            got[d.id] += d.text
    assert got == put  # complete and in order
    # 50 intervals in 5 s: a message each (and the 4 leading edges, the end), not 4 each
    assert len(messages) <= 5 / 0.1 + 6
    assert sum(len(m) for m in messages) >= 3 * len(messages) - 8  # most carry all four
    per_stream = [sum(1 for m in messages for d in m if d.id == s.id) for s in streams]
    assert max(per_stream) <= 5 / 0.1 + 3  # no stream flushed more often for it


def test_pump_thread_is_woken_by_first_piece() -> None:
    pump = Pump()
    try:
        got = threading.Event()
        ch = pump.open_channel(lambda out: got.set() if out.deltas else None, 10.0)
        s = Stream("m1")
        pump.add_stream(ch, s)
        # the pump published the new stream; with nothing pending nothing is due, so it
        # sleeps until woken (no timer would ever send the piece)
        wait_until(lambda: ch.publishes == 1, message="the first publish")
        s.put("hi")
        assert got.wait(30), "the first piece did not wake the pump"
    finally:
        pump.stop()


def test_sending_failure_does_not_kill_the_pump() -> None:
    clock = FakeClock()
    pump = Pump(clock=clock, start=False)

    def broken(_: Outgoing) -> None:
        raise RuntimeError("comm closed")

    ch = pump.open_channel(broken)
    s = Stream("m1", clock=clock)
    pump.add_stream(ch, s)
    s.put("x")
    pump.step(clock())
    clock.advance(1)
    s.put("y")
    pump.step(clock())
    assert ch.deltas_sent == 2


# ----------------------------------------------------------------- flow control
def test_window_holds_back_deltas_until_acked_and_text_coalesces() -> None:
    clock = FakeClock()
    pump, deltas, _, s = make(clock, 0.04)
    ch = pump._channels[0]
    s.put("a")
    pump.step(clock())
    pump.ack(ch, "m1", 1, 1.0)  # a view is there and acks
    # the window: at least DEFAULT_WINDOW, and the deltas of 2.5 ack periods
    window = max(DEFAULT_WINDOW, math.ceil(ACK_PERIOD_WINDOWS * ASSUMED_ACK_PERIOD / 0.04))
    n = window + 2
    # n pieces within the ack timeout (at least 3 ack periods)
    every = max(DEFAULT_ACK_TIMEOUT, 3 * ASSUMED_ACK_PERIOD) / (n + 1)
    assert every >= 0.04
    feed(clock, pump, s, n, every=every, piece="b")
    # deltas 2..window+1 went out, then the pump waits for acks
    assert [d.seq for d in deltas] == list(range(1, window + 2))
    clock.advance(0.01)
    pump.ack(ch, "m1", window + 1, 1.0)
    clock.advance(0.05)
    pump.step(clock())
    assert deltas[-1].seq == window + 2
    s.finish()
    pump.step(clock())
    assert s.state()[0] == "a" + "b" * n  # nothing lost


def test_stale_acks_fall_back_to_the_bounded_rate() -> None:
    clock = FakeClock()
    pump, deltas, _, s = make(clock, 0.04)
    ch = pump._channels[0]
    s.put("a")
    pump.step(clock())
    pump.ack(ch, "m1", 1, 1.0)
    # from now on no ack arrives (the kernel's main thread is busy)
    feed(clock, pump, s, 100, every=0.04, piece="b")  # 4 s
    # it paused for at most ack_timeout, then kept streaming at the plain rate
    assert len(deltas) >= 100 - DEFAULT_ACK_TIMEOUT / 0.04 - 2


def test_no_view_means_no_window() -> None:
    clock = FakeClock()
    pump, deltas, _, s = make(clock, 0.04)
    feed(clock, pump, s, 50, every=0.04, piece="x")
    assert len(deltas) == 50


def test_slow_renders_stretch_the_interval_up_to_the_ceiling() -> None:
    clock = FakeClock()
    pump, deltas, _, s = make(clock, 0.04)
    ch = pump._channels[0]
    seq = 0
    for _ in range(300):  # 3 s; the browser takes 40 ms per render
        feed(clock, pump, s, 1, every=0.01, piece="x")
        if deltas and deltas[-1].seq > seq:
            seq = deltas[-1].seq
            pump.ack(ch, "m1", seq, 40.0)
    assert s.interval == pytest.approx(0.12, rel=0.2)  # 3 x render time
    assert len(deltas) < 3.0 / 0.04 / 2  # far fewer than the plain 25/s
    acks, ewma = ch.acks, ch.render_ms_ewma
    assert ewma > 30
    for _ in range(50):
        pump.ack(ch, "m1", seq, 0.5)  # repeated acks of an old seq are ignored
    assert (ch.acks, ch.render_ms_ewma) == (acks, ewma)
    # a stream that starts on this slow view starts at the stretched interval
    fast = Stream("m2", clock=clock)
    pump.add_stream(ch, fast)
    pump.step(clock())
    assert fast.interval == pytest.approx(s.interval) and fast.interval > 0.04 * 2


def test_acks_for_unknown_or_future_seqs_are_ignored() -> None:
    clock = FakeClock()
    pump, deltas, _, s = make(clock, 0.04)
    ch = pump._channels[0]
    s.put("a")
    pump.step(clock())
    pump.ack(ch, "nope", 1, 1.0)
    pump.ack(ch, "m1", 99, 1.0)
    assert ch.acks == 0 and ch.last_ack_at is None


def test_a_view_gone_quiet_mid_stream_gets_the_state_every_two_seconds() -> None:
    clock = FakeClock()
    pump, deltas, publishes, s = make(clock, 0.04)
    ch = pump._channels[0]
    s.put("a")
    pump.step(clock())
    pump.ack(ch, "m1", 1, 1.0)  # a view was there...
    n0 = len(publishes)
    # ...then 8 s without a word from it (reloaded, its messages lost)
    feed(clock, pump, s, 200, every=0.04, piece="b")
    assert 3 <= len(publishes) - n0 <= 4  # from SILENT_VIEW (1.5 s) of silence on, every 2 s
    assert len(deltas) > 150  # and deltas kept flowing at the plain rate


def test_no_periodic_state_without_a_view_or_while_acks_flow() -> None:
    clock = FakeClock()
    pump, deltas, publishes, s = make(clock, 0.04)
    ch = pump._channels[0]
    pump.step(clock())  # the new message's own publish
    n0 = len(publishes)
    feed(clock, pump, s, 200, every=0.04, piece="b")  # headless: never an ack
    assert len(publishes) == n0
    for _ in range(200):  # a view acking every delta
        feed(clock, pump, s, 1, every=0.04, piece="c")
        pump.ack(ch, "m1", deltas[-1].seq, 1.0)
    assert len(publishes) == n0


def test_a_history_goes_a_slice_a_step_in_the_order_given() -> None:
    clock = FakeClock()
    pump = Pump(clock=clock, start=False)
    outs: list[Outgoing] = []
    ch = pump.open_channel(outs.append)
    pump.send_history(ch, [(["m4"], ["m3"]), (["m2"], ["m1"]), ([], ["m0"])])
    # one slice a step, each whole (the reply's deltas from 0 with its meta), and the
    # next step due at once while slices are left
    assert pump.step(clock()) == clock()
    assert pump.step(clock()) == clock()
    assert math.isinf(pump.step(clock()))
    assert [(sorted(o.changed), o.resend) for o in outs] == [
        (["m3", "m4"], {"m4": 0}), (["m1", "m2"], {"m2": 0}), (["m0"], {})]
    assert math.isinf(pump.step(clock())) and len(outs) == 3  # nothing left
    # what else is due goes along: a stream's first piece is not held behind the slices
    s = Stream("m9", clock=clock)
    pump.send_history(ch, [(["m4"], []), (["m2"], [])])
    pump.add_stream(ch, s)
    s.put("hi")
    pump.step(clock())
    assert [d.id for d in outs[-1].deltas] == ["m9"] and outs[-1].resend == {"m4": 0}
