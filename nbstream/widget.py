"""The pipeline's widget end: synced state, deltas, and view messages.

:class:`StreamingWidget` is the one anywidget class every nbstream widget is
built on (``ChatWidget``, ``StreamView``, ``Compare``): each only decides
which replies to start and how the view lays them out (``mode``), so there is
one copy of the pipeline.

Who owns what:

* ``_history`` (user turns and :class:`Reply` objects) is guarded by
  ``_lock``; the thread that starts a reply (the main thread, or the comm
  thread for the view's Send) appends to it.
* Each reply's text and status are owned by its stream (see ``stream.py``).
* The synced trait ``conversation`` and every message to the view are written
  by the pump thread only (``_publish`` / ``_send_delta``), so the browser
  receives them in order.
* View messages (:meth:`_on_view_msg`) arrive on the kernel's main thread, or
  a subshell thread; the handler only enqueues or flags and never blocks.
"""

from __future__ import annotations

import itertools
import logging
import reprlib
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from . import lanes
from .options import Options
from .protocol import FINAL_STATUSES, MessageState
from .pump import get_pump
from .reply import Reply, run_reply
from .sources.base import ChatMessage, Source
from .stream import Delta, Stream

log = logging.getLogger("nbstream")

_STATIC = Path(__file__).parent / "static"
_MISSING_BUNDLE = """
export default { render({ el }) {
  el.textContent =
    "nbstream: the front end is not built (run `make setup`, or `npm run build` in js/).";
} };
"""


def _bundle(name: str, fallback: str) -> str:
    # the text, not the Path: anywidget connects every instance of a class whose _esm
    # is a file to that file's change signal (hot reload), keeping each widget alive
    # for ever; a str keeps closed widgets collectable
    path = _STATIC / name
    return path.read_text(encoding="utf-8") if path.exists() else fallback


class UserTurn:
    """A prompt in the history (immutable)."""

    __slots__ = ("id", "text")

    def __init__(self, id: str, text: str) -> None:
        self.id = id
        self.text = text

    def state(self) -> MessageState:
        return MessageState(id=self.id, role="user", text=self.text, seq=0, status="done",
                            error=None, detail=None, stats={})


def reply_state(reply: Reply) -> MessageState:
    """A reply as the view sees it; text and seq are one consistent snapshot."""
    text, seq, status, error, detail = reply._stream.state()
    stats = reply.stats if status in FINAL_STATUSES else {}
    state = MessageState(id=reply.id, role="assistant", text=text, seq=seq, status=status,
                         error=error, detail=detail, stats=stats)
    if reply.pane is not None:
        state["pane"] = reply.pane
    return state


Entry = UserTurn | Reply


