"""One message in flight: its text, its coalescing buffer and its status.

Threads (who calls what):

* the **producer** (a worker thread running a source) calls :meth:`put`,
  :meth:`set_status`, :meth:`report_loading`, :meth:`finish` and :meth:`fail`,
  and sets :attr:`tokens`;
* the **pump** thread calls :meth:`attach` (once, before the reply is launched),
  :meth:`set_flow`, :meth:`take`, :meth:`take_loading`, :meth:`take_tail`,
  :meth:`settle`, :meth:`ack` (under its own lock, for the comm thread) and
  :meth:`final_sent`; it alone sends, so it alone advances ``seq``;
* **any** thread may call :meth:`cancel`, read :attr:`text` / :attr:`status`
  and the other properties, :meth:`state`, :meth:`stats`, :meth:`timeline`,
  and :meth:`wait` and :meth:`wait_final_sent`: a stream the pump carries
  (:meth:`attach`) is *final-sent* once the pump handed its final meta to the
  widget's comm (:meth:`final_sent`), so that ``reply.wait()`` returns only
  when the widget's state (what a saved notebook keeps) holds the ending.

Fields and their owners (the class docstring lists them): every mutable field
is guarded by the stream's condition ``_cond``, whichever thread writes it,
except the three events (``cancel_event``, ``_done``, ``_final_sent``:
thread-safe themselves) and what is set before the stream is shared (its id,
limits, clock, and the pump's callbacks, set by :meth:`attach` before the
reply is launched). The flow control the pump decides for the stream
(:attr:`interval`, :attr:`window`) is set through :meth:`set_flow`, under the
condition too. The figures (piece times, deltas, acks, backpressure, bytes
sent) are a :class:`~nbstream.core.figures.Figures` the stream records into
under its condition.

A message is made of **parts**: runs of text of one type (``"reasoning"``,
``"answer"``, and the tool loop's ``"tool"``, ``"tool_result"``, ``"round"``;
see ``pieces.py`` and :data:`Run`), in the order they arrived. A piece's type is
its Python type (a :class:`~nbstream.core.pieces.Reasoning` is thinking, a
:class:`~nbstream.core.pieces.ToolArgs` a tool call's arguments..., a plain
``str`` answer text). The message is the concatenation of ``_sent`` (deltas
already sent, numbered ``1..seq``, each a :data:`Body`) and ``_pending``
(pieces received, not yet sent). A delta moves all of ``_pending`` to
``_sent`` at once, so however fast pieces arrive, the number of deltas
depends only on how often the pump flushes.
Text is coalesced, never dropped, except on a stop: the unsent tail of a
stopped message was never shown and is discarded, so that nothing appears
after the user pressed Stop.

``_pending`` is bounded (``max_pending`` characters): a producer that outruns
the pump waits in :meth:`put` (backpressure) instead of growing memory.

While the status is ``loading``, the source may say what it waits for and how
far it got (:mod:`nbstream.core.loading`): the stream keeps only the latest report,
and the pump sends it with the message's meta at most once per
:data:`LOADING_INTERVAL` (the first at once), however often the source reports.

This module knows nothing of widgets, comms or threads other than through
the callbacks it is given, so a list and a fake clock test it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from .defaults import DEFAULT_INTERVAL, DEFAULT_MAX_PENDING
from .figures import Figures, Flush
from .loading import LoadingProgress
from .pieces import (
    FINAL_STATUSES,
    PART_TYPES,
    Cancelled,
    FinishReason,
    Outcome,
    PartType,
    RoundStart,
    Status,
    ToolArgs,
    ToolOutput,
    part_type,
)

__all__ = ["LOADING_INTERVAL", "Body", "Clock", "Delta", "Flush", "Limits", "Run", "Stream",
           "body_runs", "body_text", "make_body", "run_of"]

Clock = Callable[[], float]

#: a loading report reaches the view at most once per this many seconds (the first
#: at once): a source may report per tensor, the view needs a few updates a second
LOADING_INTERVAL = 0.25


#: One run of a delta: ``(type, text)`` for answer and reasoning text; a tool call's
#: argument text is ``("tool", text, call)`` and its result ``("tool_result", text,
#: call, display)`` (``call``: the call's number in the message; see pieces.ToolArgs);
#: ``("round", "", r)`` marks where round ``r`` (>= 1) of a tool loop starts.
Run = tuple[Any, ...]

#: What one delta appends to a message: a ``str`` when it is all answer text
#: (the common case, and the cheapest on the wire), else the runs of parts in
#: order, consecutive runs of one type (and call) merged.
Body = str | tuple[Run, ...]


def run_of(piece: str) -> Run:
    """The run a piece makes (see :data:`Run`)."""
    if isinstance(piece, RoundStart):
        return ("round", "", piece.round)
    if isinstance(piece, ToolArgs):
        return ("tool", str(piece), piece.call)
    if isinstance(piece, ToolOutput):
        return ("tool_result", str(piece), piece.call, dict(piece.display))
    return (part_type(piece), str(piece))


def make_body(runs: list[Run]) -> Body:
    """The compact :data:`Body` of ``runs`` (merged by type and call; empty text runs
    dropped, a tool call's runs kept: its first marks its place)."""
    merged: list[Run] = []
    for run in runs:
        kind, text = run[0], run[1]
        if not text and kind in ("answer", "reasoning"):
            continue
        last = merged[-1] if merged else None
        if (last is not None and last[0] == kind and kind in ("answer", "reasoning", "tool")
                and last[2:] == run[2:]):
            merged[-1] = (kind, last[1] + text, *run[2:])
        else:
            merged.append(tuple(run))
    if all(run[0] == "answer" for run in merged):
        return "".join(run[1] for run in merged)
    return tuple(merged)


def body_runs(body: Body) -> tuple[Run, ...]:
    """The runs of ``body`` (a ``str`` body is one answer run)."""
    if isinstance(body, str):
        return (("answer", body),) if body else ()
    return body


def body_text(body: Body, kind: PartType = "answer") -> str:
    """The text of ``body``'s parts of type ``kind``."""
    if isinstance(body, str):
        return body if kind == "answer" else ""
    return "".join(run[1] for run in body if run[0] == kind)


class Delta(NamedTuple):
    """What the ``seq``-th delta of message ``id`` appends (see :data:`Body`)."""

    id: str
    seq: int
    body: Body

    @property
    def text(self) -> str:
        """The answer text this delta appends."""
        return body_text(self.body, "answer")

    @property
    def chars(self) -> int:
        """Characters of every part this delta appends."""
        return sum(len(run[1]) for run in body_runs(self.body))


@dataclass(frozen=True)
class Limits:
    """Time limits of one reply, in seconds (None: no limit).

    ``first_piece`` counts from the start of generation (after any model
    loading) to the first piece; ``stall`` is the longest allowed gap between
    two pieces; ``total`` counts from the start of generation to the end.
    """

    first_piece: float | None = None
    stall: float | None = None
    total: float | None = None


class Stream:
    """Coalescing buffer and lifecycle of one message (see module docstring).

    Set at construction and never changed: ``id``, ``max_pending``,
    ``limits``, ``created_at``, the clock, ``cancel_event``; ``restored`` (by
    :meth:`from_parts`, before the stream is shared). Set by the pump in
    :meth:`attach`, under ``_cond``, before the reply is launched: ``on_wake``,
    ``on_status``, ``_attached``. Thread-safe themselves: the events
    ``cancel_event``, ``_done``, ``_final_sent``.
    Every other field is guarded by ``_cond``; who writes it: the producer
    appends pieces (``_pending``, ``_pending_chars``, ``_pending_since``,
    ``_texts``) and sets a live status (``_status``: :meth:`set_status`),
    ``started_at``, ``_finishing``, the error (``_error``, ``_error_text``,
    ``_detail``), the loading report (``_loading``, ``_loading_made``) and the
    outcome (``_outcome``); the pump moves the pending pieces into deltas
    (``_sent``, ``_sent_chars``, ``_seq``, ``_handed``, ``_last_flush``),
    counts acks (``_acked``), sends loading reports (``_loading_sent``,
    ``_loading_sent_at``), sets the flow control (``_interval``, ``_window``:
    :meth:`set_flow`) and makes an ended stream final (``_final``,
    ``_status``, ``ended_at``: :meth:`settle`); any thread's :meth:`cancel`
    discards the pending pieces and makes the stream final. ``_figures`` is
    recorded into by the producer (pieces, backpressure, tokens) and the pump
    (deltas, acks, bytes). The tool loop (``widgets/toolturn.py``, on the worker
    and its tool threads: the producer's side) pauses and resumes the time
    limits (``_paused``, ``_resumed_at``: :meth:`pause`, :meth:`resume`).
    """

    def __init__(
        self,
        stream_id: str,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        clock: Clock = time.monotonic,
        limits: Limits | None = None,
    ) -> None:
        self.id = stream_id
        #: made by :meth:`from_parts`: it never ran here, so it has no figures
        self.restored = False
        self.max_pending = max_pending
        self.limits = limits or Limits()
        self._clock = clock
        self._cond = threading.Condition()
        #: called (without the lock held) when the pump should look at this stream
        self.on_wake: Callable[[Stream], None] = lambda s: None
        #: called (without the lock held) when the status changed: the view must hear of it
        self.on_status: Callable[[Stream], None] = lambda s: None
        self.cancel_event = threading.Event()

        # flow control, decided by the pump (set_flow)
        self._interval = DEFAULT_INTERVAL
        self._window: int | None = None  # deltas that may be unacknowledged (None: no limit)
        self._acked = 0

        self._sent: list[Body] = []
        self._sent_chars = 0
        #: text of each part type, sent or pending (what ``text`` / ``reasoning`` read)
        self._texts: dict[PartType, list[str]] = {kind: [] for kind in PART_TYPES}
        self._pending: list[str] = []  # pieces, with their types (Reasoning or str)
        self._pending_chars = 0
        self._pending_since = 0.0
        self._seq = 0
        self._handed = 0  # deltas handed to the pump by take() / take_tail()
        self._last_flush = -math.inf

        self._status: Status = "queued"
        self._final = False  # status is final and published-ready
        self._finishing: Status | None = None  # producer ended; pump settles
        self._error: BaseException | None = None
        self._error_text: str | None = None
        self._detail: str | None = None
        #: while loading: the source's latest report; versions made and sent (pump)
        self._loading: LoadingProgress | None = None
        self._loading_made = 0
        self._loading_sent = 0
        self._loading_sent_at = -math.inf

        self.created_at = clock()
        self.started_at: float | None = None
        self.ended_at: float | None = None
        #: how the source said it ended (set by the producer before finish())
        self._outcome: Outcome | None = None
        self._figures = Figures()
        self._done = threading.Event()
        #: set by the pump once the final meta went to the comm (see wait_final_sent)
        self._final_sent = threading.Event()
        self._attached = False
        #: tool loop: while paused (tools run, or wait for approval) no time limit applies;
        #: after a resume, the first-piece and stall limits count from it
        self._paused = False
        self._resumed_at: float | None = None

    @classmethod
    def from_parts(
        cls,
        stream_id: str,
        *,
        text: str,
        reasoning: str = "",
        status: Status = "done",
        finish_reason: FinishReason | None = "stop",
        error: str | None = None,
        clock: Clock = time.monotonic,
        runs: list[Run] | None = None,
    ) -> Stream:
        """A message that already ended elsewhere (loaded from a file, or given as
        history): final from the start, its parts in one delta (seq 1; none when
        empty), so the pump sends it like any finished reply. ``finish_reason``
        counts for ``done`` only (the others follow from the status). ``runs``, when
        given, are its parts in order (tool calls included: ``text`` and
        ``reasoning`` are then ignored)."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"a restored message has a final status, got {status!r}")
        s = cls(stream_id, clock=clock)
        s.restored = True
        if runs is None:
            runs = [("reasoning", reasoning), ("answer", text)]
        body = make_body(runs)
        with s._cond:
            if body:
                s._sent.append(body)
                s._sent_chars = sum(len(run[1]) for run in body_runs(body))
                s._seq = s._handed = s._acked = 1  # nothing to acknowledge
            s._texts = {kind: [] for kind in PART_TYPES}
            for run in body_runs(body):
                s._texts[run[0]].append(run[1])
            if status == "done":
                s._outcome = Outcome(finish_reason)
            s._make_final(status, error)
        return s

    # ------------------------------------------------------------------ producer
    def put(self, piece: str) -> None:
        """Append a piece. Blocks while the unsent buffer is full.

        Raises :class:`Cancelled` once the stream was stopped or ended.
        """
        if not piece and not isinstance(piece, (ToolArgs, RoundStart)):
            self._check_open()
            return
        with self._cond:
            if self._pending_chars >= self.max_pending and self._open():
                self._figures.waiting()
                t0 = self._clock()
                while self._pending_chars >= self.max_pending and self._open():
                    self._cond.wait(0.5)
                self._figures.waited(self._clock() - t0)
            if not self._open():
                raise Cancelled(self.id)
            now = self._clock()
            was_empty = not self._pending
            if was_empty:
                self._pending_since = now
            self._pending.append(piece)
            self._pending_chars += len(piece)
            kind = part_type(piece)
            self._texts[kind].append(str(piece))
            self._figures.piece(now, kind, len(piece))
        if was_empty:
            self.on_wake(self)

    def set_status(self, status: Status) -> None:
        """Move a live stream to ``loading`` or ``running``."""
        with self._cond:
            if self._final or self._finishing:
                return
            changed = self._status != status
            self._status = status
            if status != "loading":  # a report not sent yet is news no more
                self._loading_sent = self._loading_made
            if status == "running" and self.started_at is None:
                self.started_at = self._clock()
        if changed:
            self.on_status(self)

    def report_loading(self, progress: LoadingProgress) -> None:
        """While the status is ``loading``: what the source is doing and how far it
        got (kept until the next report; ignored in any other status). Never blocks."""
        with self._cond:
            if self._status != "loading" or not self._open() or progress == self._loading:
                return
            self._loading = progress
            self._loading_made += 1
            # wake the pump when this is the first report it has not sent: it then
            # knows when the next send is due, so later reports need no wake-up
            wake = self._loading_made == self._loading_sent + 1
        if wake:
            self.on_wake(self)

    def finish(self, outcome: Outcome | None = None) -> None:
        """The producer ended normally (``outcome``: how, as the source said); the
        pump sends the rest and marks it done."""
        with self._cond:
            if outcome is not None and self._open():
                self._outcome = outcome
        self._end("done")

    def fail(self, error: BaseException, detail: str | None = None) -> None:
        """The producer raised; keep the text so far and record the error."""
        with self._cond:
            if self._final or self._finishing:
                return
            self._error = error
            self._error_text = f"{type(error).__name__}: {error}".strip().rstrip(":")
            self._detail = detail
        self._end("error")

    def _end(self, status: Status) -> None:
        with self._cond:
            if self._final or self._finishing:
                return
            self._finishing = status
            self._cond.notify_all()
        self.on_wake(self)

    # ----------------------------------------------------------------- any thread
    def cancel(self, status: Status = "stopped", reason: str | None = None) -> bool:
        """Stop now: discard the unsent tail, mark final. True if it was live."""
        with self._cond:
            if self._final:
                return False
            self._stop(status, reason)
        self.on_wake(self)
        return True

    @property
    def status(self) -> Status:
        with self._cond:
            return self._status

    @property
    def loading(self) -> LoadingProgress | None:
        """The source's latest loading report while the status is ``loading``, else None."""
        with self._cond:
            return self._loading if self._status == "loading" else None

    @property
    def seq(self) -> int:
        """The number of the last delta made (0: none)."""
        with self._cond:
            return self._seq

    @property
    def final(self) -> bool:
        with self._cond:
            return self._final

    @property
    def error(self) -> BaseException | None:
        with self._cond:
            return self._error

    @property
    def text(self) -> str:
        """The answer received so far (sent or not); after a stop, what was sent."""
        with self._cond:
            return "".join(self._texts["answer"])

    @property
    def reasoning(self) -> str:
        """The reasoning received so far (sent or not); after a stop, what was sent."""
        with self._cond:
            return "".join(self._texts["reasoning"])

    @property
    def finish_reason(self) -> FinishReason | None:
        """Why it ended: ``stop``, ``length``, ... as the source said, ``cancelled``,
        ``error``, ``timeout``; None while live, or when the source could not tell
        (a server's stream ended with no end marker)."""
        with self._cond:
            return self._finish_reason()

    def _finish_reason(self) -> FinishReason | None:
        # caller holds the lock
        if not self._final:
            return None
        if self._status == "done":
            return self._outcome.finish_reason if self._outcome is not None else "stop"
        return {"stopped": "cancelled", "error": "error", "timeout": "timeout"}.get(
            self._status)  # type: ignore[return-value]

    @property
    def tokens(self) -> int | None:
        """Tokens generated, when the source reports them (else pieces stand in)."""
        with self._cond:
            return self._figures.tokens

    @tokens.setter
    def tokens(self, n: int | None) -> None:
        with self._cond:
            self._figures.tokens = n

    @property
    def interval(self) -> float:
        """The flush interval the pump chose for this stream, seconds."""
        with self._cond:
            return self._interval

    @property
    def window(self) -> int | None:
        """Deltas that may be unacknowledged before the pump waits (None: no limit)."""
        with self._cond:
            return self._window

    def add_wire_bytes(self, n: int) -> None:
        """The pump sent ``n`` bytes of this message to the view."""
        with self._cond:
            self._figures.add_wire_bytes(n)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the status is final; False on timeout."""
        return self._done.wait(timeout)

    def wait_final_sent(self, timeout: float | None = None) -> bool:
        """Block until the final meta was handed to the comm; False on timeout.
        True at once for a stream no pump carries."""
        if not self._attached:
            return True
        return self._final_sent.wait(timeout)

    # ------------------------------------------------------------------- pump
    def attach(self, on_wake: Callable[[Stream], None] | None = None,
               on_status: Callable[[Stream], None] | None = None) -> None:
        """A pump carries this stream from now on (its ending will be sent); it is
        woken by ``on_wake`` and hears of status changes by ``on_status``. Called
        once, before the reply is launched."""
        with self._cond:
            if on_wake is not None:
                self.on_wake = on_wake
            if on_status is not None:
                self.on_status = on_status
            self._attached = True

    def set_flow(self, interval: float, window: int | None) -> None:
        """The pump's flow control for this stream: flush at most once per
        ``interval`` seconds, with at most ``window`` deltas unacknowledged (None:
        no limit)."""
        with self._cond:
            self._interval = interval
            self._window = window

    def final_sent(self) -> None:
        """The pump handed the final meta to the comm (or gave up: the channel closed)."""
        self._final_sent.set()

    def due_at(self) -> float | None:
        """When the pump should next act on this stream (None: not until woken)."""
        with self._cond:
            if self._final:
                return None
            if self._finishing:
                return -math.inf
            t = math.inf
            if self._pending and not self._window_full():
                t = self._last_flush + self._interval
            if self._loading_made != self._loading_sent:
                t = min(t, self._loading_sent_at + LOADING_INTERVAL)
            return min(t, self._deadline())

    def _window_full(self) -> bool:
        # caller holds the lock
        return self._window is not None and self._seq - self._acked >= self._window

    def unacked_since(self) -> float | None:
        """When the oldest unacknowledged delta was sent (None: all acknowledged)."""
        with self._cond:
            if self._acked >= self._seq:
                return None
            return self._figures.sent_at(self._acked + 1)

    def ack(self, seq: int, render_ms: float, now: float) -> float | None:
        """The view rendered deltas up to ``seq``: the ack lag of delta ``seq`` (ms), or
        None if that was no news."""
        with self._cond:
            if seq <= self._acked or seq > self._seq:
                return None
            lag_ms = self._figures.acked(self._acked, seq, now, float(render_ms))
            self._acked = seq
            return lag_ms

    def _deadline(self) -> float:
        lim = self.limits
        if self.started_at is None or self._status != "running" or self._paused:
            return math.inf
        t = math.inf
        if lim.total is not None:
            t = min(t, self.started_at + lim.total)
        # after a tool round, the first-piece and stall limits count from the resume
        start = self.started_at if self._resumed_at is None else self._resumed_at
        last_piece = self._figures.last_piece_at
        if last_piece is None or last_piece < start:
            if lim.first_piece is not None:
                t = min(t, start + lim.first_piece)
        elif lim.stall is not None:
            t = min(t, last_piece + lim.stall)
        return t

    def take(self, now: float, early: float = 0.0) -> Delta | None:
        """Return the pending text as one delta if one is due at ``now``, or within
        ``early`` seconds of it (the pump sends the streams of one widget together)."""
        with self._cond:
            if (self._final or not self._pending
                    or now + early < self._last_flush + self._interval):
                return None
            if self._window_full():
                return None
            d = self._flush(now)
            self._handed = self._seq
            return d

    def _flush(self, now: float) -> Delta:
        body = make_body([run_of(p) for p in self._pending])
        chars = self._pending_chars
        self._seq += 1
        self._figures.flushed(self._seq, self._pending_since, now, chars)
        self._sent.append(body)
        self._sent_chars += chars
        self._pending.clear()
        self._pending_chars = 0
        self._last_flush = now
        self._cond.notify_all()  # room for a producer waiting in put()
        return Delta(self.id, self._seq, body)

    def take_loading(self, now: float) -> bool:
        """True if a loading report the view has not seen is due at ``now``: the pump
        then sends the meta (which carries :attr:`loading`), and the next report
        waits :data:`LOADING_INTERVAL`."""
        with self._cond:
            if (self._loading_made == self._loading_sent
                    or now < self._loading_sent_at + LOADING_INTERVAL):
                return False
            self._loading_sent = self._loading_made
            self._loading_sent_at = now
            return self._status == "loading" and not self._final

    def take_tail(self) -> list[Delta]:
        """The deltas :meth:`settle` flushed that :meth:`take` did not hand out (the
        unsent tail of an ended stream: at most one)."""
        with self._cond:
            tail = [Delta(self.id, i + 1, self._sent[i]) for i in range(self._handed, self._seq)]
            self._handed = self._seq
            return tail

    def sent_deltas(self, after: int = 0) -> list[Delta]:
        """Copies of the deltas already sent after number ``after`` (to repair a gap)."""
        with self._cond:
            return [Delta(self.id, i + 1, b) for i, b in enumerate(self._sent) if i >= after]

    def settle(self, now: float) -> bool:
        """Pump step for a stream that ended or ran out of time.

        An ended stream's unsent tail is folded into its final state (no
        separate delta: the state carries it). A stream past a time limit is
        ended with status ``timeout``. Returns True if the stream became final.
        """
        with self._cond:
            if self._final:
                return False
            if self._finishing:
                if self._pending:
                    self._flush(now)
                self._make_final(self._finishing, self._error_text)
                return True
            if now >= self._deadline():
                self._stop("timeout", self._timeout_reason(now))
                return True
            return False

    def _timeout_reason(self, now: float) -> str:
        lim, start = self.limits, self.started_at or now
        if lim.total is not None and now >= start + lim.total:
            return f"no end after {lim.total:g} s"
        if self._resumed_at is not None:
            start = self._resumed_at
        last_piece = self._figures.last_piece_at
        if last_piece is None or last_piece < start:
            return f"no first token after {lim.first_piece:g} s"
        return f"no token for {lim.stall:g} s"

    def _stop(self, status: Status, reason: str | None) -> None:
        # caller holds the lock: the unsent tail was never shown, so it is discarded
        self.cancel_event.set()
        self._figures.discarded(self._pending_chars)
        for p in reversed(self._pending):  # the newest piece of its type: drop it there too
            self._texts[part_type(p)].pop()
        self._pending.clear()
        self._pending_chars = 0
        self._finishing = None
        self._make_final(status, reason)

    def _make_final(self, status: Status, reason: str | None) -> None:
        # caller holds the lock
        self._status = status
        self._final = True
        if status != "done" and reason:
            self._error_text = reason
        self.ended_at = self._clock()
        self._cond.notify_all()
        self._done.set()

    def state(self) -> tuple[str, int, Status, str | None, str | None]:
        """(answer, seq, status, error, detail): the answer of exactly deltas 1..seq."""
        with self._cond:
            return (
                "".join(body_text(b) for b in self._sent),
                self._seq,
                self._status,
                self._error_text if self._status in ("error", "timeout") else None,
                self._detail,
            )

    # ------------------------------------------------------- tool loop (#20)
    def pause(self) -> None:
        """The reply waits for its tools (or a person's approval): no time limit applies
        until :meth:`resume` (producer side: the tool loop)."""
        with self._cond:
            self._paused = True
        self.on_wake(self)

    def resume(self) -> None:
        """The model is asked again after a tool round: the time limits apply again, the
        first-piece and stall limits counting from now."""
        with self._cond:
            self._paused = False
            self._resumed_at = self._clock()
        self.on_wake(self)

    def touch(self) -> None:
        """Something the message's meta carries changed (a tool call's state): the pump
        sends the meta again."""
        self.on_status(self)

    def runs(self) -> list[Run]:
        """Every part received so far (sent or not), in order, merged (see :data:`Run`)."""
        with self._cond:
            runs = [run for body in self._sent for run in body_runs(body)]
            runs += [run_of(p) for p in self._pending]
        body = make_body(runs)
        return list(body_runs(body))

    # ------------------------------------------------------------------ figures
    def stats(self) -> dict[str, Any]:
        """Figures of this message so far (times in milliseconds; see
        :meth:`~nbstream.core.figures.Figures.stats`)."""
        with self._cond:  # one consistent copy; the figures are computed outside
            figures = self._figures.copy()
            start = self.started_at
            end = self.ended_at if self.ended_at is not None else self._clock()
            chars = self._sent_chars + self._pending_chars
            reasoning_chars = sum(len(t) for t in self._texts["reasoning"])
            acked = self._acked
            outcome = self._outcome
        return figures.stats(start=start, end=end, chars=chars, acked=acked,
                             reasoning_chars=reasoning_chars, outcome=outcome)

    def timeline(self) -> tuple[float | None, list[tuple[float, int]], list[Flush]]:
        """(generation start, [(time, chars) per piece], flushes): a copy, for traces."""
        with self._cond:
            pieces, flushes = self._figures.timeline()
            return self.started_at, pieces, flushes

    # ---------------------------------------------------------------- internals
    def _open(self) -> bool:
        return not self._final and self._finishing is None

    def _check_open(self) -> None:
        with self._cond:
            if not self._open():
                raise Cancelled(self.id)

