"""Tool calls on the source side: ids, checks, and reading a model's or a server's calls.

What every source that hands tools to its model shares (the widget side runs
the tools; see :mod:`nbstream.core.pieces` for the contract):

* :class:`CallIds`: the ids of the calls of one reply, unique within the
  conversation: a server's own id when it gives a fresh one, one made up
  otherwise (``call_`` and 24 letters and digits; 9 for Mistral's templates,
  which refuse any other length).
* :func:`check_tool_request`: the ``tools`` and ``tool_choice`` of a reply,
  checked before anything is asked (a forced tool that is not among the tools,
  ``"required"`` with no tools), with the choice to send.
* :class:`ToolCallAssembler`: a server's pieces of calls (OpenAI's
  ``delta.tool_calls``, the Responses API's function-call events) turned into
  :class:`~nbstream.core.pieces.ToolCallDelta` pieces that keep the contract:
  indexes 0, 1, ... in order of appearance whatever the server numbered, the
  id and name on the first piece only (servers that repeat them on every
  chunk, such as llama-cpp-python's, are read once), argument text that
  arrived before the name held until it is known.
* :class:`ToolCallSplitter`: a model's own tool-call syntax in streamed text
  (local models, servers without a tool parser) split into answer text and
  :class:`~nbstream.core.pieces.ToolCallDelta` pieces, with the approach of
  :class:`~nbstream.sources.think.ThinkSplitter`: a tag cut across pieces at
  any position is found, text before and after a call stays answer text, and
  the arguments stream as they are written (not only once the call is
  complete). Syntaxes (:data:`ToolCallSyntax`):

  ``"hermes"``
      ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one or more:
      Hermes 2/3, Qwen 2.5, Qwen 3 (and QwQ), SmolLM3, and most templates that
      follow the Hermes function-calling format.
  ``"mistral"``
      ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` (Mistral 7B v0.3,
      Mixtral 8x22B, Mistral Nemo) and ``[TOOL_CALLS]name[ARGS]{...}``
      (Mistral Small 3.1 and later, Magistral, Devstral).
  ``"llama3"``
      a reply that is a JSON object ``{"name": ..., "parameters": {...}}``
      (Llama 3.1, 3.2 and 3.3's JSON tool calling), several separated by ``;``,
      optionally after ``<|python_tag|>``.

  A call object may carry ``"arguments"`` or ``"parameters"`` (an object, or
  a JSON text in a string) and an ``"id"``. Malformed output never hangs and
  loses nothing: a "call" whose JSON is broken before its name is known is
  given back as answer text, tags included (what the model wrote, shown as it
  is); once a call's name was emitted its arguments are streamed as written,
  and arguments that do not parse are the widget's to report as the call's
  error.

Threads: every object here serves one reply on the thread that runs it (the
reply's worker thread); the functions are pure.
"""

from __future__ import annotations

import json
import logging
import secrets
import string
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from ..core.pieces import ChatMessage, Reasoning, ToolCallDelta, ToolSchema

if TYPE_CHECKING:
    from ..generation import ToolChoice

__all__ = [
    "CallIds",
    "Piece",
    "ToolCallAssembler",
    "ToolCallSplitter",
    "ToolCallSyntax",
    "check_tool_request",
    "emit_call",
    "tool_names",
    "tool_splitting",
]

log = logging.getLogger("nbstream.sources.toolcalls")

#: What a source emits: answer text, :class:`Reasoning` (a ``str``), or a piece of a call.
Piece = str | ToolCallDelta

#: The tool-call syntaxes :class:`ToolCallSplitter` reads (see the module docstring).
ToolCallSyntax = Literal["hermes", "mistral", "llama3"]

_ALNUM = string.ascii_letters + string.digits


def emit_call(emit: Callable[[str], None], delta: ToolCallDelta) -> None:
    """``emit(delta)``: the pipeline's ``emit`` takes :class:`ToolCallDelta` pieces
    too (the contract), though :data:`~nbstream.sources.base.Emit` is typed for text."""
    cast(Callable[[Piece], None], emit)(delta)


