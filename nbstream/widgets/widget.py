"""The pipeline's widget end: synced state, deltas, and view messages.

:class:`StreamingWidget` is the one anywidget class every nbstream widget is
built on (``ChatWidget``, ``StreamView``, ``Compare``): each only decides
which replies to start and how the view lays them out (``mode``), so there is
one copy of the pipeline.

Who owns what:

* ``_all`` (every user turn and :class:`Reply`, in order of creation) and
  ``_branches`` (who follows whom, and which path shows: ``branches.py``) are
  guarded by ``_lock``; the thread that starts a reply (the main thread, or
  the comm thread for the view's Send) adds to them. The conversation shown
  (:meth:`StreamingWidget._history`) is the path of ``_branches``; a widget
  with no alternatives (every one but an edited or regenerated chat) is one
  path holding every message.
* Each reply's text and status are owned by its stream (see ``stream.py``).
* The per-message state keys (``m<i>``, ``m<i>.<s>``, ``last_id``, ``live``,
  ``removed``; see ``protocol.py``) are written by the pump thread only
  (:meth:`StreamingWidget._send_update`), one update message per step, so the
  browser receives them in order. They are no traitlets: the widget's history
  is their source of truth, and :meth:`StreamingWidget.get_state` adds them
  (whole) for a view that asks for the state.
* A user turn's attachments (``UserTurn.attached``) are immutable, prepared
  (previews made) on the thread that sends; the pump sends each turn's preview
  buffers once (``_WireState.previews_sent``, the pump's alone).
* ``system_prompt`` (a synced trait) is set by the user's cells or by the view's
  ``system_prompt`` command (main or subshell thread); a reply reads it once, when
  it is asked (:meth:`StreamingWidget._new_reply`), and so do the generation
  options (``_generation``, replaced whole, never mutated).
* View messages (:meth:`_on_view_msg`) arrive on the kernel's main thread, or
  a subshell thread; the handler only enqueues or flags and never blocks.
"""

from __future__ import annotations

import itertools
import json
import logging
import reprlib
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Literal

import anywidget
import traitlets

from ..checks import check_system_prompt
from ..conversation.branches import Branches
from ..conversation.transcript import StoredMessage
from ..core import lanes
from ..core.attachment import Attachment, AttachmentError, AttachmentLimits
from ..core.pump import Outgoing, get_pump
from ..core.stream import Body, Stream, body_runs
from ..doctor import warn_unsupported_frontend
from ..generation import GenerationOptions
from ..options import Options
from ..sources.base import ChatMessage, Source, source_name
from .attachments import (
    Attached,
    UploadRefused,
    attached_for,
    attachment_metas,
    check_chat,
    parse_upload,
    policy,
    prepare,
    preview_buffers,
    preview_key,
)
from .protocol import (
    CURRENT_KEY,
    FINAL_STATUSES,
    LAST_ID_KEY,
    LIVE_KEY,
    REMOVED_KEY,
    DeltaBody,
    LoadingMeta,
    MessageMeta,
    MessageState,
    delta_key,
)
from .reply import Reply, run_reply
from .runtime import widget_css, widget_esm, widget_runtime_ref

log = logging.getLogger("nbstream")


class UserTurn:
    """A prompt in the history (immutable): its text, the message it follows, and
    its attachments with their previews."""

    __slots__ = ("attached", "id", "parent", "text")

    def __init__(self, id: str, text: str, parent: str | None = None,
                 attached: tuple[Attached, ...] = ()) -> None:
        self.id = id
        self.text = text
        self.parent = parent
        self.attached = attached

    @property
    def attachments(self) -> tuple[Attachment, ...]:
        """What the turn carries besides its text."""
        return tuple(a.attachment for a in self.attached)

    def message(self) -> ChatMessage:
        """The turn as a source sees it."""
        m: ChatMessage = {"role": "user", "content": self.text}
        if self.attached:
            m["attachments"] = self.attachments
        return m

    def meta(self) -> MessageMeta:
        """Its key in the widget's state (a prompt's text travels in its meta)."""
        meta = MessageMeta(role="user", seq=0, status="done", stats={}, text=self.text,
                           parent=self.parent)
        if self.attached:
            meta["attachments"] = attachment_metas(self.id, self.attached)
        return meta

    def state(self) -> MessageState:
        state = MessageState(id=self.id, role="user", text=self.text, reasoning="", seq=0,
                             status="done", error=None, detail=None, stats={},
                             parent=self.parent)
        if self.attached:
            state["attachments"] = attachment_metas(self.id, self.attached)
        return state


