"""The kernel end of the wire: the widget's state as the views get it, and what
views send, checked against the protocol (``protocol.py`` declares both).

**Encoding.** A widget's messages (its :class:`~nbstream.conversation.history.History`)
travel as per-message state keys (``m<i>`` a meta, ``m<i>.<s>`` a delta,
``m<i>.a<k>`` an attachment's preview, and ``last_id``, ``live``, ``removed``,
``current``). :func:`reply_meta` / :func:`reply_state` (and :func:`message_meta`
/ :func:`message_state` for any entry) encode one message; a user turn's
attachments are listed in its meta (:func:`attachment_metas`) and their preview
images travel as binary buffers (:func:`preview_buffers`), once. A
:class:`WireEncoder` encodes a whole widget: the snapshot a view created or
reloaded starts from (:meth:`WireEncoder.snapshot`, any thread) and, on the pump
thread only, one ``update`` message per pump step with what changed
(:meth:`WireEncoder.send_update`). What it has sent so far is its own state
(see the class).

**Checking.** A view is not trusted (a stale bundle, a bug, or a hostile page can send
anything). :func:`parse_view_msg` checks each custom message against the type
``protocol.py`` declares for its ``kind`` (:data:`~nbstream.widgets.protocol.ViewMsg`:
its fields, their types, the ``MAX_*`` bounds) before any handler sees it, so
the handlers work on typed messages and only check what the types cannot say
(an id the widget knows, a text that is not blank). The binary buffers of a
message are checked with it (only a Send's attachments have any: one per
attachment, of its declared size), and :func:`view_files` pairs them with
their names. A message that fails is ignored, counted and logged by the
widget's :class:`ViewMessageFilter`.

The encoding functions and the checking are pure, :class:`ViewMessageFilter` guards
itself: any thread may use them (view messages are handled on the kernel's main
thread, or a subshell's). :class:`WireEncoder` says which of its fields belong to
which thread.
"""

from __future__ import annotations

import json
import logging
import reprlib
import threading
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import msgspec

from ..conversation.history import History, UserTurn
from ..core.attachment import Attached
from ..core.pump import Outgoing
from ..core.stream import Body, body_runs
from .protocol import (
    CURRENT_KEY,
    FINAL_STATUSES,
    LAST_ID_KEY,
    LIVE_KEY,
    REMOVED_KEY,
    AttachmentMeta,
    DeltaBody,
    LoadingMeta,
    MessageMeta,
    MessageState,
    PreviewMeta,
    ToolCallMeta,
    ViewDebug,
    ViewMsg,
    WelcomeMsg,
    delta_key,
    preview_key,
)
from .reply import Reply
from .toolturn import MAX_ARGS_SHOWN

log = logging.getLogger("nbstream")

#: distinct reasons a widget logs at warning level; later new ones are only counted
#: (a hostile view cannot fill the log)
MAX_LOGGED_REASONS = 20


def _kind(message_type: Any) -> str:
    (kind,) = typing.get_args(typing.get_type_hints(message_type)["kind"])
    return str(kind)


#: each message a view may send, by its ``kind`` (from :data:`ViewMsg`)
VIEW_MSG_TYPES: dict[str, Any] = {_kind(t): t for t in typing.get_args(ViewMsg)}


class BadViewMessage(ValueError):
    """A message from the view that does not fit the protocol, or names what the
    widget does not have (raised and caught inside the widget's handler)."""


def parse_view_msg(content: object, buffers: Sequence[Any] = ()) -> ViewMsg:
    """``content`` as the :data:`ViewMsg` its ``kind`` declares (fields of other
    names are dropped), with its binary ``buffers`` (those of the comm message);
    raises :class:`BadViewMessage` saying what does not fit.

    Only a :class:`~nbstream.widgets.protocol.SendMsg` with ``attachments`` has
    buffers: one per attachment, in order, each of its ``size`` bytes
    (:func:`view_files` reads them).

    The reason names the kind and the field, never the value sent, so a view
    cannot make up new reasons without end.
    """
    if not isinstance(content, dict):
        raise BadViewMessage(f"content is not an object: {_json_type(content)}")
    kind = content.get("kind")
    if not isinstance(kind, str):
        raise BadViewMessage("message without a str kind")
    message_type = VIEW_MSG_TYPES.get(kind)
    if message_type is None:
        raise BadViewMessage("unknown kind")
    try:
        msg: ViewMsg = msgspec.convert(content, message_type)
    except msgspec.ValidationError as exc:
        raise BadViewMessage(f"{kind}: {exc}") from None
    declared = msg.get("attachments", []) if msg["kind"] == "send" else []
    if len(buffers) != len(declared):
        raise BadViewMessage(f"{kind}: {len(buffers)} buffers for {len(declared)} attachments")
    for item, buf in zip(declared, buffers, strict=True):
        if _nbytes(buf) != item["size"]:
            raise BadViewMessage(f"{kind}: an attachment's size is not its buffer's")
    return msg