# ---------------------------------------------------------------------- ids
class CallIds:
    """Ids for the calls of one reply, unique within its conversation.

    ``messages`` is the conversation the reply answers: the ids its assistant
    turns and tool turns already use are never handed out again.
    ``style="mistral"``: made-up ids are 9 letters and digits (Mistral's chat
    templates raise on any other id).
    """

    def __init__(self, messages: Iterable[Mapping[str, Any]] = (), *,
                 style: Literal["openai", "mistral"] = "openai") -> None:
        self.style = style
        self._used: set[str] = set()
        for message in messages:
            call_id = message.get("tool_call_id")
            if isinstance(call_id, str):
                self._used.add(call_id)
            for call in message.get("tool_calls") or ():
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    self._used.add(call["id"])

    def fresh(self) -> str:
        """A new id, unused in the conversation."""
        while True:
            if self.style == "mistral":
                made = "".join(secrets.choice(_ALNUM) for _ in range(9))
            else:
                made = "call_" + "".join(secrets.choice(_ALNUM) for _ in range(24))
            if made not in self._used:
                self._used.add(made)
                return made

    def take(self, given: object) -> str:
        """``given`` (a server's or a model's id) when it is a fresh non-empty
        str, else a new one: a repeated id would make two calls one."""
        if isinstance(given, str) and given.strip() and given not in self._used:
            self._used.add(given)
            return given
        return self.fresh()


# ------------------------------------------------------------------- checks
def tool_names(tools: Sequence[ToolSchema]) -> list[str]:
    """The names of ``tools`` (OpenAI function-tool JSON), in order."""
    return [str(t["function"]["name"]) for t in tools]


def check_tool_request(tools: Sequence[ToolSchema], choice: ToolChoice | None,
                       label: str) -> ToolChoice | None:
    """Check a reply's ``tools`` and its ``tool_choice``; return the choice to send.

    Raises :class:`ValueError` for a tool that is not OpenAI's function-tool
    JSON, two tools of one name, ``"required"`` or a named function with no
    tools, a named function that is not among them. Returns None where
    nothing need be sent: no choice, or ``"auto"`` / ``"none"`` with no tools.
    """
    names: list[str] = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not (isinstance(tool, Mapping) and tool.get("type", "function") == "function"
                and isinstance(name, str) and name):
            raise ValueError(f"{label}: tool {i} is not a function tool such as "
                             "{'type': 'function', 'function': {'name': ..., 'parameters': "
                             f"{{...}}}}}}: {_short(tool)}")
        if name in names:
            raise ValueError(f"{label}: two tools are named {name!r}")
        names.append(name)
    if choice is None:
        return None
    if not tools:
        if choice in ("auto", "none"):
            return None
        raise ValueError(f"{label}: tool_choice {_short(choice)} needs tools, and this "
                         "reply has none")
    if isinstance(choice, dict):
        forced = choice["function"]["name"]
        if forced not in names:
            raise ValueError(f"{label}: tool_choice names {forced!r}, which is not among "
                             f"the tools ({', '.join(names)})")
    return choice


def _short(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------- a server's call pieces
@dataclass
class _Call:
    index: int
    server_id: str | None = None
    name: str | None = None
    started: bool = False
    pending: str = ""  # argument text that came before the name
    sent: str = ""  # argument text emitted


class ToolCallAssembler:
    """A server's pieces of tool calls as contract-keeping :class:`ToolCallDelta` pieces.

    ``key`` names a call as the server does (an index, an item id); calls get
    our indexes 0, 1, ... in the order they first appear.
    """

    def __init__(self, ids: CallIds) -> None:
        self._ids = ids
        self._calls: dict[Hashable, _Call] = {}
        self._last: _Call | None = None

    @property
    def count(self) -> int:
        """How many calls appeared."""
        return len(self._calls)

    def knows(self, key: Hashable) -> bool:
        return key in self._calls

    def last_key(self) -> Hashable | None:
        """The key of the call that appeared last (None before any)."""
        return next(reversed(self._calls)) if self._calls else None

    def add(self, key: Hashable, *, call_id: object = None, name: object = None,
            arguments: object = "") -> ToolCallDelta | None:
        """One piece of call ``key``; returns what to emit (None: nothing yet)."""
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = _Call(len(self._calls))
        self._last = call
        text = _arguments_text(arguments)
        if call.started:
            if isinstance(name, str) and name and name != call.name:
                log.warning("tool call %d: the server renamed %r to %r; kept the first",
                            call.index, call.name, name)
            if not text:
                return None
            call.sent += text
            return ToolCallDelta(call.index, text)
        if isinstance(call_id, str) and call_id and call.server_id is None:
            call.server_id = call_id
        if isinstance(name, str) and name:
            call.name = name
        call.pending += text
        if call.name is None:
            return None
        call.started = True
        text, call.pending = call.pending, ""
        call.sent = text
        return ToolCallDelta(call.index, text, id=self._ids.take(call.server_id),
                             name=call.name)

    def done(self, key: Hashable, arguments: object = None, *, call_id: object = None,
             name: object = None) -> ToolCallDelta | None:
        """Call ``key`` is complete with ``arguments`` (its whole text, where the
        server says it): emits what of it was not streamed yet."""
        full = None if arguments is None else _arguments_text(arguments)
        call = self._calls.get(key)
        if call is None or not call.started:
            if full is not None:
                if call is None:
                    call = self._calls[key] = _Call(len(self._calls))
                call.pending = full  # the whole text supersedes the pieces
            return self.add(key, call_id=call_id, name=name)
        if full is None or full == call.sent:
            return None
        if full.startswith(call.sent):
            rest = full[len(call.sent):]
            call.sent = full
            return ToolCallDelta(call.index, rest)
        log.warning("tool call %d: the server's final arguments differ from the streamed "
                    "ones; kept the streamed ones", call.index)
        return None

    def nameless(self) -> list[int]:
        """Indexes of calls that never got a name (a server fault)."""
        return [c.index for c in self._calls.values() if not c.started]


def _arguments_text(arguments: object) -> str:
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)  # a server that sent an object


