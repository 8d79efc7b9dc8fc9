"""A reply: the handle a user holds while an answer streams.

:class:`Reply` is a thin, thread-safe facade over a :class:`~nbstream.core.stream.Stream`
(which owns the text and the status) plus the job that runs the source on a
lane's worker thread (:func:`run_reply`). Any thread may read a reply or stop
it; only the worker thread produces into it; only the pump finalizes it.
While the source prepares (loads its model), what it reports with
:func:`nbstream.core.loading.report_loading` goes to this reply's stream.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, cast

from ..core.loading import reporting_to
from ..core.pieces import FinishReason, Outcome, Status
from ..core.stream import Stream
from ..core.trace import Trace
from ..generation import GenerationOptions
from ..sources.base import Cancelled, ChatMessage, Source, source_name

#: how long :meth:`Reply.wait` waits, after the ending, for the pump to hand the
#: final state to the widget's comm (it takes one pump step; this only bounds a
#: pump that is gone)
FINAL_SEND_WAIT = 5.0

log = logging.getLogger("nbstream")


class ReplyError(RuntimeError):
    """Raised by :meth:`Reply.wait` when the reply failed: the source raised
    (``__cause__`` is its error), or a time limit ended it (:class:`ReplyTimeout`).

    ``reply`` is the reply; its ``text`` holds what was produced before.
    """

    def __init__(self, message: str, reply: Reply | None = None) -> None:
        super().__init__(message)
        self.reply = reply


class ReplyTimeout(ReplyError):
    """Raised by :meth:`Reply.wait` when one of the reply's own time limits
    (``first_token_timeout``, ``stall_timeout``, ``total_timeout``) ended it.

    Not a :class:`TimeoutError`: that one is ``wait(timeout=...)`` giving up
    while the reply still runs. This reply is over (status ``timeout``).
    """


class Reply:
    """One answer being generated (returned by ``ChatWidget.send`` and friends)."""

    def __init__(
        self,
        stream: Stream,
        source: Source,
        messages: Sequence[ChatMessage] | Callable[[], Sequence[ChatMessage]],
        prompt: str = "",
        on_interrupt: Callable[[], object] | None = None,
        generation: GenerationOptions | None = None,
    ) -> None:
        self._stream = stream
        #: what a kernel interrupt during wait() stops (the widget, else this reply)
        self._on_interrupt = on_interrupt or self.cancel
        self.source = source
        self.prompt = prompt
        # resolved when generation starts, so that a reply queued behind another
        # sees that other's final text; not kept afterwards (a long conversation
        # would otherwise hold a copy of itself per reply)
        self._messages = messages
        #: which pane of a Compare widget shows it (None elsewhere)
        self.pane: int | None = None
        #: the message it follows in its widget's conversation (its prompt, usually)
        self.parent: str | None = None
        self._outcome: Outcome | None = None
        self._generation = cast(GenerationOptions, dict(generation or {}))
        self._options = source.options_in_force(self._generation)

    def _resolve_messages(self) -> list[ChatMessage]:
        msgs = self._messages
        self._messages = ()  # once: also breaks the reply <-> closure cycle
        return list(msgs() if callable(msgs) else msgs)

    @property
    def stream(self) -> Stream:
        """The :class:`~nbstream.core.stream.Stream` that owns this reply's text, parts and
        status: what the pipeline (the widget, the pump) sends from."""
        return self._stream

    @property
    def id(self) -> str:
        """The message id (unique within its widget)."""
        return self._stream.id

    @property
    def text(self) -> str:
        """The answer so far, without the reasoning (final once :attr:`status` is final)."""
        return self._stream.text

    @property
    def reasoning(self) -> str:
        """The model's reasoning (thinking) so far; "" for a model that does not think."""
        return self._stream.reasoning

    @property
    def finish_reason(self) -> FinishReason | None:
        """Why the reply ended: ``stop``, ``length`` (cut at the token limit),
        ``tool_calls``, ``abort`` (as the source said), ``cancelled`` (stopped),
        ``error``, ``timeout``; None while it runs, or when a server's stream ended
        with neither a finish reason nor an end marker."""
        return self._stream.finish_reason

    def history_content(self, include_reasoning: bool = False) -> str:
        """What the model is shown of this reply in a later turn's history: the
        answer, or with ``include_reasoning`` the reasoning first, in ``<think>`` tags
        (the form reasoning chat templates write)."""
        text, reasoning = self.text, self.reasoning
        if include_reasoning and reasoning:
            return f"<think>\n{reasoning}\n</think>\n\n{text}"
        return text

    @property
    def generation(self) -> GenerationOptions:
        """The generation options this reply asked its source for (a copy; the
        widget's ``generation`` when it was asked)."""
        return cast(GenerationOptions, dict(self._generation))

    @property
    def options(self) -> dict[str, Any]:
        """The generation options in force for this reply, the source's defaults
        included where it knows them (what the view shows on hover; a copy)."""
        return dict(self._options)

    @property
    def status(self) -> Status:
        """queued, loading, running, done, stopped, error or timeout."""
        return self._stream.status

    @property
    def done(self) -> bool:
        """True once the status is final."""
        return self._stream.final

    @property
    def reason(self) -> str | None:
        """Why it ended badly, in one line: the error, or which time limit ran out."""
        return self._stream.state()[3]

    @property
    def outcome(self) -> Outcome | None:
        """What the source's ``generate()`` returned (None until it returned)."""
        return self._outcome

    @property
    def error(self) -> BaseException | None:
        """The exception the source raised, if it failed."""
        return self._stream.error

    @property
    def stats(self) -> dict[str, Any]:
        """Figures: ttft_ms, pieces, pieces_per_s, gaps, flushes, backpressure;
        ``wire_bytes`` (sent to the view for this reply); ``reasoning_ms`` (time spent
        thinking); ``usage`` (prompt/completion/reasoning/cached tokens) and server
        figures such as ``timings`` where the source reports them."""
        return self._stream.stats()

    def trace(self) -> Trace:
        """A copy of the produced / sent / rendered timeline (see :mod:`nbstream.core.trace`)."""
        return Trace.of(self._stream)

    def plot(self, ax: Any = None) -> Any:
        """Draw :meth:`trace` with matplotlib; returns the figure."""
        return self.trace().plot(ax)

    def cancel(self) -> bool:
        """Stop the reply, keeping what was shown. True if it was still live."""
        return self._stream.cancel("stopped")

    stop = cancel

    def wait(self, timeout: float | None = None) -> str:
        """Block until the reply ends and its ending is in the widget's state (a
        notebook saved after the cell keeps it); return its text. Each ending, by status:

        * ``done``: returns the whole text.
        * ``stopped`` (Stop, Escape, ``stop()``, ``cancel()``): returns the text
          shown before the stop (possibly empty). A stop is the user's choice,
          not a failure.
        * ``error``: raises :class:`ReplyError`; ``__cause__`` is the source's
          exception, ``reply.text`` the partial text.
        * ``timeout`` (a time limit of the widget ended it): raises
          :class:`ReplyTimeout`, a :class:`ReplyError` naming the limit.

        If ``timeout`` seconds pass first, raises the builtin
        :class:`TimeoutError` and the reply goes on. A kernel interrupt
        (Ctrl-C, the notebook's stop button) while waiting stops the widget
        the reply belongs to (this reply and its queued ones) and re-raises.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            # short slices keep the wait responsive to signals on every platform
            while not self._stream.wait(0.1):
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"reply {self.id} still {self.status} after {timeout} s")
            # and its ending is in the widget's state (a notebook saved after this cell
            # keeps it); bounded, should the pump be gone
            handed = time.monotonic() + FINAL_SEND_WAIT
            while not self._stream.wait_final_sent(0.1) and time.monotonic() < handed:
                pass
        except KeyboardInterrupt:
            self._on_interrupt()
            self.cancel()  # if the widget is gone, still this reply
            raise
        status = self.status
        if status == "error":
            raise ReplyError(f"reply {self.id} failed: {self.reason}", self) from self.error
        if status == "timeout":
            raise ReplyTimeout(f"reply {self.id} timed out: {self.reason}", self)
        return self.text

    def __repr__(self) -> str:
        return f"Reply(id={self.id!r}, status={self.status!r}, chars={len(self.text)})"


def run_reply(reply: Reply) -> None:
    """Run ``reply``'s source on the current (worker) thread, start to end."""
    stream = reply._stream
    if stream.final:  # stopped while queued
        return
    source = reply.source
    try:
        if not source.prepared:
            stream.set_status("loading")
            with reporting_to(stream.report_loading):  # the source's report_loading() calls
                source.prepare()
        if stream.final:
            return
        stream.set_status("running")
        outcome = source.generate_with(reply._resolve_messages(), stream.put,
                                       stream.cancel_event, reply.generation)
        reply._outcome = outcome = outcome if isinstance(outcome, Outcome) else Outcome()
        tokens = outcome.figures.get("tokens")
        if isinstance(tokens, int):
            stream.tokens = tokens
    except Cancelled:
        pass
    except BaseException as exc:
        if stream.final:  # stopped or timed out; the source's unwinding is not an error
            return
        log.warning("nbstream: %s failed in reply %s: %s", source_name(source), reply.id, exc,
                    exc_info=log.isEnabledFor(logging.DEBUG))
        stream.fail(exc, "".join(traceback.format_exception(exc)))
        if not isinstance(exc, Exception):
            raise
    else:
        stream.finish(outcome)
