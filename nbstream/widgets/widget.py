"""The pipeline's widget end: synced traits, the public API, and the dispatch of
view messages.

:class:`StreamingWidget` is the one anywidget class every nbstream widget is
built on (``ChatWidget``, ``StreamView``, ``Compare``): each only decides
which replies to start and how the view lays them out (``mode``), so there is
one copy of the pipeline. The widget is thin; its parts are:

* the messages: a :class:`~nbstream.conversation.history.History` (every user
  turn and :class:`Reply`, their branches, what the model is shown), guarded
  by its lock (``_lock`` here), which the widget also holds around compound
  steps (a prompt and its reply). The thread that starts a reply (the main
  thread, or the comm thread for the view's Send) adds to it;
* each reply's text and status, owned by its stream (see ``core/stream.py``);
* the wire (``wire.py``): the per-message state keys (``m<i>``,
  ``m<i>.<s>``, ``m<i>.a<k>``, ``last_id``, ``live``, ``removed``, ``current``;
  see ``protocol.py``), written by the pump thread only through the
  :class:`~nbstream.widgets.wire.WireEncoder`, one update message per step, so
  the browser receives them in order. They are no traitlets: the history is
  their source of truth, and :meth:`StreamingWidget.get_state` adds them
  (whole) for a view that asks for the state;
* a user turn's attachments (``UserTurn.attached``, immutable): converted,
  checked and previewed on the thread that asks (the caller's cell, or the
  view's Send), never on the pump; the encoder sends each turn's previews once.
  ``attachment_policy`` (a synced trait) tells the view what it may attach; it
  is set from the source(s) and ``attachment_limits`` (the main thread);
* ``system_prompt`` (a synced trait), set by the user's cells or by the view's
  ``system_prompt`` command (main or subshell thread); a reply reads it once,
  when it is asked (:meth:`StreamingWidget._new_reply`), and so do the
  generation options (``_generation``, replaced whole, never mutated);
* view messages (:meth:`_on_view_msg`), which arrive on the kernel's main
  thread, or a subshell thread; each is checked against its declared type
  (``wire.py``), its binary buffers with it, and the handler only enqueues or
  flags and never blocks (a Send with attachments converts them there first);
* tools (#20): ``_tools`` and ``_max_tool_rounds`` are replaced whole by the
  user's cells (a reply takes them when it is asked); ``_allowed`` (the tools a
  person chose "Always allow" for) guards itself. Each reply's agent loop is its
  :class:`~nbstream.widgets.toolturn.ToolTurn`, which owns its calls; an approval
  from the view or a cell only records a decision there.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Literal

import anywidget
import traitlets

from ..checks import check_system_prompt
from ..conversation.history import History, UserTurn
from ..conversation.transcript import StoredMessage
from ..core import lanes
from ..core.attachment import Attached, Attachment, AttachmentError, AttachmentLimits
from ..core.pump import get_pump
from ..core.stream import Stream
from ..generation import GenerationOptions
from ..options import Options
from ..sources.base import ChatMessage, Source, source_name
from ..tools.calls import Decision, ToolCall
from ..tools.tool import Tool, as_tools
from . import presence
from .attachments import attached_for, check_chat, parse_upload, policy, prepare
from .presence import ViewRoster
from .protocol import MessageState, RefusedMsg, SendMsg, ToolApprovalMsg, ViewMsg
from .reply import Reply, next_round, run_reply
from .runtime import (
    note_bodies,
    warn_unsupported_frontend,
    widget_css,
    widget_esm,
    widget_runtime_ref,
)
from .toolturn import DEFAULT_MAX_TOOL_ROUNDS, AllowList, ToolTurn, restored_rounds
from .wire import (
    BadViewMessage,
    Entry,
    ViewFile,
    ViewMessageFilter,
    WireEncoder,
    check_view_debug,
    history_slices,
    message_state,
    parse_view_msg,
    view_files,
)

log = logging.getLogger("nbstream")


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

    #: the widget's own model id (its comm's id, chosen before the comm opens): a view
    #: finds its jupyter-widgets model with it, to read whether the model is connected
    #: to a kernel (``comm_live``; js/src/connection.ts)
    _model_ref = traitlets.Unicode("").tag(sync=True)
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

    @traitlets.validate("system_prompt")
    def _check_system_prompt(self, proposal: Any) -> str | None:
        return check_system_prompt(proposal["value"], type(self).__name__, attribute=True)

    #: debugging switches of the views (:class:`~nbstream.widgets.protocol.ViewDebug`):
    #: ``{"markdown": "full"}`` re-renders the whole answer each frame, ``{"acks":
    #: "every-frame"}`` acknowledges every frame, ``{"ack_gap_ms": 250}`` sets the least
    #: gap between rounds of acks, ``{"sized": "at-once"}`` lets blocks skip layout in
    #: the frame they were laid out, ``{"lazy": "off"}`` renders every message when it
    #: is shown (not the end first), ``{"frames": "per-view"}`` gives each view its own
    #: animation frames instead of the page's one loop: the previous ways, which the
    #: benchmarks measure side by side with the shipped ones. ``{}`` (as shipped) by
    #: default; checked when set; a view reads it when it renders (set it before the
    #: widget is shown).
    debug = traitlets.Dict().tag(sync=True)

    @traitlets.validate("debug")
    def _check_debug(self, proposal: Any) -> dict[str, Any]:
        return dict(check_view_debug(proposal["value"], f"{type(self).__name__}.debug"))

    #: what the view lets the user attach (:class:`~nbstream.widgets.protocol.AttachmentPolicy`;
    #: the kernel checks everything again); set by each widget from its source(s) and
    #: limits, ``{}`` for a widget with no input box
    attachment_policy = traitlets.Dict().tag(sync=True)

    def __init__(self, *, title: str = "", options: Options | None = None,
                 **traits: Any) -> None:
        # ``traits`` are set by the subclasses (mode, source_label...), never by users:
        # their constructors check user keyword arguments with parse_options()
        opts = options if options is not None else Options()
        warn_unsupported_frontend()  # e.g. a marimo too old to take the pump's sends
        model_id = uuid.uuid4().hex  # (ipywidgets and marimo open the comm with this id)
        super().__init__(title=title, model_id=model_id, _model_ref=model_id, **traits)
        self.options = opts
        self.include_reasoning_in_history = opts.include_reasoning_in_history
        self.limits = opts.limits
        self.max_pending = opts.max_pending
        #: what a message and the conversation may carry in attachments (#21)
        self.attachment_limits: AttachmentLimits = opts.attachment_limits
        #: the generation options each new reply takes a copy of (validated by the
        #: subclass that exposes them, e.g. ``ChatWidget.generation``)
        self._generation = GenerationOptions()
        self._history: History[Reply] = History()
        self._lock = self._history.lock
        self._ignored = ViewMessageFilter()
        # (note_bodies: the math and highlighting chunks the text sent needs, runtime.py)
        self._wire = WireEncoder(self._history,
                                 lambda msg, buffers: self._send(msg, buffers=buffers),
                                 note_bodies)
        #: tools (#20): what the model may call, how many rounds a turn may take, and the
        #: tools a person chose "Always allow" for (replaced whole, never mutated)
        self._tools: tuple[Tool, ...] = ()
        self._max_tool_rounds = DEFAULT_MAX_TOOL_ROUNDS
        self._allowed = AllowList()
        self._pump = get_pump()
        self._channel = self._pump.open_channel(self._wire.send_update, opts.interval)
        self._views = ViewRoster(_weak_call(self._no_view_left), presence.VIEW_GONE_GRACE,
                                 presence.PAGE_GONE_GRACE)
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
        # every branch's: a reply streams on when another branch shows
        live = [r for r in self._history.answers() if not r.done]
        return sum(1 for r in live if (id is None or r.id == id) and r.cancel())

    @property
    def replies(self) -> list[Reply]:
        """The replies shown, oldest first."""
        return [e for e in self._history.path() if isinstance(e, Reply)]

    @property
    def last(self) -> Reply | None:
        """The latest reply, if any."""
        replies = self.replies
        return replies[-1] if replies else None

    def clear(self) -> None:
        """Stop what runs and forget the history."""
        self.stop()
        self._history.clear()
        self._history_changed()

    # ------------------------------------------------------------- tools (#20)
    @property
    def tools(self) -> list[Tool]:
        """The tools the model may call (a copy). Set it to a list of functions,
        :class:`~nbstream.tools.Tool` objects or MCP servers; each is checked at once (a
        bad tool raises, naming the function and the parameter). It applies to the next
        question; a reply keeps the tools it was asked with."""
        return list(self._tools)

    @tools.setter
    def tools(self, value: Sequence[Any] | None) -> None:
        self._set_tools(value, type(self).__name__)

    def _set_tools(self, value: Sequence[Any] | None, where: str) -> None:
        tools = as_tools(value, where)
        if tools:
            for source in self._sources():
                source.check_tools([t.schema for t in tools])
        self._tools = tools

    def _sources(self) -> list[Source]:
        """The sources this widget asks (subclasses say)."""
        return []

    @property
    def max_tool_rounds(self) -> int:
        """How many rounds of tool calls one turn may run (default
        :data:`~nbstream.widgets.toolturn.DEFAULT_MAX_TOOL_ROUNDS`); a model that still
        calls tools after them ends its turn with ``finish_reason="max_tool_rounds"``."""
        return self._max_tool_rounds

    @max_tool_rounds.setter
    def max_tool_rounds(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"max_tool_rounds must be an int >= 0, got {value!r}")
        self._max_tool_rounds = value

    @property
    def pending_approvals(self) -> list[ToolCall]:
        """The tool calls waiting for a person's approval, oldest first."""
        return [c for _, c in self._live_calls() if c.state == "awaiting_approval"]

    def approve(self, call_id: str, always: bool = False) -> ToolCall:
        """Allow the tool call ``call_id`` (waiting for approval) to run; with
        ``always``, every later call of the same tool in this chat runs without asking
        (not offered for a tool that runs code). Returns the call."""
        return self._decide(call_id, "always" if always else "allow", "approve")

    def deny(self, call_id: str) -> ToolCall:
        """Deny the tool call ``call_id``: it does not run, and the model is told so."""
        return self._decide(call_id, "deny", "deny")

    def _decide(self, call_id: str, decision: Decision, what: str) -> ToolCall:
        if not isinstance(call_id, str):
            raise TypeError(f"{what}(call_id): the id of a tool call (a str; see "
                            f"chat.pending_approvals), got {type(call_id).__name__}")
        found = [(r, c) for r, c in self._live_calls() if c.id == call_id]
        waiting = [(r, c) for r, c in found if c.state == "awaiting_approval"]
        if not waiting:
            state = f"it is {found[0][1].state}" if found else "no live reply has it"
            raise ValueError(f"{what}({call_id!r}): that call is not waiting for approval "
                             f"({state})")
        if len(waiting) > 1:
            raise ValueError(f"{what}({call_id!r}): {len(waiting)} calls have that id; decide "
                             "in the view, or give the sources unique call ids")
        reply, call = waiting[0]
        turn = reply.turn
        if decision == "always" and not call.always_offered:
            raise ValueError(f"{what}({call_id!r}, always=True): {call.name} runs code, so each "
                             "call needs its own approval")
        if turn is None or not turn.decide(call, decision):
            raise ValueError(f"{what}({call_id!r}): that call was answered already")
        return call

    def _live_calls(self) -> list[tuple[Reply, ToolCall]]:
        # every branch's live replies: a reply's loop goes on when another branch shows
        replies = [r for r in self._history.answers() if not r.done]
        return [(r, c) for r in replies for c in r.tool_calls]

    def _on_tool_approval(self, msg: ToolApprovalMsg) -> None:
        """The view's Allow / Always allow / Deny (its shape checked by
        :func:`~nbstream.widgets.wire.parse_view_msg`). Not trusted: a stale or forged
        answer (an unknown message, a call of another message, one not waiting, answered
        already) is refused: :class:`BadViewMessage` says why, and the widget's filter
        counts it and logs each reason once (a hostile view cannot fill the log)."""
        reply = self._history.get(msg["id"])
        reason: str | None = None
        turn = reply.turn if isinstance(reply, Reply) else None
        if not isinstance(reply, Reply) or turn is None:
            reason = "no such reply"
        elif reply.done:
            reason = "the reply has ended"
        else:
            call = turn.find(msg["call"])
            if call is None:
                reason = "the call is not this reply's"
            elif call.decision is not None:
                reason = "the call was answered already"
            elif call.state != "awaiting_approval":
                reason = f"the call is {call.state}, not waiting for approval"
            elif msg["decision"] == "always" and not call.always_offered:
                reason = "'always' is not offered for this tool"
            elif not turn.decide(call, msg["decision"]):
                reason = "the call was answered already"
        if reason is not None:
            raise BadViewMessage(f"refused tool approval: {reason}")

    @property
    def conversation(self) -> list[MessageState]:
        """Every message shown, whole (text, reasoning, parts, status, stats): a copy."""
        return [message_state(e) for e in self._history.path()]

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        """The synced state; with no ``key``, every message's keys too (what a view
        created or reloaded later starts from)."""
        state: dict[str, Any] = super().get_state(key, drop_defaults)
        if key is None and hasattr(self, "_wire"):
            state.update(self._wire.snapshot())
        return state

    def send_state(self, key: Any = None) -> None:
        """Send the state (ipywidgets calls this when a view asks for it)."""
        super().send_state(key)
        if key is None and hasattr(self, "_wire"):
            # The snapshot was taken on this thread while the pump went on: a meta that
            # changed in between may have been sent before the snapshot and overwritten
            # by its older copy. The pump sends the current metas of the messages that
            # were live in the snapshot again, after it (a view ignores what is unchanged).
            live = self._wire.live_in_snapshot()
            if live:
                self._pump.publish(self._channel, live)

    def close(self) -> None:
        """Stop live replies and close the widget's comm."""
        if hasattr(self, "_channel"):  # also called by __del__ of a half-built widget
            self._views.close()
            self.stop()
            self._pump.close_channel(self._channel)
        super().close()

    # -------------------------------------------------------------- internals
    def _new_turn(self, text: str, parent: str | Literal["current"] | None = "current",
                  attached: tuple[Attached, ...] = ()) -> UserTurn:
        # caller holds _lock; ``parent``: the message it follows (default: the last shown)
        self._history_changed()  # a Clear may have removed entries
        if parent == "current":
            parent = self._history.current
        turn = UserTurn(self._history.new_id(), text, parent, attached)
        self._history.add(turn, parent)
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
        stream = Stream(self._history.new_id(), max_pending=self.max_pending,
                        clock=self._pump.clock, limits=self.limits)
        reply: Reply
        if messages is None:
            # the system prompt in force when it was asked, the history when it starts
            system = self.system_prompt
            messages = lambda: self._history.conversation_before(  # noqa: E731
                reply, system, self.include_reasoning_in_history)
        tools, rounds, allowed = self._tools, self._max_tool_rounds, self._allowed

        def loop(r: Reply) -> ToolTurn:  # the agent loop of a reply that may call tools
            return ToolTurn(stream, tools, rounds, allowed, resubmit=lambda: next_round(r),
                            clock=self._pump.clock)

        reply = Reply(stream, source, messages, prompt=prompt,
                      on_interrupt=_weak_call(self.stop), generation=self._generation,
                      turn=loop if tools or source.supports_tools else None)
        reply.pane = pane
        reply.parent = self._history.current if parent == "current" else parent
        self._history.add(reply, reply.parent)
        return reply

    def _restore(self, messages: Sequence[StoredMessage], source: Source,
                 current: str | None = None) -> list[Entry]:
        """Add ``messages`` (loaded from a file, or given as history: each parent
        before its children) as finished messages, after what is shown, and show the
        branch through ``current`` (their id; None: the last one). They go to the
        views like any finished reply (their metas and deltas), a slice of about
        48 KB an update, newest first (:func:`~nbstream.widgets.wire.history_slices`).
        Returns the new entries."""
        added: list[Entry] = []
        history = self._history
        # previews are made here, on the caller's thread, not under the lock
        prepared = {m.id: self._prepare_attachments(m.attachments)
                    for m in messages if m.attachments}
        with self._lock:
            base = history.current
            new_id: dict[str, str] = {}
            for m in messages:
                entry: Entry
                parent = base if m.parent is None else new_id[m.parent]
                if m.role == "user":
                    entry = UserTurn(history.new_id(), m.content, parent,
                                     prepared.get(m.id, ()))
                else:
                    above = history.get(parent)
                    runs, calls = restored_rounds(m.rounds) if m.rounds else (None, [])
                    stream = Stream.from_parts(
                        history.new_id(), text=m.content, reasoning=m.reasoning,
                        status=m.status, finish_reason=m.finish_reason, error=m.error,
                        clock=self._pump.clock, runs=runs)
                    entry = Reply(stream, source, (),
                                  prompt=above.text if isinstance(above, UserTurn) else "",
                                  on_interrupt=_weak_call(self.stop), tool_calls=calls)
                    entry.parent = parent
                new_id[m.id] = entry.id
                history.add(entry, parent)
                added.append(entry)
            if messages:
                history.show(new_id[current] if current is not None else added[-1].id)
        # a slice of ~48 KB an update, newest first (a view shows the end at once, the
        # older messages arrive above it, and no message grows with the history); a
        # reply's deltas go with its meta, as a resync from seq 0 does
        self._pump.send_history(self._channel, history_slices(added))
        return added

    def _history_changed(self) -> None:
        """Entries left the history (Clear, Regenerate): tell the view (any thread)."""
        gone = self._history.forget_removed()
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

    def _ask(self, text: str, attachments: tuple[Attachment, ...] = ()) -> None:
        """The view's Send: widgets with an input box ask their source(s) ``text``
        with ``attachments`` (converted, not yet checked against the source or the
        limits; raise an ``AttachmentError`` to refuse them: the view is told why)."""

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
        """``attachments`` converted, checked and previewed (see
        :func:`~nbstream.widgets.attachments.attached_for`)."""
        return attached_for(attachments, sources, self.attachment_limits, where)

    def _prepare_attachments(self, attachments: tuple[Attachment, ...]) -> tuple[Attached, ...]:
        """Previews of ``attachments`` (the caller's thread: decodes images)."""
        return prepare(attachments, self.attachment_limits) if attachments else ()

    def _check_chat_bytes(self, attachments: tuple[Attachment, ...], where: str) -> None:
        # caller holds _lock: the conversation's attachments with these stay in bounds
        held = (a for e in self._history.entries() if isinstance(e, UserTurn)
                for a in e.attachments)
        check_chat(held, attachments, self.attachment_limits, where)

    def _on_send(self, msg: SendMsg, files: Sequence[ViewFile]) -> None:
        """The view's Send, checked against its type, with the files its buffers
        carried. A refusal the user should hear (an attachment the source cannot
        take, a limit) goes back to the view, which gives the draft back."""
        if not msg["text"].strip():
            raise BadViewMessage("send of a blank text")
        try:
            self._ask(msg["text"], parse_upload(files, self.attachment_limits))
        except AttachmentError as exc:
            self._refuse(msg, str(exc))

    def _refuse(self, msg: SendMsg, reason: str) -> None:
        """Tell the view its Send was refused (a :class:`RefusedMsg`)."""
        draft = msg.get("draft")
        if draft is not None:
            refused = RefusedMsg(kind="refused", draft=draft, reason=reason)
            # a custom message (ipywidgets' Widget.send; ChatWidget.send is the question's)
            self._send({"method": "custom", "content": refused})

    def _on_command(self, msg: ViewMsg) -> bool:
        """Handle a user command from the view (checked against its type); True if
        handled (subclasses extend). A Send goes to :meth:`_on_send` instead.

        Raise :class:`~nbstream.widgets.wire.BadViewMessage` for a command that names
        what this widget does not have, or whose text is blank.
        """
        if msg["kind"] == "stop":
            rid = msg.get("id")
            if rid is None:
                self.stop()
            elif not self._knows(rid):
                raise BadViewMessage("stop for an unknown id")
            else:
                self.stop(rid)
            return True
        if msg["kind"] == "clear":
            self.clear()
            return True
        if msg["kind"] == "tool_approval":
            self._on_tool_approval(msg)
            return True
        return False

    def _no_view_left(self) -> None:
        """The last view left the page and none came back (presence.py's timer thread):
        stop what runs, as Stop would, so that a server does not generate for nobody."""
        stopped = self.stop()
        if stopped:
            log.info("nbstream: %s: its last view was removed; stopped %d running repl%s",
                     type(self).__name__, stopped, "y" if stopped == 1 else "ies")

    def _knows(self, rid: str) -> bool:
        return any(r.id == rid for r in self._history.answers())

    def _on_view_msg(self, _widget: Any, content: Any, buffers: Sequence[Any]) -> None:
        # main thread or a subshell thread: enqueue or flag, never block. The view is
        # not trusted: a message that does not fit its type is ignored (wire.py)
        try:
            msg = parse_view_msg(content, buffers)
            if msg["kind"] == "send":
                self._on_send(msg, view_files(msg, buffers))
            elif msg["kind"] == "hello":
                if "view" in msg:  # (views of older versions send none)
                    self._views.hello(msg["view"])
                self._pump.hello(self._channel)
            elif msg["kind"] == "bye":
                self._views.bye(msg["view"], page=msg.get("leaving") == "page")
            elif msg["kind"] == "resync":
                self._pump.resync(self._channel, msg["id"], msg.get("have", 0))
            elif msg["kind"] == "acks":  # a round of acks, in order: one round for the figures
                self._pump.acks(self._channel, [(e["id"], e["seq"]) for e in msg["acks"]],
                                float(msg.get("render_ms", 0.0)))
            elif msg["kind"] == "ack":  # (views of earlier versions: one per message)
                self._pump.ack(self._channel, msg["id"], msg["seq"],
                               float(msg.get("render_ms", 0.0)))
            elif not self._on_command(msg):
                raise BadViewMessage(f"{msg['kind']}: not a command of {type(self).__name__}")
        except BadViewMessage as bad:
            self._ignored.note(str(bad), content)
        except Exception:
            log.exception("nbstream: handling a view message failed")


def _weak_call(method: Callable[[], object]) -> Callable[[], object]:
    """``method`` (a bound method) without keeping its object alive."""
    ref = weakref.WeakMethod(method)

    def call() -> object:
        m = ref()
        return None if m is None else m()

    return call