@dataclass(frozen=True)
class ViewFile:
    """A file a view's Send carried: the name the view gave it (hostile input) and
    its bytes."""

    name: str
    data: bytes


def view_files(msg: ViewMsg, buffers: Sequence[Any]) -> tuple[ViewFile, ...]:
    """The files of a Send checked by :func:`parse_view_msg`: each attachment it
    names with its buffer's bytes (a copy), in order; none for other kinds."""
    declared = msg.get("attachments", []) if msg["kind"] == "send" else []
    return tuple(ViewFile(item["name"], bytes(memoryview(buf).cast("B")))
                 for item, buf in zip(declared, buffers, strict=True))


def _nbytes(buf: Any) -> int:
    try:
        return memoryview(buf).nbytes
    except TypeError:
        raise BadViewMessage("a buffer that is not bytes") from None


def check_view_debug(value: object, where: str) -> ViewDebug:
    """``value`` as a widget's ``debug`` switches (:class:`~nbstream.widgets.protocol.ViewDebug`);
    a :class:`ValueError` (an unknown switch, naming the known ones, or a value out of
    range) or :class:`TypeError` (not a dict, a value of the wrong type) naming
    ``where``."""
    if not isinstance(value, dict):
        raise TypeError(f"{where} must be a dict of debugging switches such as "
                        f"{{'markdown': 'full'}}, got {type(value).__name__} "
                        f"{reprlib.repr(value)}")
    known = typing.get_type_hints(ViewDebug)
    unknown = sorted(str(k) for k in value if k not in known)
    if unknown:
        raise ValueError(f"{where}: unknown switch {', '.join(map(repr, unknown))}; the "
                         f"switches are {', '.join(known)}")
    try:
        checked: ViewDebug = msgspec.convert(value, ViewDebug)
    except msgspec.ValidationError as exc:
        kind = TypeError if str(exc).startswith("Expected `") and "`, got `" in str(exc) \
            else ValueError
        raise kind(f"{where}: {exc}") from None
    return checked


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, (int, float)):
        return "a number"
    return "another value"