# ------------------------------------------------------ a model's call syntax
@dataclass(frozen=True)
class _Syntax:
    open: tuple[str, ...]  # tags that open calls
    close: str | None  # the tag that closes them (None: they run to the end)
    json_at_start: bool  # a reply that starts with "{" is a call (Llama 3)


_SYNTAXES: dict[str, _Syntax] = {
    "hermes": _Syntax(("<tool_call>",), "</tool_call>", False),
    "mistral": _Syntax(("[TOOL_CALLS]",), None, False),
    "llama3": _Syntax(("<|python_tag|>",), None, True),
}

#: the tags of each syntax, e.g. to keep them when they are special tokens
SYNTAX_TAGS: dict[str, tuple[str, ...]] = {
    "hermes": ("<tool_call>", "</tool_call>"),
    "mistral": ("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"),
    "llama3": ("<|python_tag|>",),
}

_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})
_ARG_KEYS = frozenset({"arguments", "parameters"})
_WS = " \t\r\n"


class _Counter:
    """The next call index of a reply, and its ids."""

    def __init__(self, ids: CallIds) -> None:
        self.ids = ids
        self.next = 0


class _CallsReader:
    """Reads JSON tool calls as they stream: objects such as ``{"name": ...,
    "arguments": {...}}``, one after another (separated by whitespace, ``,`` or
    ``;``) or in one array. Emits a call's first piece once its name is known,
    then its arguments as they are read. One character at a time; it follows
    strings, escapes and nesting, and does not validate the arguments."""

    def __init__(self, counter: _Counter) -> None:
        self._counter = counter
        self._state = "top"
        self._array = 0
        self.failed = False
        self.emitted = 0  # calls started by this reader
        self.rest = ""  # the text from the first character it could not read
        self._new_object()

    def _new_object(self) -> None:
        self._keys = 0
        self._key: list[str] = []
        self._key_name = ""
        self._raw: list[str] = []
        self._streaming = False  # the value read is arguments, streamed
        self._extent = _ValueExtent('"')  # of the key or value being read
        self._name: str | None = None
        self._model_id: str | None = None
        self._args_pending = ""
        self._args_seen = False
        self._started = False
        self._index = -1

    @property
    def in_call(self) -> bool:
        """Whether a call object is partly read."""
        return self._state != "top"

    @property
    def started_open(self) -> bool:
        """Whether a call was emitted whose object is not complete."""
        return self._started and self._state != "top"

    def feed(self, text: str) -> list[ToolCallDelta]:
        out: list[ToolCallDelta] = []
        for i, ch in enumerate(text):
            if not self._step(ch, out):
                self.failed = True
                self.rest = text[i:]
                break
        if self._started and self._args_pending:
            out.append(ToolCallDelta(self._index, self._args_pending))
            self._args_pending = ""
        return out

    def end(self) -> list[ToolCallDelta]:
        """The end of the text: a primitive value still open ends here; a call
        whose arguments never began takes none."""
        out: list[ToolCallDelta] = []
        if self._state == "prim":
            self._value_done(out)
            self._state = "after"
        if self._started and not self._args_seen and not self._streaming:
            self._args_pending += "{}"
            self._args_seen = True
        if self._started and self._args_pending:
            out.append(ToolCallDelta(self._index, self._args_pending))
            self._args_pending = ""
        return out

    # -- the state machine: returns False on a character it cannot read
    def _step(self, ch: str, out: list[ToolCallDelta]) -> bool:
        state = self._state
        if state == "top":
            if ch in _WS or ch in ",;":
                return True
            if ch == "[" and self._array == 0:
                self._array = 1
                return True
            if ch == "]" and self._array == 1:
                self._array = 0
                return True
            if ch == "{":
                self._new_object()
                self._state = "key_or_end"
                return True
            return False
        if state == "key_or_end":
            if ch in _WS or (ch == "," and self._keys):
                return True
            if ch == '"':
                self._key = [ch]
                self._extent = _ValueExtent(ch)
                self._state = "key"
                return True
            if ch == "}":
                return self._object_done(out)
            return False
        if state == "key":
            self._key.append(ch)
            if self._extent.step(ch):
                try:
                    key = json.loads("".join(self._key))
                except ValueError:
                    return False
                if not self._keys and key not in _CALL_KEYS:
                    return False  # {"answer": ...}: not a call
                self._keys += 1
                self._key_name = key
                self._state = "colon"
            return True
        if state == "colon":
            if ch in _WS:
                return True
            if ch == ":":
                self._state = "value"
                return True
            return False
        if state == "value":
            if ch in _WS:
                return True
            self._raw = []
            self._streaming = False
            if ch == '"' or ch in "{[":
                self._extent = _ValueExtent(ch)
                self._state = "extent"
                self._streaming = ch != '"' and self._key_name in _ARG_KEYS
            else:
                self._state = "prim"
            self._take(ch)
            return True
        if state == "extent":  # a string, object or array value
            self._take(ch)
            if self._extent.step(ch):
                self._value_done(out)
                self._state = "after"
            return True
        if state == "prim":
            if ch in _WS or ch in ",}":
                self._value_done(out)
                self._state = "after"
                return self._step(ch, out)
            self._take(ch)
            return True
        # state == "after": after a value
        if ch in _WS:
            return True
        if ch == ",":
            self._state = "key_or_end"
            return True
        if ch == "}":
            return self._object_done(out)
        return False

    def _take(self, ch: str) -> None:
        if self._streaming:
            self._args_pending += ch
        else:
            self._raw.append(ch)

    def _value_done(self, out: list[ToolCallDelta]) -> None:
        key = self._key_name
        if self._streaming:
            self._args_seen = True
            self._streaming = False
            return
        raw = "".join(self._raw)
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        if key == "name" and isinstance(value, str) and value and self._name is None:
            self._name = value
            self._start(out)
        elif key == "id" and isinstance(value, str) and value:
            self._model_id = value
        elif key in _ARG_KEYS and not self._args_seen:
            self._args_seen = True
            if isinstance(value, str):
                self._args_pending += value  # arguments as a JSON text in a string
            elif value is None:
                self._args_pending += "{}"
            else:
                self._args_pending += raw

    def _start(self, out: list[ToolCallDelta]) -> None:
        if self._started or self._name is None:
            return
        self._started = True
        self._index = self._counter.next
        self._counter.next += 1
        self.emitted += 1
        out.append(ToolCallDelta(self._index, self._args_pending,
                                 id=self._counter.ids.take(self._model_id), name=self._name))
        self._args_pending = ""

    def _object_done(self, out: list[ToolCallDelta]) -> bool:
        if self._name is None:
            return False  # an object without a name is not a call
        self._start(out)
        if not self._args_seen:
            self._args_pending += "{}"  # a call without arguments takes none
            self._args_seen = True
        if self._args_pending:
            out.append(ToolCallDelta(self._index, self._args_pending))
            self._args_pending = ""
        self._started = False
        self._state = "top"
        return True


