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
from typing import TYPE_CHECKING, Any, cast

from ..core import lanes
from ..core.loading import reporting_to
from ..core.pieces import FinishReason, Outcome, Status, ToolCallDelta
from ..core.stream import Run, Stream
from ..core.trace import Trace
from ..generation import GenerationOptions
from ..sources.base import Cancelled, ChatMessage, Source, source_name
from ..tools import mainthread
from ..tools.calls import ToolCall

if TYPE_CHECKING:
    from .toolturn import ToolTurn

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
        turn: Callable[[Reply], ToolTurn] | None = None,
        tool_calls: Sequence[ToolCall] = (),
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
        #: the agent loop (widgets/toolturn.py), made by ``turn(reply)`` when the reply may
        #: call tools; a restored reply (a saved conversation) holds its ``tool_calls``
        self._turn: ToolTurn | None = turn(self) if turn is not None else None
        self._restored_calls: list[ToolCall] = list(tool_calls)

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

    # ------------------------------------------------------------- tool calls (#20)
    @property
    def turn(self) -> ToolTurn | None:
        """The agent loop of this reply (None: it takes no tools, or ended elsewhere)."""
        return self._turn

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of this reply, over every round, in order (a copy of the list)."""
        turn = self._turn
        return turn.calls if turn is not None else list(self._restored_calls)

    @property
    def parts(self) -> list[dict[str, Any]]:
        """The reply's parts in order: ``{"type": "reasoning" | "answer", "text"}``,
        ``{"type": "tool_call", "id", "name", "arguments", "args", "state", "result",
        "error", "duration_ms"}`` (``result``: what the model was told, once final) and
        ``{"type": "round", "round": r}`` where round ``r`` of the tool loop starts."""
        calls = self.tool_calls
        out: list[dict[str, Any]] = []
        for run in self._stream.runs():
            kind = run[0]
            if kind in ("answer", "reasoning"):
                out.append({"type": kind, "text": run[1]})
            elif kind == "round":
                out.append({"type": "round", "round": run[2]})
            elif kind == "tool" and run[2] < len(calls):
                c = calls[run[2]]
                result = c.result
                out.append({"type": "tool_call", "id": c.id, "name": c.name,
                            "arguments": c.arguments, "args": c.args, "state": c.state,
                            "result": None if result is None else result.text,
                            "error": c.error, "duration_ms": c.duration_ms})
        return out

    def wait_for_approval(self, timeout: float | None = None) -> list[ToolCall]:
        """Block until some of this reply's tool calls wait for a person's approval, and
        return them (approve them with ``chat.approve(call.id)`` or ``chat.deny``); ``[]``
        once the reply ended without asking. Raises :class:`TimeoutError` after
        ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            waiting = [c for c in self.tool_calls if c.state == "awaiting_approval"]
            if waiting:
                return waiting
            if self._stream.wait(0.02 if not mainthread.drain() else 0):
                waiting = [c for c in self.tool_calls if c.state == "awaiting_approval"]
                return waiting
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"reply {self.id}: no tool call waits for approval after "
                                   f"{timeout} s (it is {self.status})")

    def rounds(self) -> list[dict[str, Any]]:
        """The reply round by round: ``[{"reasoning", "content", "calls": [ToolCall]}]``
        (one round for a reply without tool calls)."""
        calls = self.tool_calls
        return split_rounds(self._stream.runs(), calls)

    def history_messages(self, include_reasoning: bool = False) -> list[ChatMessage]:
        """This reply as the model is shown it later (OpenAI's shape): an assistant turn
        per round, with its ``tool_calls``, each followed by a ``tool`` turn per call
        (what the model was told: the result, the error, the denial)."""
        if not self.tool_calls:
            return [{"role": "assistant", "content": self.history_content(include_reasoning)}]
        return rounds_messages(self.rounds(), include_reasoning)

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
        """Stop the reply, keeping what was shown. True if it was still live. Its tool
        calls not finished are cancelled (a running tool's cancel event is set)."""
        stopped = self._stream.cancel("stopped")
        if self._turn is not None:
            self._turn.stop()
        return stopped

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
            # short slices keep the wait responsive to signals on every platform; on the
            # main thread, tools that must run there run between the slices
            while not self._stream.wait(0.1 if not mainthread.drain() else 0):
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
        turn = reply._turn
        if turn is None:
            outcome = source.generate_with(reply._resolve_messages(), _plain_emit(stream),
                                           stream.cancel_event, reply.generation)
        else:  # the agent loop: this is one round of it (widgets/toolturn.py)
            if turn.base is None:
                turn.base = reply._resolve_messages()
            messages = turn.base + (rounds_messages(reply.rounds(), False) if turn.round
                                    else [])
            turn.begin_round()
            schemas = turn.schemas
            options = reply.generation
            if turn.round and options.get("tool_choice") not in (None, "auto", "none"):
                # a forced call ("required", or a named tool) is for the first round only:
                # forced again, the model could never answer (OpenAI's Agents SDK does so too)
                options["tool_choice"] = "auto"
            if schemas:
                outcome = source.generate_with(messages, turn.emit, stream.cancel_event,
                                               options, schemas)
            else:
                outcome = source.generate_with(messages, turn.emit, stream.cancel_event,
                                               options)
        reply._outcome = outcome = outcome if isinstance(outcome, Outcome) else Outcome()
        tokens = outcome.figures.get("tokens")
        if isinstance(tokens, int):
            stream.tokens = (stream.tokens or 0) + tokens if turn and turn.round else tokens
        if turn is not None:
            if stream.final:
                return
            if turn.after_round(outcome):
                return  # tools run; the next round is queued on the lane when they are done
            reply._outcome = outcome = turn.final_outcome(outcome)
            turn.base = None  # not kept: a long conversation would hold a copy per reply
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


