"""One tool call of a reply: what the model asked, where it stands, what came back.

States (the AI SDK's, named for a notebook)::

    streaming -> ready -> awaiting_approval -> running -> done | error
                      \\-> running            \\-> denied
    any state before the end -> cancelled (the turn was stopped, or never asked again)

* ``streaming``: the arguments are arriving (JSON text in pieces);
* ``ready``: the model's reply ended, the arguments are complete and parsed;
* ``awaiting_approval``: a person must allow it first (the card's buttons,
  ``chat.approve(call_id)``);
* ``running``: the tool runs; ``done``: it returned; ``error``: it raised,
  timed out, was unknown or got arguments that do not fit (the model is told);
  ``denied``: a person denied it (the model is told); ``cancelled``: the turn
  was stopped (or reached ``max_tool_rounds``) before it ran or while it ran.

Threads: the reply's worker thread adds calls and their argument pieces; the
turn's threads (``widgets/toolturn.py``) move the state; a person's decision
comes from a cell or the view's handler; any thread reads. Every field is
guarded by the call's lock; a state change calls ``on_change`` (without the
lock), which tells the pump that the message's meta changed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..core.pieces import FINAL_TOOL_STATES, ToolDecision, ToolState
from .results import ToolResult

__all__ = ["FINAL_TOOL_STATES", "Decision", "ToolCall", "ToolState"]

#: a person's answer to an approval card (``ToolState``, ``FINAL_TOOL_STATES`` and this
#: are declared in core/pieces.py, which the wire protocol takes them from)
Decision = ToolDecision
#: what the model is told of a denied call
DENIED_TEXT = "The user denied this tool call."
#: what the model is told of a call that never ran (a history shown again later)
CANCELLED_TEXT = "The tool call was cancelled before it returned."


class ToolCall:
    """One call (see the module docstring). Read its fields; the turn moves it."""

    def __init__(self, number: int, round: int, index: int, id: str, name: str,
                 on_change: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        #: the call's number within its message (0, 1, ... over every round)
        self.number = number
        #: the round of the turn it was asked in (0: the first reply of the model)
        self.round = round
        #: its index within its round (the model's, for parallel calls)
        self.index = index
        self._lock = threading.Lock()
        self._id = id
        self._name = name
        self._arguments: list[str] = []
        self._state: ToolState = "streaming"
        self._result: ToolResult | None = None
        self._error: str | None = None
        self._asks = False
        self._always_offered = False
        self._started: float | None = None
        self._ended: float | None = None
        self._decision: Decision | None = None
        #: set when the call must stop (the turn was stopped, or it timed out): handed to
        #: the tool's threading.Event parameter
        self.cancel = threading.Event()
        self._on_change = on_change
        self._clock = clock

    @classmethod
    def restored(cls, number: int, round: int, index: int, saved: Mapping[str, Any]
                 ) -> ToolCall:
        """A call that ended elsewhere (a saved conversation): ``saved`` holds ``id``,
        ``name``, ``arguments``, ``state`` (final), ``result``, ``display``, ``error``,
        ``ms`` (see ``conversation/transcript.py``)."""
        call = cls(number, round, index, str(saved["id"]), str(saved["name"]))
        call._arguments = [str(saved.get("arguments") or "")]
        state = saved.get("state")
        call._state = state if state in FINAL_TOOL_STATES else "cancelled"
        text = saved.get("result")
        if isinstance(text, str):
            display = saved.get("display") or {}
            call._result = ToolResult(text, {k: v for k, v in display.items()
                                             if isinstance(v, str)})
        call._error = saved.get("error") if isinstance(saved.get("error"), str) else None
        ms = saved.get("ms")
        if isinstance(ms, (int, float)) and not isinstance(ms, bool):
            call._started, call._ended = 0.0, ms / 1000
        return call

    def saved(self) -> dict[str, Any]:
        """The call as a conversation file keeps it (see :meth:`restored`)."""
        with self._lock:
            result = self._result
            ms = None if self._started is None or self._ended is None else round(
                (self._ended - self._started) * 1000, 1)
            return {"id": self._id, "name": self._name, "arguments": "".join(self._arguments),
                    "state": self._state if self._state in FINAL_TOOL_STATES else "cancelled",
                    "result": None if result is None else result.text,
                    "display": {} if result is None else dict(result.display),
                    "error": self._error, "ms": ms}

    # ------------------------------------------------------------------ reading
    @property
    def id(self) -> str:
        """The call's id, as the model (or its server) named it."""
        with self._lock:
            return self._id

    @property
    def name(self) -> str:
        """The tool's name, as the model wrote it."""
        with self._lock:
            return self._name

    @property
    def arguments(self) -> str:
        """The arguments as the model wrote them (JSON text; "" while none came)."""
        with self._lock:
            return "".join(self._arguments)

    @property
    def args(self) -> dict[str, Any] | None:
        """The arguments parsed (``{}`` for none), or None when they are not a JSON object."""
        return parse_arguments(self.arguments)[0]

    @property
    def state(self) -> ToolState:
        with self._lock:
            return self._state

    @property
    def done(self) -> bool:
        """True once the state is final."""
        with self._lock:
            return self._state in FINAL_TOOL_STATES

    @property
    def result(self) -> ToolResult | None:
        """What the model was told (``result.text``) and the view shows, once final."""
        with self._lock:
            return self._result

    @property
    def error(self) -> str | None:
        """Why it ended in ``error`` / ``denied`` / ``cancelled`` (one line)."""
        with self._lock:
            return self._error

    @property
    def asks(self) -> bool:
        """Whether it needed (or needs) a person's approval."""
        with self._lock:
            return self._asks

    @property
    def always_offered(self) -> bool:
        """Whether its card offers "Always allow"."""
        with self._lock:
            return self._always_offered

    @property
    def duration_ms(self) -> float | None:
        """How long the tool ran (None before it ran)."""
        with self._lock:
            if self._started is None:
                return None
            end = self._ended if self._ended is not None else self._clock()
            return round((end - self._started) * 1000, 1)

    def model_text(self) -> str:
        """What the model is told of this call (its ``tool`` message)."""
        with self._lock:
            if self._result is not None:
                return self._result.text
            if self._state == "denied":
                return DENIED_TEXT
            return CANCELLED_TEXT

    def meta(self) -> dict[str, Any]:
        """The call as the message's meta carries it (``protocol.ToolCallMeta``)."""
        with self._lock:
            out: dict[str, Any] = {"id": self._id, "name": self._name, "state": self._state,
                                   "round": self.round}
            if self._asks:
                out["asks"] = True
                if self._always_offered:
                    out["always"] = True
            if self._error is not None:
                out["error"] = self._error[:500]
            if self._started is not None and self._ended is not None:  # it ran, and ended
                out["ms"] = round((self._ended - self._started) * 1000, 1)
            return out

    def as_message(self) -> dict[str, Any]:
        """OpenAI's shape of the call, in an assistant turn's ``tool_calls``."""
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments or "{}"}}

    # ------------------------------------------------------------------ moving
    def add(self, arguments: str = "", id: str | None = None, name: str | None = None) -> None:
        """A piece of the call as the model streams it (worker thread)."""
        with self._lock:
            if self._state != "streaming":
                return
            if id:
                self._id = id
            if name:
                self._name = name
            if arguments:
                self._arguments.append(arguments)

    def to(self, state: ToolState, *, error: str | None = None,
           result: ToolResult | None = None, asks: bool | None = None,
           always: bool = False) -> bool:
        """Move to ``state`` unless the call is final already; True if it moved."""
        with self._lock:
            if self._state in FINAL_TOOL_STATES:
                return False
            self._state = state
            if error is not None:
                self._error = error
            if result is not None:
                self._result = result
            if asks is not None:
                self._asks = asks
                self._always_offered = always
            now = self._clock()
            if state == "running" and self._started is None:
                self._started = now
            if state in FINAL_TOOL_STATES and self._started is not None:
                self._ended = now
        if state in ("cancelled", "error"):
            self.cancel.set()  # a tool still running may look at it and give up
        self._on_change()
        return True

    def decide(self, decision: Decision) -> bool:
        """A person's answer; True if the call was waiting for it (else it is refused)."""
        with self._lock:
            if self._state != "awaiting_approval" or self._decision is not None:
                return False
            if decision == "always" and not self._always_offered:
                return False
            self._decision = decision
        return True

    @property
    def decision(self) -> Decision | None:
        """A person's answer, once given."""
        with self._lock:
            return self._decision

    def __repr__(self) -> str:
        return f"ToolCall({self.name!r}, id={self.id!r}, state={self.state!r})"


def parse_arguments(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, None), or (None, why) when ``text`` is not a JSON object."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(value, dict):
        return None, f"the arguments must be a JSON object, got {type(value).__name__}"
    return value, None
