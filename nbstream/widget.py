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
import threading
from collections.abc import Callable, Sequence
from typing import Any

import anywidget
import traitlets

from .lanes import lane_for
from .protocol import FINAL_STATUSES, MessageState
from .pump import DEFAULT_INTERVAL, get_pump
from .reply import Reply, run_reply
from .runtime import widget_css, widget_esm, widget_runtime_ref
from .sources.base import ChatMessage, Source
from .stream import Delta, Limits, Stream

log = logging.getLogger("nbstream")


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

    # A small loader; the bundle and the CSS travel once per kernel in the shared
    # runtime widget that ``_runtime`` names (runtime.py), not in every widget's state.
    _esm = widget_esm()
    _css = widget_css()
    _runtime = traitlets.Unicode("").tag(sync=True)

    @traitlets.default("_runtime")
    def _default_runtime(self) -> str:
        return widget_runtime_ref()

    #: the messages as the view sees them (written by the pump thread only)
    conversation = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: how the view lays messages out: "chat", "stream" or "compare"
    mode = traitlets.Unicode("chat").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    source_label = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        *,
        title: str = "",
        interval: float = DEFAULT_INTERVAL,
        first_token_timeout: float | None = None,
        stall_timeout: float | None = None,
        total_timeout: float | None = None,
        max_pending: int = 1 << 20,
        **kwargs: Any,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive (seconds)")
        super().__init__(title=title, **kwargs)
        self.limits = Limits(first_token_timeout, stall_timeout, total_timeout)
        self.max_pending = max_pending
        self.system_prompt: str | None = None
        self._lock = threading.RLock()
        self._history: list[Entry] = []
        self._ids = itertools.count(1)
        self._pump = get_pump()
        self._channel = self._pump.open_channel(self._send_delta, self._publish, interval)
        self.on_msg(self._on_view_msg)

    # ------------------------------------------------------------- public API
    def stop(self, id: str | None = None) -> int:
        """Stop the live replies (or only reply ``id``); returns how many were stopped."""
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
        reply = Reply(stream, source, messages, prompt=prompt)
        reply.pane = pane
        self._history.append(reply)
        return reply

    def _launch(self, reply: Reply) -> None:
        """Hand ``reply`` to the pump (to send) and its model's lane (to run)."""
        self._pump.add_stream(self._channel, reply._stream)
        source = reply.source
        lane_for(source.lane_key(), source.concurrency).submit(lambda: run_reply(reply))

    def _conversation_before(self, reply: Reply) -> list[ChatMessage]:
        """What ``reply``'s source sees: the system prompt, every earlier prompt with the
        earlier answers shown beside ``reply`` (its pane, in a Compare), up to its prompt."""
        msgs: list[ChatMessage] = []
        if self.system_prompt:
            msgs.append({"role": "system", "content": self.system_prompt})
        with self._lock:
            entries = list(self._history)
        for e in entries:
            if e is reply:
                break
            if isinstance(e, UserTurn):
                msgs.append({"role": "user", "content": e.text})
            elif e.pane == reply.pane and e.text:
                msgs.append({"role": "assistant", "content": e.text})
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
        """Handle a user command from the view; True if handled (subclasses extend)."""
        if kind == "send":
            text = content.get("text")
            if isinstance(text, str) and text.strip():
                self._ask(text)
            return True
        if kind == "stop":
            rid = content.get("id")
            self.stop(rid if isinstance(rid, str) else None)
            return True
        if kind == "clear":
            self.clear()
            return True
        return False

    def _on_view_msg(self, _widget: Any, content: Any, _buffers: Sequence[Any]) -> None:
        # main thread or a subshell thread: enqueue or flag, never block
        try:
            kind = content.get("kind") if isinstance(content, dict) else None
            if kind in ("hello", "resync"):
                self._pump.request_publish(self._channel)
            elif kind == "ack":
                rid, seq, ms = content.get("id"), content.get("seq"), content.get("render_ms", 0.0)
                if isinstance(rid, str) and isinstance(seq, int) and isinstance(ms, (int, float)):
                    self._pump.ack(self._channel, rid, seq, float(ms))
            elif not (isinstance(kind, str) and self._on_command(kind, content)):
                log.debug("nbstream: ignored view message %r", content)
        except Exception:
            log.exception("nbstream: handling a view message failed")