class _ValueExtent:
    """Where a JSON string, object or array ends, told one character at a time after
    its first (strings, their escapes, nesting)."""

    def __init__(self, first: str) -> None:
        self._nest = 1 if first in "{[" else 0
        self._in_str = first == '"'
        self._esc = False

    def step(self, ch: str) -> bool:
        """Whether ``ch`` ends the value."""
        if self._in_str:
            if self._esc:
                self._esc = False
            elif ch == "\\":
                self._esc = True
            elif ch == '"':
                self._in_str = False
                return self._nest == 0
            return False
        if ch == '"':
            self._in_str = True
        elif ch in "{[":
            self._nest += 1
        elif ch in "}]":
            self._nest -= 1
            return self._nest == 0
        return False


class _ValueReader:
    """Streams one JSON value (Mistral's ``[ARGS]{...}``) until it is complete."""

    def __init__(self) -> None:
        self._extent: _ValueExtent | None = None  # None: a bare primitive, or not begun
        self._begun = False
        self.done = False

    def feed(self, text: str) -> tuple[str, str]:
        """``(value text, text after the value)`` of ``text``."""
        for i, ch in enumerate(text):
            if not self._begun:
                if ch in _WS:
                    continue
                self._begun = True
                if ch == '"' or ch in "{[":
                    self._extent = _ValueExtent(ch)
                continue
            if self._extent is None:  # a bare primitive: to the next whitespace
                if ch in _WS:
                    self.done = True
                    return text[:i], text[i:]
            elif self._extent.step(ch):
                self.done = True
                return text[: i + 1], text[i + 1:]
        return text, ""


