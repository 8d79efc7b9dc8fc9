"""The pump: the one thread that sends to the browser.

One pump serves every widget in the kernel. Each widget registers a
:class:`Channel` (its streams plus one callback, ``send``). The pump thread
sleeps on a condition until the earliest moment something is due (a stream's
next flush, a time limit) or until woken (a first piece, a status change, a
stop, a view asking for a resync), then, outside its lock, hands each channel
one :class:`Outgoing`: the deltas due, the messages whose meta changed and the
deltas to send again. The widget turns it into one update message (see
``protocol.py``), so a step costs one message per widget at most, and what it
carries is only what changed: never the whole conversation.

Why one thread: sending from one place keeps deltas and state updates of a
widget in order, keeps the total message rate under one budget (Jupyter's
server drops IOPub messages above ``iopub_msg_rate_limit``, 1000/s by default,
counted over all comms), and lets the budget be shared fairly: the flush
interval of every stream is ``max(interval, active_streams / max_rate)``, so
8 streams at the default ~29/s each share the budget, and more streams
get proportionally longer intervals rather than more messages (the budget
is 180 deltas/s, leaving room for state updates under ~200 messages/s).

Rhythm (leading edge + bounded rate, as in tqdm and rich.live): the first
piece of a stream is sent at once, because time to first token is what makes
streaming feel fast; after that a stream flushes at most once per interval,
and all text that arrived in between travels as one delta. The streams of one
widget flush together: when one is due, the widget's others with text pending and
half their interval gone go in the same message, so a ``Compare`` of four panes
sends one message per interval, not four (the page handles every message whole:
its websocket frame, JupyterLab, the widget manager; 8 Compares of 4 panes sent
42 % fewer comm messages at the median, benchmarks/many_streams.py). A stream that ends
is settled at once, its unsent tail sent with its final meta in one message.
A loading model's progress reports (``Stream.take_loading``) follow the same
rhythm: the first at once, then the latest at most every
``stream.LOADING_INTERVAL`` (0.25 s), in the message's meta. A history loaded at
once (:meth:`Pump.send_history`) goes whole, one slice of about 48 KB a step, newest
first, the steps back to back: the browser decodes each message in one task, so no
message (and no task) grows with the history.

Flow control (credits): a view acknowledges the newest delta it rendered, with
the mean DOM time of its frames since its last ack, but sparsely
(``js/src/frame.ts``): a message's first delta at once, then at most one round
of acks per 500 ms per view, slower when many views stream, about 8 rounds a
second per page (so 8 widgets ack about once a second each), and the last
delta of a stream by a timer. Sparse, because every browser→kernel message
makes the kernel publish a busy and an idle status to every client: an ack per
frame tripled the traffic. So the pump measures how often each channel's view
acks (an EWMA of the time between its rounds of acks, ``ack_period``: a round
of a ``Compare``'s panes in one message is one ack, :meth:`Pump.acks`) and sizes the rest by
it, in time rather than in deltas: once a view acks on a channel, each stream
may have at most ``window`` unacknowledged deltas (at least those sent in 2.5
ack periods), and the interval grows (up to ``ceiling``) with the reported
render time and ack lag, so a slow browser or link gets fewer, larger deltas.
The text keeps accumulating meanwhile: coalesced, never dropped. Acks are read
on the kernel's main thread, which cannot read them while a cell runs (unless
comms run on a subshell); so when the oldest unacknowledged delta is older
than ``ack_timeout`` (or 3 ack periods) the window is ignored and the plain
bounded rate applies. With no view attached (nbclient, nbval) no ack ever
comes and the window never applies: nothing ever waits for a browser.
``Pump(start=False)`` plus :meth:`Pump.step` drive it with a fake clock.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypedDict

from .defaults import DEFAULT_INTERVAL
from .stream import Clock, Delta, Stream

log = logging.getLogger("nbstream.core.pump")

__all__ = ["DEFAULT_INTERVAL", "Channel", "Outgoing", "Pump", "ViewFigures", "get_pump",
           "view_figures"]
#: default budget of messages per second for all widgets together
DEFAULT_MAX_RATE = 180.0  # leaves room under ~200/s for state updates
#: flow control: the least number of deltas a view may leave unacknowledged before
#: the pump waits; more when the view acks less often (see ACK_PERIOD_WINDOWS)
DEFAULT_WINDOW = 8
#: the window holds at least the deltas sent in this many ack periods
ACK_PERIOD_WINDOWS = 2.5
#: the ack lag stretches the interval as if this many deltas were in flight
LAG_DELTAS = 4
#: longest flush interval flow control may choose, seconds
DEFAULT_CEILING = 0.25
#: an unacknowledged delta older than this (or than 3 ack periods, if longer) means
#: acks are not coming (the kernel's main thread is busy, or the view went away):
#: fall back to the plain bounded rate
DEFAULT_ACK_TIMEOUT = 0.8
#: ended messages a channel keeps, so that the late ack of a final delta finds its message,
#: and a hello re-sends the final metas a view whose link dropped may have lost
KEEP_ENDED = 16
#: render time and ack lag are smoothed over about this many seconds (at least 20% per
#: ack: an ack per frame smooths as before, an ack a second counts nearly alone)
SMOOTHING = 0.25
#: what a view is assumed to do before its period is measured (js/src/frame.ts ACK_GAP_MS)
ASSUMED_ACK_PERIOD = 0.5
#: one gap between acks counts at most this much in the period (a pause between two
#: replies is not the view's rhythm)
MAX_ACK_PERIOD = 2.0
#: while a stream runs and a view that used to ack has gone quiet for this long (or 4
#: ack periods, if longer), the state is re-published every REPUBLISH_EVERY seconds:
#: a reloaded page whose messages never reach the kernel (JupyterLab's
#: commsOverSubshells can route them to a subshell the kernel does not know) still
#: catches up, without a hello
SILENT_VIEW = 1.5
REPUBLISH_EVERY = 2.0


@dataclass
class Outgoing:
    """What one step sends through one channel (one update message)."""

    #: deltas due, in order
    deltas: list[Delta] = field(default_factory=list)
    #: ids of the messages whose meta must be sent (new, status changed, ended, removed)
    changed: set[str] = field(default_factory=set)
    #: message id -> the view's seq: send its deltas after that again (a resync)
    resend: dict[str, int] = field(default_factory=dict)
    #: the streams still live after this step, for the ``live`` key
    live: list[Stream] = field(default_factory=list)
    #: the streams that ended in this step: final-sent once this goes out
    ended: list[Stream] = field(default_factory=list)
    #: views said hello since the last step: answer them (the view's proof that the
    #: kernel hears it; see ``WelcomeMsg`` in protocol.py)
    welcome: bool = False

    def __bool__(self) -> bool:
        return bool(self.deltas or self.changed or self.resend or self.welcome)


@dataclass(eq=False)
class Channel:
    """A widget as the pump sees it. Mutable fields are guarded by the pump's lock."""

    send: Callable[[Outgoing], None]
    interval: float = DEFAULT_INTERVAL
    window: int = DEFAULT_WINDOW
    ceiling: float = DEFAULT_CEILING
    ack_timeout: float = DEFAULT_ACK_TIMEOUT
    streams: list[Stream] = field(default_factory=list)
    #: streams that ended lately: the ack of a final delta still finds its stream
    ended: deque[Stream] = field(default_factory=lambda: deque(maxlen=KEEP_ENDED))
    #: flow control state: set by acks (any thread, under the pump's lock)
    last_ack_at: float | None = None
    render_ms_ewma: float = 0.0
    ack_lag_ms_ewma: float = 0.0
    #: seconds between two acks of this channel's view, smoothed
    ack_period: float = ASSUMED_ACK_PERIOD
    acks: int = 0
    last_republish: float = -math.inf
    #: ids whose meta must be sent; deltas to send again; hellos to answer (see Outgoing)
    changed: set[str] = field(default_factory=set)
    resend: dict[str, int] = field(default_factory=dict)
    welcome: bool = False
    #: slices of a history still to send whole, one a step (see Pump.send_history)
    history: deque[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=deque)
    closed: bool = False
    #: figures: hellos from views (a view opened or reloaded), when the last came, on
    #: which thread (the main thread, or a subshell's when comms run over subshells)
    hellos: int = 0
    last_hello_at: float | None = None
    hello_thread: str = ""
    #: figures: update messages sent through this channel (those with deltas, the
    #: others), and the characters of text the deltas carried
    deltas_sent: int = 0
    publishes: int = 0
    delta_bytes: int = 0


