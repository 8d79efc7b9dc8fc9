"""Conversation files and exports: what ``ChatWidget.save`` writes and ``ChatWidget.load``
reads, the ``messages=[...]`` a chat can start from, and the Markdown of a conversation.

Pure functions and immutable data (no widget, no thread of its own): any thread may
use this module. The widget side (``chat.py``) turns a :class:`Transcript` into
messages of the view, and its history back into one.

The file format (JSON, UTF-8), version 3::

    {
      "format": "nbstream-conversation",
      "version": 3,
      "title": "",                      # the widget's title (optional)
      "system_prompt": null,            # str or null (optional)
      "current": "m4",                  # the last message of the branch shown (optional;
                                        #  absent or null: the last message of the file)
      "messages": [                     # every message, each parent before its children
        {"id": "m1", "parent": null, "role": "user", "content": "Hi?",
         "status": "done",
         "attachments": [               # (optional) what the question carries, in order
           {"name": "plot.png", "mime": "image/png", "size": 23456, "width": 640,
            "height": 480, "note": "", "sha256": "9f86d0…"}]},
        {"id": "m2", "parent": "m1", "role": "assistant", "content": "Hello!",
         "reasoning": "", "status": "done", "finish_reason": "stop", "error": null}
      ],
      "attachments": {                  # (optional) each attachment's content, once,
        "9f86d0…": "iVBORw0KGgo…"       #  base64 by its sha256 (the same image in two
      }                                 #  branches is stored once)
    }

Attachments are kept whole, inside the file (base64, a third larger than the
content), so a conversation file stands on its own; their size is bounded by
the widget's :class:`~nbstream.core.attachment.AttachmentLimits` (64 MB per
conversation by default). On reading, each content must match its ``sha256``
and ``size``.

An assistant message that called tools has ``rounds`` (absent otherwise): the
reply round by round, each ``{"reasoning", "content", "tool_calls": [{"id",
"name", "arguments", "state", "result", "display", "error", "ms"}]}``
(``result``: what the model was told, or null; ``display``: the view's bounded
MIME bundle; ``state`` a final tool-call state); the message's ``content`` and
``reasoning`` are then the rounds' joined.

Versions: 3 is this one. Version 2 added either ``rounds`` (tool calls) or
attachments (the two were built apart, each as its version 2); version 1 has
neither. Every one of them is read.

A conversation is a tree: each message names its ``parent`` (null: a first
message), and messages with the same parent are alternatives (siblings: an
edited question, a regenerated answer), in the order they were written. The
branch shown is the path from the root to ``current``. A conversation with no
alternatives is a chain: each message's parent is the one before it.

``status`` is a final status (``done``, ``stopped``, ``error``, ``timeout``;
a user message is always ``done``); ``finish_reason`` is why a reply ended
(see :data:`nbstream.core.pieces.FinishReason`), ``error`` the one-line error of an
``error`` / ``timeout`` reply. ``reasoning``, ``finish_reason`` and ``error``
may be left out. A file with an unknown ``version`` or of the wrong shape
raises :class:`ConversationFileError`, naming the file and the line (malformed
JSON) or the entry.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args

from ..checks import short
from ..core.attachment import Attachment, kind_of, parse_text_block
from ..core.pieces import FINAL_STATUSES, FinishReason, Status

__all__ = [
    "FORMAT",
    "VERSION",
    "ConversationFileError",
    "StoredMessage",
    "Transcript",
    "conversation_markdown",
    "from_messages",
    "read",
    "write",
]

#: the ``format`` field of a conversation file
FORMAT = "nbstream-conversation"
#: the version this nbstream writes; it reads this one and the ones in READS
VERSION = 3
READS = frozenset({1, 2, 3})

StoredRole = Literal["user", "assistant"]
FINISH_REASONS: frozenset[str] = frozenset(get_args(FinishReason))
#: what a Markdown export says after a reply that did not end normally
STATUS_NOTES: Mapping[str, str] = {"stopped": "*(stopped)*", "error": "*(error)*",
                                   "timeout": "*(timed out)*"}
#: the form ``Reply.history_content(include_reasoning=True)`` writes
_THINK = re.compile(r"\A<think>\n(.*)\n</think>\n\n", re.DOTALL)


class ConversationFileError(ValueError):
    """A conversation file that cannot be read: malformed JSON, an unknown version, or
    an entry of the wrong shape (the message names the file and the line or entry)."""


@dataclass(frozen=True)
class StoredMessage:
    """One message of a conversation, as saved."""

    id: str
    #: the message it answers or follows (None: a first message)
    parent: str | None
    role: StoredRole
    content: str
    reasoning: str = ""
    status: Status = "done"
    finish_reason: FinishReason | None = None
    error: str | None = None
    #: a reply that called tools, round by round (see the module docstring); None: none
    rounds: tuple[Mapping[str, Any], ...] | None = None
    #: what a user message carries besides its text
    attachments: tuple[Attachment, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """The message as the file holds it (attachments by reference: their content
        is in the file's ``attachments``, see :meth:`Transcript.as_json`)."""
        out: dict[str, Any] = {"id": self.id, "parent": self.parent, "role": self.role,
                               "content": self.content, "status": self.status}
        if self.role == "assistant":
            out.update(reasoning=self.reasoning, finish_reason=self.finish_reason,
                       error=self.error)
            if self.rounds is not None:
                out["rounds"] = [dict(r) for r in self.rounds]
        if self.attachments:
            out["attachments"] = [_attachment_ref(a) for a in self.attachments]
        return out


@dataclass(frozen=True)
class Transcript:
    """A whole conversation: every message (a tree by ``parent``), and which branch shows."""

    messages: tuple[StoredMessage, ...] = ()
    #: the last message of the branch shown (None: the last message)
    current: str | None = None
    system_prompt: str | None = None
    title: str = ""

    def branch(self) -> list[StoredMessage]:
        """The messages shown: the path from the root to :attr:`current`, in order."""
        if not self.messages:
            return []
        by_id = {m.id: m for m in self.messages}
        node: StoredMessage | None = by_id[self.current] if self.current else self.messages[-1]
        path: list[StoredMessage] = []
        while node is not None:
            path.append(node)
            node = by_id[node.parent] if node.parent is not None else None
        path.reverse()
        return path

    def as_json(self) -> dict[str, Any]:
        """The file's content."""
        out: dict[str, Any] = {"format": FORMAT, "version": VERSION, "title": self.title,
                               "system_prompt": self.system_prompt, "current": self.current,
                               "messages": [m.as_json() for m in self.messages]}
        contents = {a.digest: base64.b64encode(a.data).decode("ascii")
                    for m in self.messages for a in m.attachments}
        if contents:
            out["attachments"] = contents
        return out


# ---------------------------------------------------------------- attachments
def _attachment_ref(a: Attachment) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": a.name, "mime": a.mime, "size": a.size}
    if a.width is not None and a.height is not None:
        ref.update(width=a.width, height=a.height)
    if a.note:
        ref["note"] = a.note
    ref["sha256"] = a.digest
    return ref


def _attachment_of(ref: object, contents: Mapping[str, bytes]) -> Attachment:
    """The attachment a message's reference names (ValueError / TypeError: what is wrong)."""
    if not isinstance(ref, dict):
        raise TypeError(f"an attachment must be an object, got {short(ref)}")
    name, mime, size, digest = ref.get("name"), ref.get("mime"), ref.get("size"), \
        ref.get("sha256")
    width, height, note = ref.get("width"), ref.get("height"), ref.get("note", "")
    if not isinstance(name, str) or not name:
        raise TypeError(f"an attachment needs a str 'name', got {short(name)}")
    if not isinstance(mime, str) or "/" not in mime:
        raise TypeError(f"attachment {name!r} needs a MIME type 'mime', got {short(mime)}")
    if not isinstance(digest, str) or digest not in contents:
        raise ValueError(f"attachment {name!r}: its content ('sha256' {short(digest)}) is not "
                         "in the file's 'attachments'")
    data = contents[digest]
    if size != len(data):
        raise ValueError(f"attachment {name!r}: 'size' {short(size)} but the content has "
                         f"{len(data)} bytes")
    for key, value in (("width", width), ("height", height)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise TypeError(f"attachment {name!r}: {key!r} must be a positive int")
    if not isinstance(note, str):
        raise TypeError(f"attachment {name!r}: 'note' must be a str")
    return Attachment(name, mime, data, width, height, note)


def _contents(raw: object, where: str) -> dict[str, bytes]:
    """A file's ``attachments``: each content decoded and checked against its sha256."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConversationFileError(f"{where}: 'attachments' must be an object, got "
                                    f"{short(raw)}")
    out: dict[str, bytes] = {}
    for digest, text in raw.items():
        try:
            data = base64.b64decode(text, validate=True) if isinstance(text, str) else None
        except ValueError:
            data = None
        if data is None:
            raise ConversationFileError(f"{where}: attachments[{digest!r}] is not base64")
        if hashlib.sha256(data).hexdigest() != digest:
            raise ConversationFileError(f"{where}: attachments[{digest!r}] does not match its "
                                        "sha256 (the file was changed or cut)")
        out[digest] = data
    return out


# --------------------------------------------------------------------- files
def write(path: str | os.PathLike[str], transcript: Transcript) -> Path:
    """Write ``transcript`` to ``path`` (JSON, UTF-8; replaced whole, never half
    written); returns the path."""
    target = Path(path)
    text = json.dumps(transcript.as_json(), ensure_ascii=False, indent=1) + "\n"
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return target


def read(path: str | os.PathLike[str]) -> Transcript:
    """Read a conversation file. Raises :class:`ConversationFileError` when it is not
    one this version can read (:class:`FileNotFoundError` when it does not exist)."""
    where = os.fspath(path)
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConversationFileError(
            f"{where}: line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})"
        ) from None
    return parse(data, where, text)


def parse(data: object, where: str, text: str = "") -> Transcript:
    """A :class:`Transcript` from a file's decoded JSON; ``where`` names the file in
    errors, ``text`` (the file's text) lets them name an entry's line."""
    if not isinstance(data, dict):
        raise ConversationFileError(f"{where}: not a conversation file (a JSON object with "
                                    f"'format': {FORMAT!r} is expected, got "
                                    f"{type(data).__name__})")
    if data.get("format") != FORMAT:
        raise ConversationFileError(f"{where}: not a conversation file ('format' is "
                                    f"{short(data.get('format'))}, expected {FORMAT!r})")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ConversationFileError(f"{where}: 'version' must be an int, got {short(version)}")
    if version not in READS:
        newer = " (written by a newer nbstream? upgrade it)" if version > VERSION else ""
        raise ConversationFileError(f"{where}: unknown version {version}; this nbstream reads "
                                    f"versions {', '.join(map(str, sorted(READS)))}{newer}")
    contents = _contents(data.get("attachments"), where) if version >= 2 else {}
    title = data.get("title", "")
    system_prompt = data.get("system_prompt")
    current = data.get("current")
    raw = data.get("messages")
    if not isinstance(title, str):
        raise ConversationFileError(f"{where}: 'title' must be a str, got {short(title)}")
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise ConversationFileError(f"{where}: 'system_prompt' must be a str or null, got "
                                    f"{short(system_prompt)}")
    if not isinstance(raw, list):
        raise ConversationFileError(f"{where}: 'messages' must be a list, got {short(raw)}")
    messages: list[StoredMessage] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        try:
            m = _stored(entry, seen, contents)
        except (TypeError, ValueError) as exc:
            raise ConversationFileError(f"{where}: messages[{i}]{_line_of(raw, i, text)}: "
                                        f"{exc}") from None
        seen.add(m.id)
        messages.append(m)
    if current is not None and (not isinstance(current, str) or current not in seen):
        raise ConversationFileError(f"{where}: 'current' must be the id of a message or null, "
                                    f"got {short(current)}")
    return Transcript(tuple(messages), current, system_prompt, title)


def _line_of(raw: list[Any], i: int, text: str) -> str:
    # the line of entry i, if it has an id, found in the file's text (JSON keeps no
    # positions): the occurrence of its id after those of earlier entries with that id
    entry = raw[i]
    mid = entry.get("id") if isinstance(entry, dict) else None
    if not isinstance(mid, str) or not text:
        return ""
    before = sum(1 for e in raw[:i] if isinstance(e, dict) and e.get("id") == mid)
    found = list(re.finditer(r'"id"\s*:\s*' + re.escape(json.dumps(mid, ensure_ascii=False)),
                             text))
    if len(found) <= before:
        return f" (id {mid!r})"
    return f" (id {mid!r}, line {text.count(chr(10), 0, found[before].start()) + 1})"


def _stored(entry: object, seen: set[str],
            contents: Mapping[str, bytes] | None = None) -> StoredMessage:
    # one message of a file; ValueError says what is wrong with it
    if not isinstance(entry, dict):
        raise TypeError(f"must be an object, got {type(entry).__name__} {short(entry)}")
    mid, parent, role = entry.get("id"), entry.get("parent"), entry.get("role")
    if not isinstance(mid, str) or not mid:
        raise TypeError(f"needs a str 'id', got {short(mid)}")
    if mid in seen:
        raise ValueError(f"id {mid!r} is used twice")
    if parent is not None and (not isinstance(parent, str) or parent not in seen):
        raise ValueError(f"'parent' must be null or the id of an earlier message, got "
                         f"{short(parent)}")
    if role not in ("user", "assistant"):
        raise ValueError(f"'role' must be 'user' or 'assistant', got {short(role)}")
    fields = _fields(entry, role)
    refs = entry.get("attachments")
    if refs is not None:
        if not isinstance(refs, list) or (refs and role != "user"):
            raise ValueError("'attachments' must be a list, on a user message")
        fields["attachments"] = tuple(_attachment_of(r, contents or {}) for r in refs)
    return StoredMessage(mid, parent, cast(StoredRole, role), **fields)


def _fields(entry: Mapping[str, Any], role: str) -> dict[str, Any]:
    # content, reasoning, status, finish_reason, error of one message (TypeError: a
    # field of the wrong type; ValueError: a wrong value)
    content, reasoning = entry.get("content"), entry.get("reasoning", "")
    status = entry.get("status", "done")
    finish, error = entry.get("finish_reason"), entry.get("error")
    if not isinstance(content, str):
        raise TypeError(f"needs a str 'content', got {type(content).__name__} "
                         f"{short(content)}")
    if reasoning is None:
        reasoning = ""
    if not isinstance(reasoning, str):
        raise TypeError(f"'reasoning' must be a str, got {short(reasoning)}")
    if status not in FINAL_STATUSES:
        raise ValueError(f"'status' must be one of {sorted(FINAL_STATUSES)}, got {short(status)}")
    if role == "user" and (status != "done" or reasoning):
        raise ValueError("a user message has status 'done' and no reasoning")
    if finish is not None and finish not in FINISH_REASONS:
        raise ValueError(f"'finish_reason' must be null or one of {sorted(FINISH_REASONS)}, "
                         f"got {short(finish)}")
    if error is not None and not isinstance(error, str):
        raise TypeError(f"'error' must be a str or null, got {short(error)}")
    if role == "assistant" and status == "done" and finish is None and "finish_reason" not in entry:
        finish = "stop"
    out = {"content": content, "reasoning": reasoning, "status": status,
           "finish_reason": finish, "error": error}
    rounds = entry.get("rounds")
    if rounds is not None:
        if role != "assistant":
            raise ValueError("only an assistant message has 'rounds'")
        out["rounds"] = check_rounds(rounds)
        out["content"] = "".join(r["content"] for r in out["rounds"])
        out["reasoning"] = "".join(r["reasoning"] for r in out["rounds"])
    return out


#: the states a saved tool call may be in (it ended)
_CALL_STATES = frozenset({"done", "error", "denied", "cancelled"})


def check_rounds(rounds: object) -> tuple[dict[str, Any], ...]:
    """The ``rounds`` of a reply that called tools, checked (ValueError / TypeError say
    what is wrong) and completed; a call still live when saved is ``cancelled``."""
    if not isinstance(rounds, list) or not rounds:
        raise TypeError(f"'rounds' must be a non-empty list, got {short(rounds)}")
    out: list[dict[str, Any]] = []
    for i, r in enumerate(rounds):
        if not isinstance(r, Mapping):
            raise TypeError(f"rounds[{i}] must be an object, got {short(r)}")
        content, reasoning = r.get("content", ""), r.get("reasoning", "")
        calls = r.get("tool_calls", [])
        if not isinstance(content, str) or not isinstance(reasoning, str):
            raise TypeError(f"rounds[{i}]: 'content' and 'reasoning' must be str")
        if not isinstance(calls, list):
            raise TypeError(f"rounds[{i}]: 'tool_calls' must be a list")
        checked = []
        for j, c in enumerate(calls):
            where = f"rounds[{i}].tool_calls[{j}]"
            if not isinstance(c, Mapping):
                raise TypeError(f"{where} must be an object")
            cid, name, args = c.get("id"), c.get("name"), c.get("arguments", "")
            state = c.get("state", "done")
            result, display, error, ms = (c.get("result"), c.get("display") or {},
                                          c.get("error"), c.get("ms"))
            if not isinstance(cid, str) or not isinstance(name, str) or not isinstance(args, str):
                raise TypeError(f"{where}: 'id', 'name' and 'arguments' must be str")
            if state not in _CALL_STATES:
                state = "cancelled"
            if result is not None and not isinstance(result, str):
                raise TypeError(f"{where}: 'result' must be a str or null")
            if not isinstance(display, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, (str, dict)) for k, v in display.items()):
                raise TypeError(f"{where}: 'display' must be an object of MIME type -> str")
            if error is not None and not isinstance(error, str):
                raise TypeError(f"{where}: 'error' must be a str or null")
            if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float))):
                raise TypeError(f"{where}: 'ms' must be a number or null")
            checked.append({"id": cid, "name": name, "arguments": args, "state": state,
                            "result": result, "display": dict(display), "error": error,
                            "ms": ms})
        out.append({"reasoning": reasoning, "content": content, "tool_calls": checked})
    return tuple(out)


# ------------------------------------------------------ OpenAI-style history
def from_messages(messages: object, where: str) -> Transcript:
    """A chain :class:`Transcript` from OpenAI-style ``[{"role", "content"}, ...]``.

    Roles ``user`` and ``assistant``, and one ``system`` message first (it
    becomes the system prompt). An assistant's dict may also carry
    ``reasoning`` (or ``reasoning_content``), ``status`` (a final status),
    ``finish_reason`` and ``error``; an assistant's content in the form
    ``<think>\\n…\\n</think>\\n\\n…`` (what ``to_messages(include_reasoning=True)``
    writes) is split into reasoning and answer. Other keys (``id``, ``name``...)
    are ignored. Raises :class:`TypeError` / :class:`ValueError` naming
    ``where(messages=...)`` and the item.
    """
    arg = f"{where}(messages=...)"
    if messages is None:
        return Transcript()
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise TypeError(f"{arg} must be a list of {{'role', 'content'}} dicts, got "
                        f"{type(messages).__name__} {short(messages)}")
    system_prompt: str | None = None
    out: list[StoredMessage] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise TypeError(f"{arg}: item {i} must be a dict with 'role' and 'content', got "
                            f"{type(m).__name__} {short(m)}")
        role = m.get("role")
        if not isinstance(role, str):
            raise TypeError(f"{arg}: item {i} needs a str 'role', got {short(role)}")
        if role == "system":
            if i != 0:
                raise ValueError(f"{arg}: item {i} is a 'system' message; only the first "
                                 "message may be one (it becomes the system prompt)")
            content = m.get("content")
            if not isinstance(content, str):
                raise TypeError(f"{arg}: item 0 needs a str 'content', got "
                                f"{type(content).__name__} {short(content)}")
            system_prompt = content
            continue
        if role == "tool" or (role == "assistant" and m.get("tool_calls")) or (
                role == "assistant" and out and out[-1].rounds is not None
                and _awaits_answer(out[-1])):
            try:
                out[-1:] = _tool_turn(out[-1] if out else None, m, f"h{len(out) + 1}")
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{arg}: item {i} {exc}") from None
            continue
        if role not in ("user", "assistant"):
            raise ValueError(f"{arg}: item {i} has role {role!r}; a chat starts from 'user', "
                             "'assistant' and 'tool' messages (and one 'system' message first)")
        entry = dict(m)
        attachments: tuple[Attachment, ...] = ()
        if role == "user" and isinstance(entry.get("content"), list):
            try:
                entry["content"], attachments = _content_parts(entry["content"])
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"{arg}: item {i} {exc}") from None
        if "reasoning" not in entry and "reasoning_content" in entry:
            entry["reasoning"] = entry["reasoning_content"]
        content = entry.get("content")
        if role == "assistant" and isinstance(content, str) and not entry.get("reasoning"):
            think = _THINK.match(content)
            if think is not None:
                entry["reasoning"], entry["content"] = think[1], content[think.end():]
        try:
            fields = _fields(entry, role)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{arg}: item {i} {exc}") from None
        mid = f"h{len(out) + 1}"
        out.append(StoredMessage(mid, out[-1].id if out else None, cast(StoredRole, role),
                                 **fields, attachments=attachments))
    return Transcript(tuple(out), None, system_prompt)


def _awaits_answer(m: StoredMessage) -> bool:
    """Whether the reply's last round called tools (the model is asked again after it)."""
    return bool(m.rounds and m.rounds[-1]["tool_calls"])


def _tool_turn(last: StoredMessage | None, m: Mapping[str, Any], new_id: str
               ) -> list[StoredMessage]:
    """An OpenAI-shaped message of a tool loop folded into the reply it belongs to:
    an assistant turn with ``tool_calls`` starts a reply (or its next round), a
    ``tool`` turn is the result of one of its calls, the assistant turn after the
    results is its next round. Returns what replaces ``last`` (``[last]`` changed, or
    ``[last, new reply]``)."""
    role = m.get("role")
    content = m.get("content") or ""
    if not isinstance(content, str):
        raise TypeError(f"needs a str 'content', got {short(content)}")
    if role == "tool":
        if last is None or last.rounds is None:
            raise ValueError("is a 'tool' message with no assistant 'tool_calls' before it")
        cid = m.get("tool_call_id")
        rounds = [dict(r) for r in last.rounds]
        calls = [dict(c) for c in rounds[-1]["tool_calls"]]
        match = [c for c in calls if c["id"] == cid]
        if not match:
            raise ValueError(f"is a 'tool' message for call {short(cid)}, which the assistant "
                             "turn before it did not make")
        match[0].update(result=content, state="done")
        rounds[-1]["tool_calls"] = calls
        return [replace(last, rounds=tuple(rounds))]
    calls = []
    for j, c in enumerate(m.get("tool_calls") or []):
        fn = c.get("function") if isinstance(c, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(c.get("id"), str):
            raise TypeError(f"tool_calls[{j}] must be {{'id', 'type': 'function', 'function': "
                            "{'name', 'arguments'}}")
        args = fn.get("arguments", "")
        calls.append({"id": c["id"], "name": str(fn.get("name", "")),
                      "arguments": args if isinstance(args, str) else json.dumps(args),
                      "state": "cancelled", "result": None, "display": {}, "error": None,
                      "ms": None})
    reasoning = m.get("reasoning") or m.get("reasoning_content") or ""
    thought: str = reasoning if isinstance(reasoning, str) else ""
    new_round: dict[str, Any] = {"reasoning": thought, "content": content, "tool_calls": calls}
    if last is not None and last.rounds is not None and _awaits_answer(last):
        return [replace(last, rounds=(*last.rounds, new_round), content=last.content + content,
                        reasoning=last.reasoning + thought,
                        finish_reason="tool_calls" if calls else "stop")]
    reply = StoredMessage(new_id, last.id if last is not None else None, "assistant", content,
                          thought, "done",
                          "tool_calls" if calls else "stop", None, (new_round,))
    return [*([last] if last is not None else []), reply]


_DATA_URL = re.compile(r"\Adata:([\w.+-]+/[\w.+-]+)(?:;[\w=.+-]+)*;base64,(.*)\Z", re.DOTALL)


def _content_parts(parts: list[Any]) -> tuple[str, tuple[Attachment, ...]]:
    """The question and the attachments of a user's content parts."""
    from ..attachments import attach, unique_names  # (checks images: decodes them)

    texts: list[str] = []
    found: list[Attachment] = []
    for j, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "input_text") and isinstance(part.get("text"), str):
            block = parse_text_block(part["text"])
            if block is None:
                texts.append(part["text"])
            else:
                found.append(block)
            continue
        if kind in ("image_url", "input_image"):
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            mime, data = _data_url(url, f"part {j}")
            if kind_of(mime) != "image":
                raise ValueError(f"part {j}: an image_url of type {mime!r} is not an image")
            found.append(attach(data, mime=mime))  # (named image.png, image-2.png...)
            continue
        if kind in ("file", "input_file"):
            file = part.get("file") if kind == "file" else part
            if not isinstance(file, dict):
                raise TypeError(f"part {j}: a file part needs a 'file' object")
            name = file.get("filename")
            mime, data = _data_url(file.get("file_data"), f"part {j}")
            found.append(attach(data, mime=mime, name=name if isinstance(name, str) and name
                                else f"file-{len(found) + 1}"))
            continue
        raise ValueError(f"part {j}: a content part of type {short(kind)} is not one nbstream "
                         "reads (text, image_url, file, input_text, input_image, input_file)")
    return "\n\n".join(texts), unique_names(found)


def _data_url(url: object, where: str) -> tuple[str, bytes]:
    if not isinstance(url, str):
        raise TypeError(f"{where}: needs a data: URL, got {short(url)}")
    m = _DATA_URL.match(url)
    if m is None:
        raise ValueError(f"{where}: only base64 data: URLs are read (nbstream fetches nothing), "
                         f"got {short(url[:60])}")
    try:
        return m[1].lower(), base64.b64decode(m[2], validate=True)
    except ValueError:
        raise ValueError(f"{where}: the data: URL is not valid base64") from None


# ------------------------------------------------------------------ Markdown
def conversation_markdown(messages: Iterable[tuple[str, str, str]]) -> str:
    """The Markdown of a conversation: ``(role, text, status)`` per message, in order.

    Each message is a ``## You`` or ``## Assistant`` heading, a blank line and
    its text (newlines at either end left out); a reply that did not end
    normally adds a note (``*(stopped)*``, ``*(error)*``, ``*(timed out)*``).
    Messages are separated by a blank line, and the whole ends with a newline.
    The view's "Copy conversation" (``js/src/transcript.ts``) writes the same.
    """
    blocks: list[str] = []
    for role, text, status in messages:
        parts = ["## You" if role == "user" else "## Assistant"]
        body = text.strip("\n")
        if body:
            parts.append(body)
        note = STATUS_NOTES.get(status) if role != "user" else None
        if note is not None:
            parts.append(note)
        blocks.append("\n\n".join(parts))
    return "\n\n".join(blocks) + "\n" if blocks else ""