class ViewMessageFilter:
    """Counts the view messages a widget ignored, and logs each reason once as a
    warning (at most :data:`MAX_LOGGED_REASONS` reasons; later ones are counted).

    Any thread (the handler runs on the main thread or a subshell thread).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self.count = 0

    def note(self, reason: str, content: object) -> None:
        with self._lock:
            self.count += 1
            first = reason not in self._seen
            if first and len(self._seen) >= MAX_LOGGED_REASONS:
                return  # counted, not remembered: the reasons stay bounded
            self._seen[reason] = self._seen.get(reason, 0) + 1
            last = first and len(self._seen) == MAX_LOGGED_REASONS
        if first:
            log.warning("nbstream: ignored a view message (%s): %s; later ones like "
                        "it are ignored silently%s", reason, reprlib.repr(content),
                        "; so are messages of any new reason from now on" if last else "")

    @property
    def reasons(self) -> set[str]:
        """The reasons logged so far."""
        with self._lock:
            return set(self._seen)


# ------------------------------------------------------------------- encoding
Entry = UserTurn | Reply

#: the figures of a finished reply its meta carries (what the view shows); the
#: rest stays in ``reply.stats``
VIEW_STATS = ("ttft_ms", "pieces", "pieces_per_s", "tokens", "tokens_per_s", "duration_ms",
              "reasoning_ms", "usage", "timings")


def attachment_metas(turn_id: str, attached: Sequence[Attached]) -> list[AttachmentMeta]:
    """What a turn's meta says of its attachments (its previews' keys included)."""
    out: list[AttachmentMeta] = []
    for k, item in enumerate(attached, start=1):
        a, p = item.attachment, item.preview
        meta = AttachmentMeta(name=a.name, mime=a.mime, size=a.size, kind=a.kind)
        if a.width is not None and a.height is not None:
            meta["width"], meta["height"] = a.width, a.height
        if a.note:
            meta["note"] = a.note
        if p.excerpt is not None:
            meta["excerpt"] = p.excerpt
        if p.data is not None:
            meta["preview"] = PreviewMeta(key=preview_key(turn_id, k), mime=p.mime,
                                          width=p.width, height=p.height)
        out.append(meta)
    return out


def preview_buffers(turn_id: str, attached: Sequence[Attached]) -> dict[str, bytes]:
    """The preview keys of a turn and their bytes (they travel as binary buffers)."""
    return {preview_key(turn_id, k): item.preview.data
            for k, item in enumerate(attached, start=1) if item.preview.data is not None}


def turn_meta(turn: UserTurn) -> MessageMeta:
    """A prompt's key in the widget's state (a prompt's text travels in its meta)."""
    meta = MessageMeta(role="user", seq=0, status="done", stats={}, text=turn.text,
                       parent=turn.parent)
    if turn.attached:
        meta["attachments"] = attachment_metas(turn.id, turn.attached)
    return meta


def turn_state(turn: UserTurn) -> MessageState:
    """A prompt, whole."""
    state = MessageState(id=turn.id, role="user", text=turn.text, reasoning="", seq=0,
                         status="done", error=None, detail=None, stats={},
                         parent=turn.parent)
    if turn.attached:
        state["attachments"] = attachment_metas(turn.id, turn.attached)
    return state


def reply_meta(reply: Reply) -> MessageMeta:
    """A reply's key in the widget's state: everything but its text."""
    _, seq, status, error, detail = reply.stream.state()
    final = status in FINAL_STATUSES
    stats: dict[str, Any] = {}
    if final and not reply.stream.restored:  # a restored message has no figures
        stats = {k: v for k, v in reply.stats.items() if k in VIEW_STATS}
    meta = MessageMeta(role="assistant", seq=seq, status=status, stats=stats,
                       parent=reply.parent)
    if error is not None:
        meta["error"] = error
    if detail is not None and status in ("error", "timeout"):
        meta["detail"] = detail
    loading = reply.stream.loading if status == "loading" else None
    if loading is not None:
        fraction = None if loading.fraction is None else round(loading.fraction, 3)
        meta["progress"] = LoadingMeta(text=loading.text, fraction=fraction)
    if final:
        meta["finish_reason"] = reply.finish_reason
    if reply.pane is not None:
        meta["pane"] = reply.pane
    options = reply.options
    if options:
        meta["options"] = options
    tools = tool_metas(reply)
    if tools:
        meta["tools"] = tools
    return meta


def tool_metas(reply: Reply) -> list[ToolCallMeta]:
    """The meta of each of ``reply``'s tool calls, in call order (#20): where each
    stands, and how many characters of its arguments the view did not receive (its
    argument text and result travel in the deltas, as ``tool`` / ``tool_result`` runs)."""
    out: list[ToolCallMeta] = []
    turn = reply.turn
    for c in reply.tool_calls:
        m = cast(ToolCallMeta, c.meta())
        full = len(c.arguments)
        shown = turn.shown_arguments(c) if turn is not None else min(full, MAX_ARGS_SHOWN)
        if full > shown:
            m["cut"] = full - shown
        out.append(m)
    return out


def reply_state(reply: Reply) -> MessageState:
    """A whole reply: its text and reasoning are one consistent snapshot (deltas 1..seq)."""
    deltas = reply.stream.sent_deltas()
    _, seq, status, error, detail = reply.stream.state()
    runs = [run for d in deltas if d.seq <= seq for run in body_runs(d.body)]
    final = status in FINAL_STATUSES
    state = MessageState(
        id=reply.id, role="assistant",
        text="".join(run[1] for run in runs if run[0] == "answer"),
        reasoning="".join(run[1] for run in runs if run[0] == "reasoning"),
        seq=seq, status=status, error=error, detail=detail,
        stats=reply.stats if final and not reply.stream.restored else {}, parent=reply.parent)
    if final:
        state["finish_reason"] = reply.finish_reason
    if reply.pane is not None:
        state["pane"] = reply.pane
    options = reply.options
    if options:
        state["options"] = options
    return state


def message_meta(entry: Entry) -> MessageMeta:
    """Any entry's meta key (:func:`turn_meta` or :func:`reply_meta`)."""
    return turn_meta(entry) if isinstance(entry, UserTurn) else reply_meta(entry)


def message_state(entry: Entry) -> MessageState:
    """Any entry, whole (:func:`turn_state` or :func:`reply_state`)."""
    return turn_state(entry) if isinstance(entry, UserTurn) else reply_state(entry)


def wire_body(body: Body) -> DeltaBody:
    """A delta's body as JSON: a string, or its runs (``[[type, text, ...], ...]``: a
    tool run carries its call's number, a result its display; see
    :data:`~nbstream.widgets.protocol.DeltaRun`)."""
    return body if isinstance(body, str) else cast(DeltaBody, [list(run) for run in body])


#: about how many characters of text one update of a loaded history carries (see
#: :func:`history_slices`): a browser decodes an update message in one task, ~0.1 ms
#: a KB of this Markdown (traced), so a slice is a task of a few ms
HISTORY_SLICE_CHARS = 48_000


def _entry_chars(entry: Entry) -> int:
    """About what ``entry`` weighs on the wire: its text, reasoning and previews."""
    if isinstance(entry, UserTurn):
        return len(entry.text) + sum(len(a.preview.data or b"") + len(a.preview.excerpt or "")
                                     for a in entry.attached)
    return len(entry.text) + len(entry.reasoning) + 200 * len(entry.tool_calls)


def history_slices(entries: Sequence[Entry], budget: int = HISTORY_SLICE_CHARS,
                   ) -> list[tuple[list[str], list[str]]]:
    """``entries`` (in the order shown) cut into runs of about ``budget`` characters,
    **newest run first**, each as ``(reply ids, other ids)`` for
    :meth:`~nbstream.core.pump.Pump.send_history`: a history loaded at once goes to
    the views a slice per update, so a view shows its end first and no message grows
    with the history. A message larger than ``budget`` is a slice of its own."""
    slices: list[tuple[list[str], list[str]]] = []
    replies: list[str] = []
    others: list[str] = []
    used = 0
    for entry in reversed(entries):
        size = _entry_chars(entry)
        if (replies or others) and used + size > budget:
            slices.append((replies, others))
            replies, others, used = [], [], 0
        (replies if isinstance(entry, Reply) else others).append(entry.id)
        used += size
    if replies or others:
        slices.append((replies, others))
    return slices


def _json_size(value: Any) -> int:
    # as jupyter_client's packer writes it (default separators, UTF-8)
    return len(json.dumps(value, ensure_ascii=False).encode())


class WireEncoder:
    """A widget's history as its views get it: whole (:meth:`snapshot`) and as
    changes (:meth:`send_update`), remembering what it has sent so that each
    update carries only what changed.

    ``removed_count`` and ``snapshot_live`` are guarded by the history's lock
    (the pump writes one, a snapshot on any thread the other, and each reads
    both); the ``*_sent`` fields and ``bytes_sent`` are the pump thread's alone.
    """

    def __init__(self, history: History[Reply],
                 send: Callable[[dict[str, Any], list[bytes] | None], None],
                 note: Callable[[list[DeltaBody]], None] | None = None) -> None:
        self._history = history
        #: hands one update message and its binary buffers to the widget's comm
        #: (pump thread)
        self._send = send
        #: told the delta bodies of each update before it is sent (pump thread): the
        #: widget passes runtime.py's ``note_bodies``, which sends the chunks they need
        self._note = note
        #: removals sent (the ``removed`` key)
        self.removed_count = 0
        #: messages that were live in the last snapshot (get_state)
        self.snapshot_live: list[str] = []
        self._last_id_sent = 0
        self._current_sent: str | None = None
        self._live_sent: dict[str, int] = {}
        #: user turns whose attachment previews were sent
        self._previews_sent: set[str] = set()
        #: bytes of every update message sent (the envelope and buffers included)
        self.bytes_sent = 0

    def snapshot(self) -> dict[str, Any]:
        """Every message's keys, whole (any thread; a delta key sent twice is harmless).
        A preview's value is ``bytes``: ipywidgets sends it as a binary buffer."""
        history = self._history
        with history.lock:
            entries = history.entries()
            last_id = history.last_id
            removed = self.removed_count
            current = history.current
        state: dict[str, Any] = {LAST_ID_KEY: last_id, REMOVED_KEY: removed,
                                 CURRENT_KEY: current}
        live: dict[str, int] = {}
        snapshot_live: list[str] = []
        for e in entries:
            if isinstance(e, UserTurn):
                state[e.id] = turn_meta(e)
                state.update(preview_buffers(e.id, e.attached))
                continue
            meta = reply_meta(e)
            for d in e.stream.sent_deltas():
                if d.seq <= meta["seq"]:
                    state[delta_key(d.id, d.seq)] = wire_body(d.body)
            state[e.id] = meta
            if meta["status"] not in FINAL_STATUSES:
                snapshot_live.append(e.id)
                if meta["seq"]:
                    live[e.id] = meta["seq"]
        state[LIVE_KEY] = live
        with history.lock:
            self.snapshot_live = snapshot_live
        return state

    def live_in_snapshot(self) -> list[str]:
        """The messages that were live in the last snapshot (a copy; any thread)."""
        with self._history.lock:
            return list(self.snapshot_live)

    def send_update(self, out: Outgoing) -> None:
        """Send what one pump step has for this widget as one update message (pump
        thread only)."""
        history = self._history
        state: dict[str, Any] = {}
        sizes: dict[str, int] = {}

        def put(owner: str, key: str, value: Any) -> None:
            state[key] = value
            sizes[owner] = sizes.get(owner, 0) + len(key) + 6 + _json_size(value)

        bodies: list[DeltaBody] = []
        for d in out.deltas:
            bodies.append(wire_body(d.body))
            put(d.id, delta_key(d.id, d.seq), bodies[-1])
        with history.lock:  # only the entries this step names: nothing grows with the history
            named = set(out.resend) | out.changed | {d.id for d in out.deltas}
            known = {i: history.known[i] for i in named if i in history.known}
        for mid, have in out.resend.items():
            entry = known.get(mid)
            if isinstance(entry, Reply):
                for d in entry.stream.sent_deltas(have):
                    bodies.append(wire_body(d.body))
                    put(mid, delta_key(mid, d.seq), bodies[-1])
        if self._note is not None and bodies:
            self._note(bodies)  # before the text that needs them
        buffers: dict[str, bytes] = {}  # binary keys: attachment previews
        for mid in sorted(out.changed, key=lambda i: int(i[1:])):
            entry = known.get(mid)
            if entry is not None:
                put(mid, mid, message_meta(entry))
                if isinstance(entry, UserTurn) and entry.attached \
                        and mid not in self._previews_sent:
                    self._previews_sent.add(mid)  # once: a meta sent again carries none
                    buffers.update(preview_buffers(mid, entry.attached))
                continue
            with history.lock:
                gone = history.removed.pop(mid, None)
                if gone is None:
                    continue
                self.removed_count += 1
            # removed: its keys are emptied, so that a saved notebook keeps no trace
            put(mid, mid, None)
            if isinstance(gone, Reply):
                for d in gone.stream.sent_deltas():
                    put(mid, delta_key(mid, d.seq), None)
            else:
                for key in preview_buffers(mid, gone.attached):
                    put(mid, key, None)
                self._previews_sent.discard(mid)
            state[REMOVED_KEY] = self.removed_count
        live = {s.id: s.seq for s in out.live if s.seq}  # (seq 0: nothing to miss yet)
        # with metas, always: a snapshot sent meanwhile may have left an older copy
        if live != self._live_sent or out.changed:
            self._live_sent = live
            state[LIVE_KEY] = live
        with history.lock:
            last_id, current = history.last_id, history.current
        if last_id != self._last_id_sent:
            self._last_id_sent = last_id
            state[LAST_ID_KEY] = last_id
        if current != self._current_sent:
            self._current_sent = current
            state[CURRENT_KEY] = current
        if state or buffers:
            msg = {"method": "update", "state": state, "buffer_paths": [[k] for k in buffers]}
            total = _json_size(msg) + sum(len(b) for b in buffers.values())
            self._send(msg, list(buffers.values()) or None)
        if out.welcome:  # after the state it brought: a welcomed view is up to date
            self._send({"method": "custom", "content": WelcomeMsg(kind="welcome")}, None)
        if not state and not buffers:
            return
        # each message's keys count for it; the envelope for the first one named
        owners = list(sizes)
        for i, owner in enumerate(owners):
            entry = known.get(owner)
            if isinstance(entry, Reply):
                n = sizes[owner] + (total - sum(sizes.values()) if i == 0 else 0)
                entry.stream.add_wire_bytes(n)
        self.bytes_sent += total