class ViewFigures(TypedDict):
    """What the kernel knows of one widget's views (see :func:`view_figures`)."""

    #: hellos received (each view that opened or reloaded says hello once)
    hellos: int
    seconds_since_hello: float | None
    #: the thread the last hello was handled on ("MainThread" unless comms run on a subshell)
    hello_thread: str
    acks: int
    seconds_since_ack: float | None
    deltas_sent: int
    live_streams: int


class Pump:
    """Sends deltas and state updates for all channels (see module docstring)."""

    def __init__(
        self,
        *,
        clock: Clock = time.monotonic,
        max_rate: float = DEFAULT_MAX_RATE,
        start: bool = True,
    ) -> None:
        self.clock = clock
        self.max_rate = max_rate
        self._cond = threading.Condition()
        self._channels: list[Channel] = []
        self._stopping = False
        self._woken = False
        self._thread: threading.Thread | None = None
        if start:
            self._thread = threading.Thread(target=self._run, name="nbstream-pump", daemon=True)
            self._thread.start()

    # ---------------------------------------------------------------- any thread
    def open_channel(
        self,
        send: Callable[[Outgoing], None],
        interval: float = DEFAULT_INTERVAL,
    ) -> Channel:
        ch = Channel(send, interval)
        with self._cond:
            self._channels.append(ch)
        return ch

    def close_channel(self, ch: Channel) -> None:
        with self._cond:
            ch.closed = True
            if ch in self._channels:
                self._channels.remove(ch)
            orphans = [*ch.streams, *ch.ended]
        for s in orphans:  # nothing will send their ending: no one waits for it
            s.final_sent()

    def add_stream(self, ch: Channel, stream: Stream) -> None:
        """Let the pump flush ``stream`` through ``ch``, and publish the new message."""
        stream.attach(on_wake=lambda s: self.wake(),
                      on_status=lambda s: self.publish(ch, [s.id]))
        with self._cond:
            if ch.closed:
                stream.final_sent()
                return
            ch.streams.append(stream)
            ch.changed.add(stream.id)
            self._woken = True
            self._cond.notify()

    def publish(self, ch: Channel, ids: Iterable[str]) -> None:
        """Ask for the metas of messages ``ids`` to be sent (cheap; coalesced; never
        blocks). An id the widget no longer has is sent as removed."""
        with self._cond:
            ch.changed.update(ids)
            self._woken = True
            self._cond.notify()

    def resync(self, ch: Channel, stream_id: str, have: int) -> None:
        """A view lacks the deltas of ``stream_id`` after ``have``: send them again,
        with its meta."""
        with self._cond:
            ch.resend[stream_id] = min(have, ch.resend.get(stream_id, have))
            ch.changed.add(stream_id)
            self._woken = True
            self._cond.notify()

    def send_history(self, ch: Channel,
                     slices: Iterable[tuple[Iterable[str], Iterable[str]]]) -> None:
        """Send messages whole, a slice per step, in the order given: each slice is
        ``(replies, others)``, the metas and every delta of ``replies``, the metas of
        ``others``. A history loaded at once is given newest slice first (see
        ``StreamingWidget._restore``): a view never shows its first message alone,
        it shows the end at once and the older messages arrive above it, and no one
        update message grows with the history (the browser decodes each message in
        one task: a 1,000-message history in one was a 50-80 ms task, traced)."""
        with self._cond:
            for replies, others in slices:
                ch.history.append((tuple(replies), tuple(others)))
            self._woken = True
            self._cond.notify()

    def hello(self, ch: Channel) -> None:
        """A view rendered (or its link came back): note it for :func:`view_figures`,
        answer it, and send the metas of the live messages (and ``live``) again, and of
        those that ended lately: a view whose link dropped may have lost a final meta
        (it then still shows the message live, and the final meta tells it what to
        resync)."""
        with self._cond:
            ch.welcome = True
            ch.hellos += 1
            ch.last_hello_at = self.clock()
            ch.hello_thread = threading.current_thread().name
            ch.changed.update(s.id for s in ch.streams)
            ch.changed.update(s.id for s in ch.ended)
            self._woken = True
            self._cond.notify()

    def view_figures(self) -> list[ViewFigures]:
        """One :class:`ViewFigures` per open channel (a snapshot, any thread)."""
        now = self.clock()
        with self._cond:
            return [
                ViewFigures(
                    hellos=ch.hellos,
                    seconds_since_hello=None if ch.last_hello_at is None
                    else now - ch.last_hello_at,
                    hello_thread=ch.hello_thread,
                    acks=ch.acks,
                    seconds_since_ack=None if ch.last_ack_at is None else now - ch.last_ack_at,
                    deltas_sent=ch.deltas_sent,
                    live_streams=len(ch.streams),
                )
                for ch in self._channels
            ]

    def ack(self, ch: Channel, stream_id: str, seq: int, render_ms: float) -> None:
        """A view rendered delta ``seq`` of ``stream_id`` (comm thread; never blocks long)."""
        self.acks(ch, ((stream_id, seq),), render_ms)

    def acks(self, ch: Channel, entries: Iterable[tuple[str, int]], render_ms: float) -> None:
        """A view's round of acks (one ``AcksMsg``): it rendered delta ``seq`` of each
        ``(stream_id, seq)``, in order (comm thread; never blocks long). The round is one
        ack of the channel's view for its figures: the time between rounds is the view's
        ack period (the acks of one round, a ``Compare``'s panes, are not gaps of 0 that
        would shrink it, and with it the window and the ack timeout), and the round's
        ack lag is its latest stream's."""
        now = self.clock()
        with self._cond:
            lag_ms: float | None = None
            for stream_id, seq in entries:
                for s in itertools.chain(ch.streams, ch.ended):
                    if s.id == stream_id:
                        lag = s.ack(seq, render_ms, now)
                        if lag is not None:
                            if log.isEnabledFor(logging.DEBUG):
                                log.debug("ack %s#%d: render %.1f ms, lag %.1f ms", stream_id,
                                          seq, render_ms, lag)
                            ch.acks += 1
                            lag_ms = lag if lag_ms is None else max(lag_ms, lag)
                        break
            if lag_ms is None:
                return  # no news in this round
            # weights by time, so that sparse acks adapt as fast as dense ones
            a = 0.2
            if ch.last_ack_at is not None:
                gap = min(MAX_ACK_PERIOD, now - ch.last_ack_at)
                ch.ack_period = 0.7 * ch.ack_period + 0.3 * gap
                a = max(a, 1.0 - math.exp(-gap / SMOOTHING))
            ch.last_ack_at = now
            ch.render_ms_ewma = (1 - a) * ch.render_ms_ewma + a * max(0.0, render_ms)
            ch.ack_lag_ms_ewma = (1 - a) * ch.ack_lag_ms_ewma + a * lag_ms
            self._woken = True
            self._cond.notify()

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify()

    def stop(self) -> None:
        """End the pump thread (tests; the kernel's pump lives as long as the kernel)."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(5)

    def active_streams(self) -> int:
        with self._cond:
            return sum(len(ch.streams) for ch in self._channels)

    # ------------------------------------------------------------------- pump
    def step(self, now: float) -> float:
        """Do everything due at ``now``; return when next to run (inf: when woken)."""
        work: list[tuple[Channel, Outgoing]] = []
        next_at = math.inf
        with self._cond:
            active = sum(len(ch.streams) for ch in self._channels)
            share = active / self.max_rate if self.max_rate > 0 else 0.0
            for ch in self._channels:
                base = max(ch.interval, share)
                flow = ch.last_ack_at is not None  # a view is acknowledging
                interval = base
                if flow:
                    # a slow browser (long renders, slow acks) gets fewer, larger deltas
                    interval = max(base, 3.0 * ch.render_ms_ewma / 1000.0,
                                   ch.ack_lag_ms_ewma / 1000.0 / LAG_DELTAS)
                    interval = min(interval, max(base, ch.ceiling))
                # sized by how often this view acks (sparse acks, see the module docstring)
                window = max(ch.window, math.ceil(ACK_PERIOD_WINDOWS * ch.ack_period / interval))
                timeout = max(ch.ack_timeout, 3.0 * ch.ack_period)
                silent = max(SILENT_VIEW, 4.0 * ch.ack_period)
                out = Outgoing()
                for s in list(ch.streams):
                    stream_window: int | None = None
                    if flow:
                        oldest = s.unacked_since()
                        if oldest is None or now - oldest < timeout:
                            stream_window = window
                            if oldest is not None:
                                next_at = min(next_at, oldest + timeout)
                    s.set_flow(interval, stream_window)
                    if s.settle(now) or s.final:
                        if log.isEnabledFor(logging.DEBUG):
                            log.debug("%s ended: %s %s", s.id, s.status, s.stats())
                        ch.streams.remove(s)
                        ch.ended.append(s)
                        out.ended.append(s)
                        # the unsent tail, flushed by settle, goes with the final meta
                        out.deltas.extend(s.take_tail())
                        ch.changed.add(s.id)
                        continue
                    if s.take_loading(now):  # a loading report (rate-bounded by the stream)
                        ch.changed.add(s.id)
                    d = s.take(now)
                    if d is not None:
                        out.deltas.append(d)
                if out.deltas:
                    # a message goes out: the channel's other streams with text pending go
                    # in it too if half their interval passed, so that a widget of several
                    # streams (a Compare's panes) sends one message per interval, not one
                    # per stream: the page handles each message whole (its websocket,
                    # JupyterLab, the widget manager), whatever it carries
                    taken = {d.id for d in out.deltas}
                    for s in ch.streams:
                        if s.id not in taken:
                            d = s.take(now, early=s.interval / 2)
                            if d is not None:
                                out.deltas.append(d)
                for s in ch.streams:
                    due = s.due_at()
                    if due is not None:
                        next_at = min(next_at, due)
                if ch.streams and flow and now - ch.last_ack_at > silent:  # type: ignore[operator]
                    if now - ch.last_republish >= REPUBLISH_EVERY:
                        # a view that acked went quiet: send the live messages whole again
                        ch.last_republish = now
                        for s in ch.streams:
                            ch.resend[s.id] = 0
                            ch.changed.add(s.id)
                    next_at = min(next_at, ch.last_republish + REPUBLISH_EVERY)
                if ch.history:  # a history's next slice; the one after it next step
                    replies, others = ch.history.popleft()
                    for mid in replies:
                        ch.resend[mid] = 0
                    ch.changed.update(replies)
                    ch.changed.update(others)
                    if ch.history:
                        next_at = now
                out.changed, ch.changed = ch.changed, set()
                out.resend, ch.resend = ch.resend, {}
                out.welcome, ch.welcome = ch.welcome, False
                if out:
                    out.live = list(ch.streams)
                    work.append((ch, out))
        for ch, out in work:
            try:
                if out.deltas:
                    ch.deltas_sent += 1
                    ch.delta_bytes += sum(d.chars for d in out.deltas)
                else:
                    ch.publishes += 1
                ch.send(out)
                if log.isEnabledFor(logging.DEBUG):
                    after = (self.clock() - now) * 1000
                    for d in out.deltas:
                        log.debug("delta %s#%d: %d chars, sent %.1f ms after the step",
                                  d.id, d.seq, d.chars, after)
                    if out.changed:
                        log.debug("metas %s sent", ", ".join(sorted(out.changed)))
            except Exception:  # a closed comm must not kill the pump
                log.exception("nbstream: sending to the view failed")
            finally:
                for s in out.ended:
                    s.final_sent()
        return next_at

    def _run(self) -> None:
        next_at = -math.inf
        while True:
            with self._cond:
                # _woken is set under this lock by whoever notifies, so a wake-up
                # that came while we were stepping is not lost.
                while not self._stopping and not self._woken:
                    wait = next_at - self.clock()
                    if wait <= 0:
                        break
                    self._cond.wait(None if math.isinf(wait) else wait)
                if self._stopping:
                    return
                self._woken = False
            try:
                next_at = self.step(self.clock())
            except Exception:
                log.exception("nbstream: pump step failed")
                next_at = self.clock() + 0.1


_pump: Pump | None = None
_pump_lock = threading.Lock()


def get_pump() -> Pump:
    """The kernel's pump, started on first use."""
    global _pump
    with _pump_lock:
        if _pump is None:
            _pump = Pump()
        return _pump


def view_figures() -> list[ViewFigures]:
    """Per open widget, what its views told the kernel: hellos, acks, when (public, read-only)."""
    with _pump_lock:
        pump = _pump
    return [] if pump is None else pump.view_figures()
