"""Flow control with sparse acks (a view acks once per 500 ms, or once a second with 8 widgets).

A fake clock drives the pump; a simulated view renders each delta a few ms after
it is sent and acks the way ``js/src/frame.ts`` does (a message's first delta
at once, then one round per gap). Pacing must still work: the window never
starves a view that acks, whatever its gap (the pump measures it), slow renders
still stretch the interval, a view that stops acking never deadlocks the
stream, and a view acking sparsely is not taken for a silent one.
"""

from __future__ import annotations

from nbstream.core.pump import DEFAULT_ACK_TIMEOUT, DEFAULT_WINDOW, Channel, Outgoing, Pump
from nbstream.core.stream import Delta, Stream

#: the view's least gap between ack rounds (js/src/frame.ts ACK_GAP_MS)
ACK_GAP = 0.5


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class SparseView:
    """Renders deltas ``render_delay`` s after they are sent; acks like frame.ts."""

    def __init__(self, pump: Pump, ch: Channel, clock: FakeClock, *, render_delay: float = 0.02,
                 render_ms: float = 2.0, gap: float = ACK_GAP) -> None:
        self.pump, self.ch, self.clock, self.gap = pump, ch, clock, gap
        #: a round of acks in one message (AcksMsg), as frame.ts sends it; else one by one
        self.in_rounds = True
        self.render_delay, self.render_ms = render_delay, render_ms
        self.inbox: list[tuple[float, Delta]] = []
        self.acked: dict[str, int] = {}
        self.owed: dict[str, int] = {}
        self.last_round = -1e9
        self.acks_sent = 0
        self.listening = True

    def receive(self, d: Delta) -> None:
        self.inbox.append((self.clock() + self.render_delay, d))

    def frame(self) -> None:
        now = self.clock()
        urgent = False
        for at, d in [x for x in self.inbox if x[0] <= now]:
            self.inbox.remove((at, d))
            self.owed[d.id] = d.seq
            last = self.acked.get(d.id)
            urgent |= last is None
        if self.owed and (urgent or now - self.last_round >= self.gap):
            if self.listening and self.in_rounds:
                self.pump.acks(self.ch, list(self.owed.items()), self.render_ms)
            for id, seq in self.owed.items():
                if self.listening and not self.in_rounds:
                    self.pump.ack(self.ch, id, seq, self.render_ms)
                self.acked[id] = seq
                self.acks_sent += 1
            self.owed.clear()
            self.last_round = now


def setup(interval: float = 0.04, **view: float) -> tuple[FakeClock, Pump, Channel, Stream,
                                                           SparseView, list[Delta], list[int]]:
    clock = FakeClock()
    pump = Pump(clock=clock, start=False, max_rate=1e9)
    deltas: list[Delta] = []
    publishes: list[int] = []
    holder: list[SparseView] = []

    def send(out: Outgoing) -> None:
        for d in out.deltas:
            deltas.append(d)
            holder[0].receive(d)
        if out.changed:  # an update carrying metas: a status change or a republish
            publishes.append(1)

    ch = pump.open_channel(send, interval)
    v = SparseView(pump, ch, clock, **view)
    holder.append(v)
    s = Stream("m1", clock=clock)
    pump.add_stream(ch, s)
    s.set_status("running")
    return clock, pump, ch, s, v, deltas, publishes


def run(clock: FakeClock, pump: Pump, s: Stream, v: SparseView, seconds: float,
        piece_every: float = 0.005) -> int:
    """A producer puts a piece every ``piece_every`` s; frames every 16 ms. Returns the pieces."""
    t_end = clock.t + seconds
    puts = 0
    next_frame = clock.t
    while clock.t < t_end:
        clock.t += piece_every
        s.put("x")
        puts += 1
        pump.step(clock())
        if clock.t >= next_frame:
            v.frame()
            pump.step(clock())
            next_frame += 0.016
    return puts


def test_sparse_acks_keep_the_plain_rate_and_few_acks() -> None:
    clock, pump, ch, s, v, deltas, _ = setup()
    puts = run(clock, pump, s, v, 3.0)
    # 25 deltas/s for 3 s, never held back by the window...
    assert len(deltas) >= 0.9 * 3.0 / 0.04
    # ...with ~4 ack rounds a second, not one per delta
    assert v.acks_sent <= 3.0 / ACK_GAP + 2
    assert ch.acks >= 3.0 / (ACK_GAP + 0.05)
    s.finish()
    pump.step(clock())
    assert s.state()[0] == "x" * puts