class StreamingWidget(anywidget.AnyWidget):
    """Base of every nbstream widget: one channel on the pump, one history.

    Subclasses start replies with :meth:`_start` and may handle more view
    commands in :meth:`_on_command`.
    """

    _esm = _bundle("widget.js", _MISSING_BUNDLE)
    _css = _bundle("widget.css", "")

    #: the messages as the view sees them (written by the pump thread only)
    conversation = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: how the view lays messages out: "chat", "stream" or "compare"
    mode = traitlets.Unicode("chat").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    source_label = traitlets.Unicode("").tag(sync=True)

    def __init__(self, *, title: str = "", options: Options | None = None,
                 **traits: Any) -> None:
        # ``traits`` are set by the subclasses (mode, source_label...), never by users:
        # their constructors check user keyword arguments with parse_options()
        opts = options if options is not None else Options()
        super().__init__(title=title, **traits)
        self.options = opts
        self.limits = opts.limits
        self.max_pending = opts.max_pending
        self.system_prompt: str | None = None
        self._lock = threading.RLock()
        self._history: list[Entry] = []
        self._ids = itertools.count(1)
        self._ignored = ViewMessageFilter()
        self._pump = get_pump()
        self._channel = self._pump.open_channel(self._send_delta, self._publish, opts.interval)
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
        with self._lock:
            live = [e for e in self._history if isinstance(e, Reply) and not e.done]
        return sum(1 for r in live if (id is None or r.id == id) and r.cancel())

    @property
    def replies(self) -> list[Reply]:
        """The replies, oldest first."""
        with self._lock:
            return [e for e in self._history if isinstance(e, Reply)]

    @property
    def last(self) -> Reply | None:
        """The latest reply, if any."""
        replies = self.replies
        return replies[-1] if replies else None

    def clear(self) -> None:
        """Stop what runs and forget the history."""
        self.stop()
        with self._lock:
            self._history.clear()
        self._pump.request_publish(self._channel)

    def close(self) -> None:
        """Stop live replies and close the widget's comm."""
        if hasattr(self, "_channel"):  # also called by __del__ of a half-built widget
            self.stop()
            self._pump.close_channel(self._channel)
        super().close()

    # -------------------------------------------------------------- internals
    def _new_turn(self, text: str) -> UserTurn:
        # caller holds _lock
        turn = UserTurn(f"m{next(self._ids)}", text)
        self._history.append(turn)
        return turn

    def _new_reply(self, source: Source, prompt: str,
                   messages: Callable[[], Sequence[ChatMessage]] | Sequence[ChatMessage],
                   pane: int | None = None) -> Reply:
        # caller holds _lock; the reply runs once _launch() is called
        stream = Stream(f"m{next(self._ids)}", max_pending=self.max_pending,
                        clock=self._pump.clock, limits=self.limits)
        reply = Reply(stream, source, messages, prompt=prompt,
                      on_interrupt=_weak_call(self.stop))
        reply.pane = pane
        self._history.append(reply)
        return reply

    def _launch(self, reply: Reply) -> None:
        """Hand ``reply`` to the pump (to send) and its model's lane (to run)."""
        self._pump.add_stream(self._channel, reply._stream)
        source = reply.source
        lanes.submit(source.lane_key(), source.concurrency, lambda: run_reply(reply))

    def _conversation_before(self, reply: Reply) -> list[ChatMessage]:
        """What ``reply``'s source sees: the system prompt, then each earlier prompt
        with its answer as shown beside ``reply`` (its pane, in a Compare), then
        ``reply``'s own prompt.

        Turns alternate user / assistant, as chat templates require: a prompt
        whose answer has no text (stopped before its first piece, failed or
        timed out at once) is left out together with that empty answer. The
        widget still shows both; only the model does not see them.
        """
        msgs: list[ChatMessage] = []
        if self.system_prompt:
            msgs.append({"role": "system", "content": self.system_prompt})
        with self._lock:
            entries = list(self._history)
        unanswered: str | None = None  # the latest prompt, until its answer comes
        for e in entries:
            if e is reply:
                break
            if isinstance(e, UserTurn):
                unanswered = e.text  # an earlier prompt left unanswered is dropped
            elif e.pane == reply.pane and unanswered is not None:
                text = e.text
                if text:
                    msgs.append({"role": "user", "content": unanswered})
                    msgs.append({"role": "assistant", "content": text})
                    unanswered = None
        if unanswered is not None:
            msgs.append({"role": "user", "content": unanswered})
        return msgs

    def _publish(self) -> None:
        # pump thread only
        with self._lock:
            entries = list(self._history)
        state: list[Any] = [
            e.state() if isinstance(e, UserTurn) else reply_state(e) for e in entries]
        if state != self.conversation:
            self.conversation = state
        else:  # a view asked to be brought up to date
            self.send_state("conversation")

    def _send_delta(self, d: Delta) -> None:
        # pump thread only
        self._send({"method": "custom",
                    "content": {"kind": "delta", "id": d.id, "seq": d.seq, "text": d.text}})

    def _ask(self, text: str) -> None:
        """The view's Send: widgets with an input box ask their source(s) ``text``."""

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
            self._ask(text)
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
            return any(isinstance(e, Reply) and e.id == rid for e in self._history)

    def _on_view_msg(self, _widget: Any, content: Any, _buffers: Sequence[Any]) -> None:
        # main thread or a subshell thread: enqueue or flag, never block. The view is
        # not trusted: a message of the wrong shape is ignored (logged once per reason)
        try:
            if not isinstance(content, dict):
                raise BadViewMessage("content is not a dict")
            kind = content.get("kind")
            if kind in ("hello", "resync"):
                self._pump.request_publish(self._channel)
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