class ToolCallSplitter:
    """Split a model's streamed text into answer text and tool-call pieces.

    ``feed(text)`` returns the pieces ready so far (``str`` answer text and
    :class:`ToolCallDelta`); ``flush()`` returns the rest at the end of the
    text. One splitter serves one reply; ``ids`` gives the calls their ids
    (unique within the conversation: pass a :class:`CallIds` made from it).

    Whitespace that templates put around calls is dropped: between the answer
    and a call, between calls, and after the last one. Answer text without
    calls passes through as it is (trailing whitespace waits for the next
    piece to tell whether a call follows).
    """

    def __init__(self, syntax: ToolCallSyntax, ids: CallIds | None = None) -> None:
        if syntax not in _SYNTAXES:
            raise ValueError(f"tool-call syntax must be one of {', '.join(_SYNTAXES)}, "
                             f"got {syntax!r}")
        self.syntax: ToolCallSyntax = syntax
        self._spec = _SYNTAXES[syntax]
        self._counter = _Counter(ids if ids is not None else CallIds(
            style="mistral" if syntax == "mistral" else "openai"))
        self._mode = "out"  # out | body | text_body | m_name | m_args | drop
        self._held = ""  # text not yet decided (a possible tag, whitespace)
        self._raw: list[str] = []  # the current call text, given back if it is not a call
        self._reader: _CallsReader | None = None
        self._value: _ValueReader | None = None
        self._at_start = True  # nothing but whitespace so far (Llama 3's JSON calls)
        self._after_call = False  # leading whitespace of what follows a call is dropped
        self._cut = False

    @property
    def calls(self) -> int:
        """How many calls were emitted."""
        return self._counter.next

    @property
    def cut(self) -> bool:
        """Whether the text ended inside a call whose first piece was emitted (its
        arguments are incomplete; after :meth:`flush`)."""
        return self._cut

    def feed(self, text: str) -> list[Piece]:
        """The pieces that ``text`` (the next piece of the stream) completes."""
        out: list[Piece] = []
        if text:
            self._run(self._held + text, out, eos=False)
        return out

    def flush(self) -> list[Piece]:
        """The pieces held back, at the end of the stream."""
        out: list[Piece] = []
        self._run(self._held, out, eos=True)
        self._end(out)
        return out

    # ------------------------------------------------------------ internals
    def _run(self, buf: str, out: list[Piece], *, eos: bool) -> None:
        self._held = ""
        while buf:
            mode = self._mode
            if mode == "out":
                buf = self._outside(buf, out, eos)
            elif mode in ("body", "text_body", "drop"):
                buf = self._body(buf, out, eos)
            elif mode == "m_name":
                buf = self._mistral_name(buf, out, eos)
            else:  # m_args
                buf = self._mistral_args(buf, out)

    def _outside(self, buf: str, out: list[Piece], eos: bool) -> str:
        if self._at_start and self._spec.json_at_start:
            stripped = buf.lstrip(_WS)
            if not stripped:
                self._held = buf if not eos else ""
                if eos and buf:
                    self._answer(buf, out)
                return ""
            self._at_start = False
            if stripped[0] == "{":
                self._open_body(out, tag="")
                return stripped
        pos, tag = _find_first(buf, self._spec.open)
        if pos < 0:
            keep = 0 if eos else _partial_suffix(buf, self._spec.open)
            text, tail = buf[: len(buf) - keep], buf[len(buf) - keep:]
            if not eos:
                # trailing whitespace waits: dropped if a call follows
                stripped = text.rstrip(_WS)
                text, tail = stripped, text[len(stripped):] + tail
            self._answer(text, out)
            self._held = tail
            return ""
        self._answer(buf[:pos].rstrip(_WS), out)
        self._open_body(out, tag=tag)
        return buf[pos + len(tag):]

    def _answer(self, text: str, out: list[Piece]) -> None:
        if self._after_call:
            text = text.lstrip(_WS)
            if not text:
                return
            self._after_call = False
        if text:
            self._at_start = False
            out.append(text)

    def _open_body(self, out: list[Piece], tag: str) -> None:
        self._at_start = False
        self._raw = [tag]
        if self.syntax == "mistral":
            self._mode = "m_name"  # decided by the first character: JSON or name[ARGS]
            self._reader = None
        else:
            self._mode = "body"
            self._reader = _CallsReader(self._counter)

    def _body(self, buf: str, out: list[Piece], eos: bool) -> str:
        close = self._spec.close
        rest = ""
        ended = False
        if close is not None:
            pos = buf.find(close)
            if pos >= 0:
                buf, rest, ended = buf[:pos], buf[pos + len(close):], True
            elif not eos:
                keep = _partial_suffix(buf, (close,))
                if keep:
                    buf, self._held = buf[: len(buf) - keep], buf[len(buf) - keep:]
        if self._mode == "text_body":
            if buf:
                out.append(buf)
        elif self._mode == "body":
            left = self._feed_reader(buf, out)
            if left:
                return left + self._held
        if ended:
            if self._mode == "text_body":
                out.append(close or "")  # a call text that was not a call: as written
            self._close_body(out)
            return rest
        return ""

    def _feed_reader(self, text: str, out: list[Piece]) -> str:
        """Feed call text to the reader; returns text to read again outside
        calls (after calls that have no closing tag)."""
        reader = self._reader
        assert reader is not None
        self._raw.append(text)
        out.extend(reader.feed(text))
        if not reader.failed:
            return ""
        if not reader.emitted:
            # not a call after all: what the model wrote is answer text
            self._give_back(out)
            self._mode = "text_body" if self._spec.close is not None else "out"
        elif self._spec.close is None:
            # text after the calls (no closing tag): answer text again
            self._end_calls(out)
            self._mode = "out"
            self._after_call = True
            rest, self._held = reader.rest + self._held, ""
            return rest
        else:
            log.warning("tool call: ignored what the model wrote after its call inside "
                        "%s...%s: %r", self._spec.open[0], self._spec.close,
                        reader.rest[:80])
            self._mode = "drop"
        return ""

    def _give_back(self, out: list[Piece]) -> None:
        text = "".join(self._raw)
        self._raw = []
        if text:
            self._after_call = False
            out.append(text)

    def _close_body(self, out: list[Piece]) -> None:
        """The closing tag: the call text ends here."""
        if self._mode == "body":
            self._end_calls(out)
            reader = self._reader
            if reader is not None and not reader.emitted:
                # an empty or incomplete call that named no tool: give it back
                self._raw.append(self._spec.close or "")
                self._give_back(out)
                self._mode = "out"
                return
        self._mode = "out"
        self._after_call = self.calls > 0
        self._raw = []

    def _end_calls(self, out: list[Piece]) -> None:
        reader = self._reader
        if reader is None:
            return
        out.extend(reader.end())
        if reader.started_open:
            self._cut = True

    def _end(self, out: list[Piece]) -> None:
        """The end of the stream inside a call text."""
        mode = self._mode
        if mode == "body":
            self._end_calls(out)
            reader = self._reader
            if reader is not None and not reader.emitted:
                self._give_back(out)
        elif mode == "m_name":
            self._give_back(out)
        elif mode == "m_args":
            self._cut = self._value is not None and not self._value.done
        self._mode = "out"

    # Mistral: [TOOL_CALLS] then JSON, or name[ARGS]{...} (name[CALL_ID]id[ARGS]{...})
    def _mistral_name(self, buf: str, out: list[Piece], eos: bool) -> str:
        raw = "".join(self._raw[1:]) + buf
        stripped = raw.lstrip(_WS)
        if not stripped:
            self._raw = [self._raw[0], raw]
            return ""
        if stripped[0] in "[{":
            self._raw = [self._raw[0]]
            self._mode = "body"
            self._reader = _CallsReader(self._counter)
            return self._feed_reader(raw, out)
        pos = raw.find("[ARGS]")
        if pos < 0:
            keep = 0 if eos else _partial_suffix(raw, ("[ARGS]", "[CALL_ID]"))
            head = raw[: len(raw) - keep].split("[CALL_ID]", 1)[0].strip(_WS)
            if not _is_name(head, partial=True) or eos:
                self._raw = [self._raw[0], raw]
                self._give_back(out)
                self._mode = "out"
                return ""
            self._raw = [self._raw[0], raw]
            return ""
        name, _, call_id = raw[:pos].partition("[CALL_ID]")
        name = name.strip(_WS)
        if not _is_name(name):
            self._raw = [self._raw[0], raw[: pos + 6]]
            self._give_back(out)
            self._mode = "out"
            return raw[pos + 6:]
        index = self._counter.next
        self._counter.next += 1
        out.append(ToolCallDelta(index, "", id=self._counter.ids.take(call_id.strip(_WS)),
                                 name=name))
        self._raw = []
        self._mistral_index = index
        self._value = _ValueReader()
        self._mode = "m_args"
        return raw[pos + 6:]

    def _mistral_args(self, buf: str, out: list[Piece]) -> str:
        value = self._value
        assert value is not None
        text, rest = value.feed(buf)
        if text:
            out.append(ToolCallDelta(self._mistral_index, text))
        if value.done:
            self._mode = "out"
            self._after_call = True
            return rest
        return ""