def test_a_view_acking_once_a_second_is_not_held_back() -> None:
    # 8 widgets on a page: each view acks about once a second; the pump measures
    # that and widens the window and the ack timeout to match
    clock, pump, ch, s, v, deltas, publishes = setup(gap=1.0)
    run(clock, pump, s, v, 0.2)
    n0, p0 = len(deltas), len(publishes)
    run(clock, pump, s, v, 6.0)
    assert len(deltas) - n0 >= 0.9 * 6.0 / 0.04
    assert ch.ack_period > 0.8
    assert len(publishes) == p0  # not taken for a silent view either


def test_a_compare_acking_its_panes_in_one_round_a_second_is_not_held_back() -> None:
    # a Compare of 4 panes on a page of 8 widgets: its view acks the 4 streams in one
    # message about once a second. The round is one ack for the view's figures: its
    # period stays ~1 s (its 4 entries are not 3 gaps of 0), and so the window and the
    # ack timeout stay wide enough that no pane waits for the view
    clock, pump, ch, s, v, deltas, publishes = setup(gap=1.0)
    panes = [s]
    for i in range(2, 5):
        p = Stream(f"m{i}", clock=clock)
        pump.add_stream(ch, p)
        p.set_status("running")
        panes.append(p)
    t_end = clock.t + 6.0
    next_frame = clock.t
    puts = 0
    while clock.t < t_end:
        clock.t += 0.005
        puts += 1
        for p in panes:
            p.put("x")
        pump.step(clock())
        if clock.t >= next_frame:
            v.frame()
            pump.step(clock())
            next_frame += 0.016
    assert ch.ack_period > 0.8, ch.ack_period
    per_pane = {p.id: sum(1 for d in deltas if d.id == p.id) for p in panes}
    assert min(per_pane.values()) >= 0.9 * 6.0 / 0.04, per_pane
    for p in panes:
        p.finish()
    pump.step(clock())
    assert [p.state()[0] for p in panes] == ["x" * puts] * 4  # nothing lost


def test_acks_that_stop_never_deadlock_the_stream() -> None:
    clock, pump, ch, s, v, deltas, _ = setup()
    puts = run(clock, pump, s, v, 1.0)
    n = len(deltas)
    v.listening = False  # the kernel's main thread is busy: acks are not read
    puts += run(clock, pump, s, v, 4.0)
    # it paused for at most the ack timeout, then kept the plain bounded rate
    assert len(deltas) - n >= (4.0 - DEFAULT_ACK_TIMEOUT) / 0.04 - 3
    v.listening = True  # the cell finished: acks flow again and so does the window
    puts += run(clock, pump, s, v, 1.0)
    s.finish()
    pump.step(clock())
    assert s.state()[0] == "x" * puts  # nothing lost


def test_a_view_that_stops_rendering_holds_the_stream_to_the_window() -> None:
    clock, pump, ch, s, v, deltas, _ = setup()
    run(clock, pump, s, v, 1.0)
    n = len(deltas)
    v.render_delay = 1e9  # a hidden tab: frames stop, nothing is acked
    run(clock, pump, s, v, DEFAULT_ACK_TIMEOUT - 0.05)
    # the deltas in flight when it stopped, at most the window (2.5 ack periods' worth)
    assert len(deltas) - n <= max(DEFAULT_WINDOW, 2.5 * ch.ack_period / 0.04 + 1)


def test_slow_renders_reported_sparsely_still_stretch_the_interval() -> None:
    clock, pump, ch, s, v, deltas, _ = setup(render_ms=40.0)
    run(clock, pump, s, v, 4.0)
    assert s.interval > 0.1  # 3 x the render time, within the ceiling
    assert len(deltas) < 4.0 / 0.04 / 2


def test_a_view_acking_sparsely_is_not_taken_for_a_silent_one() -> None:
    clock, pump, ch, s, v, deltas, publishes = setup()
    run(clock, pump, s, v, 0.1)
    n0 = len(publishes)
    run(clock, pump, s, v, 5.0)
    assert len(publishes) == n0  # no periodic republish of the state


def test_a_browser_that_slows_down_is_met_within_a_few_sparse_acks() -> None:
    # 8 widgets: the view acks once a second; its renders go from 2 to 40 ms
    clock, pump, ch, s, v, deltas, _ = setup(gap=1.0)
    run(clock, pump, s, v, 2.0)
    assert s.interval < 0.05
    v.render_ms = 40.0
    run(clock, pump, s, v, 3.0)  # three acks later
    assert s.interval > 0.1  # 3 x the render time, within the ceiling