def next_round(reply: Reply) -> None:
    """The next round of ``reply``'s tool loop: back in its model's queue (any thread)."""
    source = reply.source
    lanes.submit(source.lane_key(), source.concurrency, lambda: run_reply(reply))


def _plain_emit(stream: Stream) -> Callable[[str | ToolCallDelta], None]:
    """``emit`` of a reply without the tool loop (a Compare pane's, a stream's)."""

    def emit(piece: str | ToolCallDelta) -> None:
        if isinstance(piece, ToolCallDelta):
            raise TypeError("the source emitted a tool call, but this reply takes no tools")
        stream.put(piece)

    return emit


def split_rounds(runs: Sequence[Run], calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """``runs`` (a message's parts, in order) round by round: ``[{"reasoning", "content",
    "calls"}]``; a ``round`` marker starts the next round."""
    rounds: list[dict[str, Any]] = [{"reasoning": "", "content": "", "calls": []}]
    for run in runs:
        kind = run[0]
        if kind == "round":
            rounds.append({"reasoning": "", "content": "", "calls": []})
        elif kind == "answer":
            rounds[-1]["content"] += run[1]
        elif kind == "reasoning":
            rounds[-1]["reasoning"] += run[1]
        elif kind == "tool" and run[2] < len(calls):
            call = calls[run[2]]
            if call not in rounds[-1]["calls"]:
                rounds[-1]["calls"].append(call)
    return rounds


def rounds_messages(rounds: Sequence[dict[str, Any]], include_reasoning: bool
                    ) -> list[ChatMessage]:
    """The OpenAI-shaped turns of ``rounds`` (see :meth:`Reply.history_messages`)."""
    out: list[ChatMessage] = []
    for r in rounds:
        content = r["content"]
        if include_reasoning and r["reasoning"]:
            content = f"<think>\n{r['reasoning']}\n</think>\n\n{content}"
        msg: ChatMessage = {"role": "assistant", "content": content}
        calls: list[ToolCall] = r["calls"]
        if calls:
            msg["tool_calls"] = [cast(Any, c.as_message()) for c in calls]
        out.append(msg)
        for c in calls:
            out.append({"role": "tool", "tool_call_id": c.id, "name": c.name,
                        "content": c.model_text()})
    return out
