"""The agent loop of one reply: the model calls tools, they run, the model is asked again.

A reply is one assistant message however many rounds it takes. Round 0 is the
model's first answer; when it ends with tool calls, the calls are checked,
approved where a person must approve them, run, and their results put into
the message; then round 1 asks the model again with those results, and so on
until the model answers without a call, or ``max_tool_rounds`` rounds of
tools have run (the turn then ends with ``finish_reason="max_tool_rounds"``,
the last calls not run). Every part of every round is in the one message, in
order: the view shows round after round (reasoning, text, tool cards), and
``to_messages()`` writes them as OpenAI does (an assistant turn with
``tool_calls``, a ``tool`` turn per result, the next assistant turn).

Where things run:

* generation runs on the model's lane (a worker thread), one round per
  turn of the lane: between rounds the lane is free, so a reply waiting for an
  approval never holds up another chat on the same model;
* :meth:`ToolTurn.emit` is the source's ``emit`` (the worker thread): a
  :class:`~nbstream.core.pieces.ToolCallDelta` becomes a :class:`ToolCall` and
  its argument pieces go into the message (bounded: :data:`MAX_ARGS_SHOWN`);
* the tool phase runs on a thread of its own (``nbstream-tools``), each call
  on a thread of its own (``nbstream-tool-<name>``), or, for a tool with
  ``main_thread=True``, on the kernel's main thread between cells
  (:mod:`nbstream.tools.mainthread`);
* a person's decision (the card's buttons, ``chat.approve``) arrives on the
  main thread or the comm's thread and only records it (:meth:`decide`).

Stop (:meth:`ToolTurn.stop`, from ``reply.cancel()``) ends the turn at once:
calls not finished are ``cancelled`` and their ``cancel`` event is set (a tool
may check it); a tool that ignores it is abandoned, and its late result is
dropped and logged. The turn's own state is guarded by ``_cond``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.pieces import (
    Cancelled,
    ChatMessage,
    Outcome,
    RoundStart,
    ToolArgs,
    ToolCallDelta,
    ToolOutput,
    ToolSchema,
)
from ..core.stream import Run, Stream
from ..tools import mainthread
from ..tools.calls import DENIED_TEXT, ToolCall, parse_arguments
from ..tools.results import ToolResult, bounded, to_result
from ..tools.tool import Tool

log = logging.getLogger("nbstream")

__all__ = ["DEFAULT_MAX_TOOL_ROUNDS", "MAX_ARGS_SHOWN", "AllowList", "ToolTurn",
           "restored_rounds"]

#: rounds of tool calls a turn may run before it ends (OpenAI's Agents SDK's default too):
#: enough for a model that looks something up, checks it and answers; a model stuck
#: calling tools in a loop ends there, visibly, instead of running forever
DEFAULT_MAX_TOOL_ROUNDS = 10
#: characters of a call's arguments the view receives (and a saved notebook keeps);
#: the call itself gets all of them, and the card says how many were left out
MAX_ARGS_SHOWN = 32_000


class AllowList:
    """The tools a person chose "Always allow" for, in one widget (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: set[str] = set()

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._names

    def add(self, name: str) -> None:
        with self._lock:
            self._names.add(name)

    def discard(self, name: str) -> None:
        with self._lock:
            self._names.discard(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._names)


class ToolTurn:
    """The tool calls of one reply and the loop over its rounds (see the module docstring)."""

    def __init__(self, stream: Stream, tools: Sequence[Tool], max_rounds: int,
                 allowed: AllowList, resubmit: Callable[[], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream
        self._tools = {t.name: t for t in tools}
        self._schemas = [t.schema for t in tools]
        self.max_rounds = max_rounds
        self._allowed = allowed
        self._resubmit = resubmit
        self._clock = clock
        self._cond = threading.Condition()
        self._stopped = False
        #: every call of the reply, in order (read by the reply and the widget)
        self._calls: list[ToolCall] = []
        #: the round being generated, and its calls by the model's index
        self.round = 0
        self._by_index: dict[int, ToolCall] = {}
        self._shown: dict[int, int] = {}  # call number -> argument characters put
        #: the conversation before this reply, kept from round 0 for the later rounds
        self.base: list[ChatMessage] | None = None
        self._usage: dict[str, int] = {}

    # ------------------------------------------------------------------ reading
    @property
    def schemas(self) -> list[ToolSchema]:
        """The tools as the source hands them to its model."""
        return list(self._schemas)

    @property
    def calls(self) -> list[ToolCall]:
        with self._cond:
            return list(self._calls)

    def find(self, call_id: str) -> ToolCall | None:
        with self._cond:
            return next((c for c in self._calls if c.id == call_id), None)

    # ------------------------------------------------------------ worker thread
    def begin_round(self) -> None:
        """Generation of :attr:`round` starts (the worker, before ``generate``)."""
        self._by_index = {}
        if self.round > 0:
            self._stream.resume()
            self._stream.put(RoundStart(self.round))

    def emit(self, piece: str | ToolCallDelta) -> None:
        """The source's ``emit``: text goes to the message, tool-call pieces to their call."""
        if not isinstance(piece, ToolCallDelta):
            if isinstance(piece, (ToolArgs, ToolOutput, RoundStart)):
                raise TypeError("a source emits str, Reasoning or ToolCallDelta pieces; "
                                f"{type(piece).__name__} is the tool loop's own")
            self._stream.put(piece)
            return
        if isinstance(piece.index, bool) or not isinstance(piece.index, int) or piece.index < 0:
            raise TypeError(f"ToolCallDelta.index must be an int >= 0, got {piece.index!r}")
        call = self._by_index.get(piece.index)
        if call is None:
            with self._cond:
                if self._stopped:
                    raise Cancelled(self._stream.id)
                number = len(self._calls)
                call = ToolCall(number, self.round, piece.index,
                                piece.id or f"call_{self.round}_{piece.index}",
                                piece.name or "", on_change=self._stream.touch, clock=self._clock)
                self._calls.append(call)
            self._by_index[piece.index] = call
            call.add(piece.arguments)
            self._put_args(call, piece.arguments, first=True)
            self._stream.touch()  # the meta names the new call
            return
        call.add(piece.arguments, piece.id, piece.name)
        if piece.arguments:
            self._put_args(call, piece.arguments)
        if piece.id or piece.name:
            self._stream.touch()

    def _put_args(self, call: ToolCall, text: str, first: bool = False) -> None:
        shown = self._shown.get(call.number, 0)
        room = MAX_ARGS_SHOWN - shown
        piece = text[:max(0, room)]
        if piece or first:
            self._stream.put(ToolArgs(piece, call.number))
            self._shown[call.number] = shown + len(piece)

    def shown_arguments(self, call: ToolCall) -> int:
        """Characters of ``call``'s arguments the view received."""
        return self._shown.get(call.number, len(call.arguments))

    def round_calls(self) -> list[ToolCall]:
        """The calls the model asked for in the round just generated."""
        with self._cond:
            return [c for c in self._calls if c.round == self.round]

    def after_round(self, outcome: Outcome) -> bool:
        """The round's generation ended (worker thread). True: the turn goes on (its
        tools run on a thread of their own, then the model is asked again); False: the
        reply ends here with the returned outcome (:meth:`final_outcome`)."""
        for k, v in outcome.usage.items():
            if isinstance(v, int):
                self._usage[k] = self._usage.get(k, 0) + v
        calls = self.round_calls()
        for c in calls:
            c.to("ready")
        if not calls:
            return False
        if not self._tools:
            for c in calls:
                c.to("error", error="this chat has no tools", result=ToolResult(
                    f"Error: there is no tool named {c.name!r} (no tools were given)"))
            return False
        if self.round >= self.max_rounds:
            for c in calls:
                c.to("cancelled", error=f"not run: the turn reached max_tool_rounds "
                                        f"({self.max_rounds})")
            return False
        self._stream.pause()
        threading.Thread(target=self._phase, args=(calls,), daemon=True,
                         name=f"nbstream-tools-{self._stream.id}").start()
        return True

    def final_outcome(self, outcome: Outcome) -> Outcome:
        """How the reply ends: the last round's outcome, ``max_tool_rounds`` where that
        ended it, the usage summed over the rounds."""
        reason = outcome.finish_reason
        calls = self.round_calls()
        if calls and self._tools and self.round >= self.max_rounds:
            reason = "max_tool_rounds"
        usage = dict(self._usage) if self.round else dict(outcome.usage)
        return Outcome(reason, usage, outcome.figures)

    # ------------------------------------------------------------ tool phase
    def _phase(self, calls: list[ToolCall]) -> None:
        """Run ``calls`` (each on its own thread), then ask the model again."""
        try:
            threads = [threading.Thread(target=self._run_call, args=(c,), daemon=True,
                                        name=f"nbstream-call-{c.name[:40]}") for c in calls]
            for t in threads:
                t.start()
            with self._cond:
                self._cond.wait_for(lambda: self._stopped or all(c.done for c in calls))
                if self._stopped:
                    return
            self.round += 1
            self._stream.set_status("queued")
            self._resubmit()
        except Exception as exc:  # a bug here must not leave the reply running forever
            log.exception("nbstream: the tool loop of %s failed", self._stream.id)
            self._stream.fail(exc, "".join(traceback.format_exception(exc)))

    def _run_call(self, call: ToolCall) -> None:
        try:
            self._run_call_inner(call)
        except Exception as exc:
            self._end(call, "error", f"{type(exc).__name__}: {exc}",
                      ToolResult(f"Error: {type(exc).__name__}: {exc}"))
        finally:
            with self._cond:
                self._cond.notify_all()

    def _run_call_inner(self, call: ToolCall) -> None:
        tool = self._tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(self._tools)) or "none"
            why = f"there is no tool named {call.name!r} (the tools are: {names})"
            self._end(call, "error", why, ToolResult(f"Error: {why}"))
            return
        args, problem = parse_arguments(call.arguments)
        if args is None:
            self._end(call, "error", problem or "bad arguments",
                      ToolResult(f"Error: {problem}. Call the tool again with a JSON object."))
            return
        if tool.needs_approval(args) and not (tool.always_allowable and tool.name in self._allowed):
            call.to("awaiting_approval", asks=True, always=tool.always_allowable)
            with self._cond:
                self._cond.wait_for(lambda: self._stopped or call.decision is not None
                                    or call.done)
                decision = call.decision
            if decision is None:
                return  # stopped: stop() marked it cancelled
            if decision == "deny":
                self._end(call, "denied", "denied by the user", ToolResult(DENIED_TEXT))
                return
            if decision == "always":
                self._allowed.add(tool.name)
        if not call.to("running"):
            return
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                value: Any = to_result(tool.invoke(args, call.cancel))
                key = "value"
            except BaseException as exc:  # the tool's error goes to the model
                value, key = exc, "error"
            with self._cond:
                box[key] = value
                box["done"] = True
                # abandoned: the wait below gave up on it, or the turn was stopped (the
                # waiter may not have woken yet to say so: its result is dropped all the same)
                abandoned = box.get("abandoned", False) or self._stopped
                self._cond.notify_all()
            if abandoned:
                log.warning("nbstream: tool %s (call %s) returned after its call ended (%s); "
                            "its result is dropped", call.name, call.id, call.error or call.state)

        if tool.main_thread:
            mainthread.submit(work)
        else:
            threading.Thread(target=work, daemon=True,
                             name=f"nbstream-tool-{tool.name[:40]}").start()
        deadline = None if tool.timeout is None else self._clock() + tool.timeout
        with self._cond:
            while not (box.get("done") or self._stopped):
                left = None if deadline is None else deadline - self._clock()
                if left is not None and left <= 0:
                    break
                self._cond.wait(left)
            finished = bool(box.get("done"))
            if not finished:
                box["abandoned"] = True
        if not finished:
            if self._stopped:
                return
            t = tool.timeout
            self._end(call, "error", f"timed out after {t:g} s",
                      ToolResult(f"Error: the tool did not return within {t:g} s."))
            log.warning("nbstream: tool %s (call %s) timed out after %g s; it was asked to "
                        "stop (its cancel event is set)", tool.name, call.id, t)
            return
        error = box.get("error")
        if error is not None:
            text = f"{type(error).__name__}: {error}".strip().rstrip(":")
            self._end(call, "error", text, ToolResult(bounded(f"Error: {text}")[0]))
            log.info("nbstream: tool %s raised %s", tool.name, text)
            return
        self._end(call, "done", None, box["value"])

    def _end(self, call: ToolCall, state: Any, error: str | None, result: ToolResult) -> None:
        """Move ``call`` to its final ``state`` and put what the model is told into the
        message (unless the turn was stopped meanwhile)."""
        if not call.to(state, error=error, result=result):
            return
        with contextlib.suppress(Cancelled):  # the turn was stopped meanwhile
            self._stream.put(ToolOutput(result.text, call.number, result.wire()))

    # ------------------------------------------------------------ any thread
    def decide(self, call: ToolCall, decision: Any) -> bool:
        """A person's answer to ``call``'s approval card; False when it was not asked."""
        ok = call.decide(decision)
        if ok:
            with self._cond:
                self._cond.notify_all()
        return ok

    def stop(self) -> None:
        """The reply was stopped: every call not finished is cancelled, the loop ends."""
        with self._cond:
            self._stopped = True
            calls = list(self._calls)
            self._cond.notify_all()
        for c in calls:
            if not c.done:
                c.to("cancelled", error="the turn was stopped")


def restored_rounds(rounds: Sequence[Mapping[str, Any]]) -> tuple[list[Run], list[ToolCall]]:
    """The parts (runs, in order) and the calls of a saved reply that called tools
    (a transcript's rounds: see ``conversation/transcript.py``), as a finished reply
    holds them."""
    runs: list[Run] = []
    calls: list[ToolCall] = []
    for r, rnd in enumerate(rounds):
        if r:
            runs.append(("round", "", r))
        runs += [("reasoning", rnd["reasoning"]), ("answer", rnd["content"])]
        mine = []
        for i, saved in enumerate(rnd["tool_calls"]):
            call = ToolCall.restored(len(calls), r, i, saved)
            calls.append(call)
            mine.append(call)
            runs.append(("tool", call.arguments[:MAX_ARGS_SHOWN], call.number))
        for call in mine:
            result = call.result
            if result is not None:
                runs.append(("tool_result", result.text, call.number, result.wire()))
    return runs, calls