#: the figures of a finished reply its meta carries (what the view shows); the
#: rest stays in ``reply.stats``
VIEW_STATS = ("ttft_ms", "pieces", "pieces_per_s", "tokens", "tokens_per_s", "duration_ms",
              "reasoning_ms", "usage", "timings")


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
    return meta


def reply_state(reply: Reply) -> MessageState:
    """A whole reply: its text and reasoning are one consistent snapshot (deltas 1..seq)."""
    deltas = reply.stream.sent_deltas()
    _, seq, status, error, detail = reply.stream.state()
    runs = [run for d in deltas if d.seq <= seq for run in body_runs(d.body)]
    final = status in FINAL_STATUSES
    state = MessageState(
        id=reply.id, role="assistant",
        text="".join(t for k, t in runs if k == "answer"),
        reasoning="".join(t for k, t in runs if k == "reasoning"),
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


def wire_body(body: Body) -> DeltaBody:
    """A delta's body as JSON: a string, or ``[[type, text], ...]``."""
    return body if isinstance(body, str) else [[k, t] for k, t in body]


def _json_size(value: Any) -> int:
    # as jupyter_client's packer writes it (default separators, UTF-8)
    return len(json.dumps(value, ensure_ascii=False).encode())


Entry = UserTurn | Reply


class StreamingWidget(anywidget.AnyWidget):
    """Base of every nbstream widget: one channel on the pump, one history.

    Subclasses start replies with :meth:`_start` and may handle more view
    commands in :meth:`_on_command`.
    """

    # A small loader; the bundle and the CSS travel once per kernel in the shared
    # runtime widget that ``_runtime`` names (runtime.py), not in every widget's state.
    _esm = widget_esm()
    _css = widget_css()
    _runtime = traitlets.Unicode("").tag(sync=True)

    @traitlets.default("_runtime")
    def _default_runtime(self) -> str:
        return widget_runtime_ref()

    #: how the view lays messages out: "chat", "stream" or "compare"
    mode = traitlets.Unicode("chat").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    source_label = traitlets.Unicode("").tag(sync=True)
    #: whether the history sent back to the model keeps earlier replies' reasoning
    #: (in ``<think>`` tags before the answer); by default it is left out, as servers
    #: and chat templates expect. Kernel side only; a keyword of every widget.
    include_reasoning_in_history = traitlets.Bool(False)
    #: sent first to the model with each question asked after it is set (a reply
    #: keeps the one it was asked with); None or "": none. Synced: the chat view
    #: shows it and edits it (its edits come back as a ``system_prompt`` command).
    system_prompt = traitlets.Any(None, allow_none=True).tag(sync=True)

    #: what the view lets the user attach (see ``protocol.AttachmentPolicy``; the kernel
    #: checks everything again); set by each widget from its source(s) and limits
    attachment_policy = traitlets.Dict().tag(sync=True)

    @traitlets.validate("system_prompt")
    def _check_system_prompt(self, proposal: Any) -> str | None:
        return check_system_prompt(proposal["value"], type(self).__name__, attribute=True)

    def __init__(self, *, title: str = "", options: Options | None = None,
                 **traits: Any) -> None:
        # ``traits`` are set by the subclasses (mode, source_label...), never by users:
        # their constructors check user keyword arguments with parse_options()
        opts = options if options is not None else Options()
        warn_unsupported_frontend()  # e.g. a marimo too old to take the pump's sends
        super().__init__(title=title, **traits)
        self.options = opts
        self.include_reasoning_in_history = opts.include_reasoning_in_history
        self.limits = opts.limits
        self.max_pending = opts.max_pending
        #: what a message and the conversation may carry in attachments (#21)
        self.attachment_limits: AttachmentLimits = opts.attachment_limits
        #: the generation options each new reply takes a copy of (validated by the
        #: subclass that exposes them, e.g. ``ChatWidget.generation``)
        self._generation = GenerationOptions()
        self._lock = threading.RLock()
        self._all: list[Entry] = []
        self._branches = Branches()
        self._ids = itertools.count(1)
        self._ignored = ViewMessageFilter()
        self._wire = _WireState()
        self._pump = get_pump()
        self._channel = self._pump.open_channel(self._send_update, opts.interval)
        self.on_msg(self._on_view_msg)

    # ------------------------------------------------------------- public API
    def stop(self, id: str | None = None) -> int:
        """Stop this widget: the running reply and every reply still queued.

        This is what the view's Stop button and Escape do, and what a kernel
        interrupt during :meth:`Reply.wait` does. Each reply keeps the text
        shown so far and ends ``stopped``; queued ones never start. With
        ``id``, only that reply stops (like ``reply.cancel()``). Returns how
        many replies were stopped.
        """
        with self._lock:  # every branch's: a reply streams on when another branch shows
            live = [e for e in self._all if isinstance(e, Reply) and not e.done]
        return sum(1 for r in live if (id is None or r.id == id) and r.cancel())

    @property
    def replies(self) -> list[Reply]:
        """The replies shown, oldest first."""
        with self._lock:
            return [e for e in self._history() if isinstance(e, Reply)]

    @property
    def last(self) -> Reply | None:
        """The latest reply, if any."""
        replies = self.replies
        return replies[-1] if replies else None

    def clear(self) -> None:
        """Stop what runs and forget the history."""
        self.stop()
        with self._lock:
            self._all.clear()
            self._branches.clear()
            self._wire.current = None
        self._history_changed()

    @property
    def conversation(self) -> list[MessageState]:
        """Every message shown, whole (text, reasoning, parts, status, stats): a copy."""
        with self._lock:
            entries = self._history()
        return [e.state() if isinstance(e, UserTurn) else reply_state(e) for e in entries]

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        """The synced state; with no ``key``, every message's keys too (what a view
        created or reloaded later starts from)."""
        state: dict[str, Any] = super().get_state(key, drop_defaults)
        if key is None and hasattr(self, "_wire"):
            state.update(self._snapshot())
        return state

    def send_state(self, key: Any = None) -> None:
        """Send the state (ipywidgets calls this when a view asks for it)."""
        super().send_state(key)
        if key is None and hasattr(self, "_wire"):
            # The snapshot was taken on this thread while the pump went on: a meta that
            # changed in between may have been sent before the snapshot and overwritten
            # by its older copy. The pump sends the current metas of the messages that
            # were live in the snapshot again, after it (a view ignores what is unchanged).
            with self._lock:
                live = list(self._wire.snapshot_live)
            if live:
                self._pump.publish(self._channel, live)

    def close(self) -> None:
        """Stop live replies and close the widget's comm."""
        if hasattr(self, "_channel"):  # also called by __del__ of a half-built widget
            self.stop()
            self._pump.close_channel(self._channel)
        super().close()

    # -------------------------------------------------------------- internals
    def _new_id(self) -> str:
        # caller holds _lock
        n = next(self._ids)
        self._wire.last_id = n
        return f"m{n}"

    def _history(self, leaf: str | None = None) -> list[Entry]:
        """The messages on the path to ``leaf`` (default: the path shown), in order."""
        # caller holds _lock; a leaf no longer there (cleared meanwhile): nothing
        if leaf is not None and leaf not in self._branches:
            return []
        return [self._wire.known[i] for i in self._branches.path(leaf)]

    def _add(self, entry: Entry, parent: str | None) -> None:
        # caller holds _lock: ``entry`` follows ``parent`` and is shown
        self._all.append(entry)
        self._wire.known[entry.id] = entry
        self._branches.add(entry.id, parent)
        self._wire.current = self._branches.current

    def _new_turn(self, text: str, parent: str | Literal["current"] | None = "current",
                  attached: tuple[Attached, ...] = ()) -> UserTurn:
        # caller holds _lock; ``parent``: the message it follows (default: the last shown)
        self._history_changed()  # a Clear may have removed entries
        if parent == "current":
            parent = self._branches.current
        turn = UserTurn(self._new_id(), text, parent, attached)
        self._add(turn, parent)
        self._pump.publish(self._channel, [turn.id])
        return turn

    def _new_reply(self, source: Source, prompt: str,
                   messages: Callable[[], Sequence[ChatMessage]] | Sequence[ChatMessage]
                   | None = None,
                   pane: int | None = None,
                   parent: str | Literal["current"] | None = "current") -> Reply:
        # caller holds _lock; the reply runs once _launch() is called. ``messages``
        # None: what this widget shows before the reply (resolved when it starts).
        # ``parent``: the message it follows (default: the last shown)
        stream = Stream(self._new_id(), max_pending=self.max_pending,
                        clock=self._pump.clock, limits=self.limits)
        reply: Reply
        if messages is None:
            # the system prompt in force when it was asked, the history when it starts
            system = self.system_prompt
            messages = lambda: self._conversation_before(reply, system)  # noqa: E731
        reply = Reply(stream, source, messages, prompt=prompt,
                      on_interrupt=_weak_call(self.stop), generation=self._generation)
        reply.pane = pane
        reply.parent = self._branches.current if parent == "current" else parent
        self._add(reply, reply.parent)
        return reply

    def _restore(self, messages: Sequence[StoredMessage], source: Source,
                 current: str | None = None) -> list[Entry]:
        """Add ``messages`` (loaded from a file, or given as history: each parent
        before its children) as finished messages, after what is shown, and show the
        branch through ``current`` (their id; None: the last one). They go to the
        views like any finished reply (their metas and deltas, in one update).
        Returns the new entries."""
        added: list[Entry] = []
        # previews are made here, on the caller's thread, not under the lock
        prepared = {m.id: self._prepare_attachments(m.attachments)
                    for m in messages if m.attachments}
        with self._lock:
            base = self._branches.current
            new_id: dict[str, str] = {}
            for m in messages:
                entry: Entry
                parent = base if m.parent is None else new_id[m.parent]
                if m.role == "user":
                    entry = UserTurn(self._new_id(), m.content, parent,
                                     prepared.get(m.id, ()))
                else:
                    above = self._wire.known.get(parent) if parent is not None else None
                    stream = Stream.from_parts(
                        self._new_id(), text=m.content, reasoning=m.reasoning, status=m.status,
                        finish_reason=m.finish_reason, error=m.error, clock=self._pump.clock)
                    entry = Reply(stream, source, (),
                                  prompt=above.text if isinstance(above, UserTurn) else "",
                                  on_interrupt=_weak_call(self.stop))
                    entry.parent = parent
                new_id[m.id] = entry.id
                self._add(entry, parent)
                added.append(entry)
            if messages:
                self._wire.current = self._branches.show(
                    new_id[current] if current is not None else added[-1].id)
        for e in added:  # a reply's deltas go with its meta (as a resync from seq 0 does)
            if isinstance(e, Reply):
                self._pump.resync(self._channel, e.id, 0)
            else:
                self._pump.publish(self._channel, [e.id])
        return added

    def _history_changed(self) -> None:
        """Entries left the history (Clear, Regenerate): tell the view (any thread)."""
        with self._lock:
            present = {e.id for e in self._all}
            gone = [i for i in self._wire.known if i not in present]
            for i in gone:
                self._wire.removed[i] = self._wire.known.pop(i)
        if gone:
            self._pump.publish(self._channel, gone)

    def _launch(self, reply: Reply) -> None:
        """Hand ``reply`` to the pump (to send) and its model's lane (to run)."""
        self._pump.add_stream(self._channel, reply.stream)
        source = reply.source
        try:
            source.queued()  # on the asking thread, before the worker's (Source.queued)
        except Exception:
            log.warning("%s.queued() raised; the reply goes on", source_name(source),
                        exc_info=True)
        lanes.submit(source.lane_key(), source.concurrency, lambda: run_reply(reply))

    def _conversation_before(self, reply: Reply,
                             system_prompt: str | None) -> list[ChatMessage]:
        """What ``reply``'s source sees: ``system_prompt``, then each earlier prompt
        with its answer as shown beside ``reply`` (its pane, in a Compare), then
        ``reply``'s own prompt.

        Turns alternate user / assistant, as chat templates require: a prompt
        whose answer has no text (stopped before its first piece, failed or
        timed out at once) is left out together with that empty answer. The
        widget still shows both; only the model does not see them.
        """
        msgs: list[ChatMessage] = []
        if system_prompt:
            msgs.append({"role": "system", "content": system_prompt})
        with self._lock:  # the path to this reply, whichever branch is shown now
            entries = self._history(reply.id)
        unanswered: UserTurn | None = None  # the latest prompt, until its answer comes
        for e in entries:
            if e is reply:
                break
            if isinstance(e, UserTurn):
                unanswered = e  # an earlier prompt left unanswered is dropped
            elif e.pane == reply.pane and unanswered is not None:
                text = e.text
                if text:
                    msgs.append(unanswered.message())
                    msgs.append({"role": "assistant",
                                 "content": e.history_content(self.include_reasoning_in_history)})
                    unanswered = None
        if unanswered is not None:
            msgs.append(unanswered.message())
        return msgs

    def _snapshot(self) -> dict[str, Any]:
        """Every message's keys, whole (any thread; a delta key sent twice is harmless)."""
        with self._lock:
            entries = list(self._all)
            last_id = self._wire.last_id
            removed = self._wire.removed_count
            current = self._wire.current
        state: dict[str, Any] = {LAST_ID_KEY: last_id, REMOVED_KEY: removed,
                                 CURRENT_KEY: current}
        live: dict[str, int] = {}
        snapshot_live: list[str] = []
        for e in entries:
            if isinstance(e, UserTurn):
                state[e.id] = e.meta()
                state.update(preview_buffers(e.id, e.attached))  # bytes: sent as buffers
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
        with self._lock:
            self._wire.snapshot_live = snapshot_live
        return state

    def _send_update(self, out: Outgoing) -> None:
        # pump thread only: one update message with everything this step sends
        state: dict[str, Any] = {}
        sizes: dict[str, int] = {}
        wire = self._wire

        def put(owner: str, key: str, value: Any) -> None:
            state[key] = value
            sizes[owner] = sizes.get(owner, 0) + len(key) + 6 + _json_size(value)

        for d in out.deltas:
            put(d.id, delta_key(d.id, d.seq), wire_body(d.body))
        with self._lock:  # only the entries this step names: nothing grows with the history
            named = set(out.resend) | out.changed | {d.id for d in out.deltas}
            known = {i: wire.known[i] for i in named if i in wire.known}
        for mid, have in out.resend.items():
            entry = known.get(mid)
            if isinstance(entry, Reply):
                for d in entry.stream.sent_deltas(have):
                    put(mid, delta_key(mid, d.seq), wire_body(d.body))
        buffers: dict[str, bytes] = {}  # binary state keys: attachment previews (#21)
        for mid in sorted(out.changed, key=lambda i: int(i[1:])):
            entry = known.get(mid)
            if entry is not None:
                put(mid, mid, entry.meta() if isinstance(entry, UserTurn) else reply_meta(entry))
                if isinstance(entry, UserTurn) and entry.attached \
                        and mid not in wire.previews_sent:
                    wire.previews_sent.add(mid)  # once: a meta sent again carries none
                    buffers.update(preview_buffers(mid, entry.attached))
                continue
            with self._lock:
                gone = wire.removed.pop(mid, None)
                if gone is None:
                    continue
                wire.removed_count += 1
            # removed: its keys are emptied, so that a saved notebook keeps no trace
            put(mid, mid, None)
            if isinstance(gone, Reply):
                for d in gone.stream.sent_deltas():
                    put(mid, delta_key(mid, d.seq), None)
            else:
                for k, item in enumerate(gone.attached, start=1):
                    if item.preview.data is not None:
                        put(mid, preview_key(mid, k), None)
                wire.previews_sent.discard(mid)
            state[REMOVED_KEY] = wire.removed_count
        live = {s.id: s.seq for s in out.live if s.seq}  # (seq 0: nothing to miss yet)
        # with metas, always: a snapshot sent meanwhile may have left an older copy
        if live != wire.live_sent or out.changed:
            wire.live_sent = live
            state[LIVE_KEY] = live
        with self._lock:
            last_id, current = wire.last_id, wire.current
        if last_id != wire.last_id_sent:
            wire.last_id_sent = last_id
            state[LAST_ID_KEY] = last_id
        if current != wire.current_sent:
            wire.current_sent = current
            state[CURRENT_KEY] = current
        if not state and not buffers:
            return
        msg = {"method": "update", "state": state, "buffer_paths": [[k] for k in buffers]}
        total = _json_size(msg) + sum(len(b) for b in buffers.values())
        self._send(msg, buffers=list(buffers.values()) if buffers else None)
        # each message's keys count for it; the envelope for the first one named
        owners = list(sizes)
        for i, owner in enumerate(owners):
            entry = known.get(owner)
            if isinstance(entry, Reply):
                n = sizes[owner] + (total - sum(sizes.values()) if i == 0 else 0)
                entry.stream.add_wire_bytes(n)
        wire.bytes_sent += total

    def _ask(self, text: str, attachments: tuple[Attachment, ...] = ()) -> None:
        """The view's Send: widgets with an input box ask their source(s) ``text``
        with ``attachments`` (checked, converted; raise an ``AttachmentError`` to
        refuse them: the view is told why)."""

    # -- attachments (#21) ---------------------------------------------------------
    def _attachment_accepts(self) -> list[frozenset[str]]:
        """What each of the widget's sources takes (a widget with no input: nothing)."""
        return []

    def _update_attachment_policy(self) -> None:
        """Tell the view what it may attach (call when a source or the limits change)."""
        self.attachment_policy = dict(policy(self.attachment_limits,
                                             self._attachment_accepts()))

    def _attached(self, attachments: object, sources: Sequence[Source],
                  where: str) -> tuple[Attached, ...]:
        """``attachments`` converted, checked and previewed (see :func:`attached_for`)."""
        return attached_for(attachments, sources, self.attachment_limits, where)

    def _prepare_attachments(self, attachments: tuple[Attachment, ...]) -> tuple[Attached, ...]:
        """Previews of ``attachments`` (the caller's thread: decodes images)."""
        return prepare(attachments, self.attachment_limits) if attachments else ()

    def _check_chat_bytes(self, attachments: tuple[Attachment, ...], where: str) -> None:
        # caller holds _lock: the conversation's attachments with these stay in bounds
        held = (a for e in self._all if isinstance(e, UserTurn) for a in e.attachments)
        check_chat(held, attachments, self.attachment_limits, where)

    def _refuse(self, content: dict[str, Any], reason: str) -> None:
        """Tell the view its Send was refused (it gives the draft back and says why)."""
        draft = content.get("draft")
        if isinstance(draft, int) and not isinstance(draft, bool):
            # a custom message (ipywidgets' Widget.send; ChatWidget.send is the question's)
            self._send({"method": "custom",
                        "content": {"kind": "refused", "draft": draft, "reason": reason}})

    def _on_command(self, kind: str, content: dict[str, Any]) -> bool:
        """Handle a user command from the view; True if handled (subclasses extend).

        Raise :class:`BadViewMessage` for a command whose fields are wrong.
        """
        if kind == "send":
            text = content.get("text")
            if not isinstance(text, str):
                raise BadViewMessage("send without a str text")
            if len(text) > MAX_VIEW_TEXT:
                raise BadViewMessage(f"send of more than {MAX_VIEW_TEXT} characters")
            if not text.strip():
                raise BadViewMessage("send of a blank text")
            buffers = content.pop("__buffers", ())
            try:
                attachments = parse_upload(content.get("attachments"), buffers,
                                           self.attachment_limits)
                self._ask(text, attachments)
            except UploadRefused as bad:
                raise BadViewMessage(str(bad)) from None
            except AttachmentError as exc:  # the user's to hear: the view says it
                self._refuse(content, str(exc))
            return True
        if kind == "stop":
            rid = content.get("id")
            if rid is None:
                self.stop()
            elif not isinstance(rid, str) or not self._knows(rid):
                raise BadViewMessage("stop for an unknown id")
            else:
                self.stop(rid)
            return True
        if kind == "clear":
            self.clear()
            return True
        return False

    def _knows(self, rid: str) -> bool:
        with self._lock:
            return any(isinstance(e, Reply) and e.id == rid for e in self._all)

    def _on_view_msg(self, _widget: Any, content: Any, _buffers: Sequence[Any]) -> None:
        # main thread or a subshell thread: enqueue or flag, never block. The view is
        # not trusted: a message of the wrong shape is ignored (logged once per reason)
        try:
            if not isinstance(content, dict):
                raise BadViewMessage("content is not a dict")
            kind = content.get("kind")
            if kind == "hello":
                self._pump.hello(self._channel)
            elif kind == "resync":
                rid, have = content.get("id"), content.get("have", 0)
                if not (isinstance(rid, str) and len(rid) <= MAX_VIEW_ID):
                    raise BadViewMessage("resync without a valid id")
                if isinstance(have, bool) or not isinstance(have, int) or not 0 <= have <= MAX_SEQ:
                    raise BadViewMessage("resync with an invalid have")
                self._pump.resync(self._channel, rid, have)
            elif kind == "ack":
                rid, seq, ms = content.get("id"), content.get("seq"), content.get("render_ms", 0.0)
                if not (isinstance(rid, str) and len(rid) <= MAX_VIEW_ID):
                    raise BadViewMessage("ack without a valid id")
                if isinstance(seq, bool) or not isinstance(seq, int) or not 0 < seq <= MAX_SEQ:
                    raise BadViewMessage("ack with an invalid seq")
                if (isinstance(ms, bool) or not isinstance(ms, (int, float))
                        or not 0 <= ms <= MAX_RENDER_MS):
                    raise BadViewMessage("ack with an invalid render_ms")
                self._pump.ack(self._channel, rid, seq, float(ms))
            elif not isinstance(kind, str):
                raise BadViewMessage("message without a str kind")
            elif kind == "send" and _buffers:  # attachments: their bytes (#21)
                if not self._on_command(kind, {**content, "__buffers": list(_buffers)}):
                    raise BadViewMessage("unknown kind")
            elif not self._on_command(kind, content):
                raise BadViewMessage("unknown kind")
        except BadViewMessage as bad:
            self._ignored.note(str(bad), content)
        except Exception:
            log.exception("nbstream: handling a view message failed")


#: bounds on what a view message may carry (larger ones are ignored)
MAX_VIEW_TEXT = 1_000_000
MAX_VIEW_ID = 256
MAX_SEQ = 1 << 53
MAX_RENDER_MS = 3_600_000.0


class BadViewMessage(ValueError):
    """A message from the view of the wrong shape (raised and caught inside the handler)."""


class ViewMessageFilter:
    """Counts the view messages a widget ignored; logs each reason once, at debug level.

    Any thread (the handler runs on the main thread or a subshell thread).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self.count = 0

    def note(self, reason: str, content: object) -> None:
        with self._lock:
            self.count += 1
            first = reason not in self._seen
            self._seen.add(reason)
        if first:
            log.debug("nbstream: ignored a view message (%s): %s; later ones like it are "
                      "ignored silently", reason, reprlib.repr(content))

    @property
    def reasons(self) -> set[str]:
        with self._lock:
            return set(self._seen)


def _weak_call(method: Callable[[], object]) -> Callable[[], object]:
    """``method`` (a bound method) without keeping its object alive."""
    ref = weakref.WeakMethod(method)

    def call() -> object:
        m = ref()
        return None if m is None else m()

    return call



class _WireState:
    """What the widget has told the views, for sending only changes.

    ``known``/``removed``/``last_id`` are guarded by the widget's ``_lock``;
    the ``*_sent`` fields and the counters are the pump thread's alone.
    """

    def __init__(self) -> None:
        #: entries of the history by id (what the views know of)
        self.known: dict[str, Entry] = {}
        #: entries removed from the history whose removal is not sent yet
        self.removed: dict[str, Entry] = {}
        self.removed_count = 0
        self.last_id = 0
        self.last_id_sent = 0
        #: the last message of the branch shown (guarded by ``_lock``), and as sent
        self.current: str | None = None
        self.current_sent: str | None = None
        self.live_sent: dict[str, int] = {}
        #: messages that were live in the last snapshot (get_state), guarded by ``_lock``
        self.snapshot_live: list[str] = []
        #: bytes of every update message sent (the envelope and buffers included)
        self.bytes_sent = 0
        #: user turns whose attachment previews were sent (the pump's alone)
        self.previews_sent: set[str] = set()