def _is_name(text: str, *, partial: bool = False) -> bool:
    """Whether ``text`` can be a tool's name (or the start of one, with ``partial``)."""
    if not text:
        return partial
    return all(c.isalnum() or c in "_-." for c in text)


def _find_first(buf: str, tags: Sequence[str]) -> tuple[int, str]:
    best, found = -1, ""
    for tag in tags:
        pos = buf.find(tag)
        if pos >= 0 and (best < 0 or pos < best):
            best, found = pos, tag
    return best, found


def _partial_suffix(buf: str, tags: Sequence[str]) -> int:
    """Length of the longest end of ``buf`` that is a proper start of a tag."""
    best = 0
    for tag in tags:
        for n in range(min(len(tag) - 1, len(buf)), best, -1):
            if buf.endswith(tag[:n]):
                best = n
                break
    return best


def tool_splitting(emit: Callable[[str], None], splitter: ToolCallSplitter
                   ) -> tuple[Callable[[str], None], Callable[[], None]]:
    """``(emit2, finish)``: ``emit2`` feeds answer text to the splitter and emits
    what it gives (:class:`Reasoning` pieces pass through as they are);
    ``finish()`` emits what it held at the end."""
    out = cast(Callable[[Piece], None], emit)

    def emit2(piece: str) -> None:
        if isinstance(piece, Reasoning):
            emit(piece)
            return
        for part in splitter.feed(piece):
            out(part)

    def finish() -> None:
        for part in splitter.flush():
            out(part)

    return emit2, finish


def template_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The conversation as chat templates take it: an assistant's ``tool_calls``
    with their arguments as objects (templates write them with ``tojson``; a
    text that does not parse stays a text), a tool turn's ``tool_call_id`` and
    ``name``."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        turn: dict[str, Any] = {"role": m["role"], "content": m["content"]}
        calls = m.get("tool_calls")
        if calls:
            turn["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["function"]["name"],
                              "arguments": _arguments_object(c["function"]["arguments"])}}
                for c in calls]
        if "tool_call_id" in m:
            turn["tool_call_id"] = m["tool_call_id"]
        if "name" in m:
            turn["name"] = m["name"]
        turns.append(turn)
    return turns


def _arguments_object(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except (TypeError, ValueError):
        return arguments
