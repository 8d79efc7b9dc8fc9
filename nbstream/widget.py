"""ChatWidget: the anywidget class. Synced state, user commands, view messages.

Who owns what:

* ``_history`` (the conversation: user turns and :class:`Reply` objects) is
  guarded by ``_lock``; the thread that calls :meth:`ChatWidget.send` (the
  main thread, or the comm thread for the view's Send) appends to it.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .lanes import lane_for
from .protocol import FINAL_STATUSES, MessageState
from .pump import DEFAULT_INTERVAL, get_pump
from .reply import Reply, run_reply
from .sources.base import ChatMessage, Source
from .stream import Delta, Limits, Stream

log = logging.getLogger("nbstream")

_STATIC = Path(__file__).parent / "static"
_MISSING_BUNDLE = """
export default { render({ el }) {
  el.textContent = "nbstream: the front end is not built (run `make setup`, or `npm run build` in js/).";
} };
"""


def _bundle(name: str, fallback: str) -> Path | str:
    path = _STATIC / name
    return path if path.exists() else fallback


class _UserTurn:
    __slots__ = ("id", "text")

    def __init__(self, id: str, text: str) -> None:
        self.id = id
        self.text = text

    def state(self) -> MessageState:
        return MessageState(id=self.id, role="user", text=self.text, seq=0, status="done",
                            error=None, detail=None, stats={})


def _reply_state(reply: Reply) -> MessageState:
    text, seq, status, error, detail = reply._stream.state()
    stats = reply.stats if status in FINAL_STATUSES else {}
    return MessageState(id=reply.id, role="assistant", text=text, seq=seq, status=status,
                        error=error, detail=detail, stats=stats)


class ChatWidget(anywidget.AnyWidget):  # type: ignore[misc]
    """A chat that streams a source's answers into the notebook.

    ``ChatWidget()`` uses the embedded default model (SmolLM2-135M-Instruct,
    loaded on the first question). ``ChatWidget(source)`` uses any
    :class:`~nbstream.sources.Source`. Generation runs on a worker thread;
    the cell returns at once and the kernel stays free.
    """

    _esm = _bundle("widget.js", _MISSING_BUNDLE)
    _css = _bundle("widget.css", "")

    #: the conversation as the view sees it (written by the pump thread only)
    conversation = traitlets.List(traitlets.Dict()).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    placeholder = traitlets.Unicode("Ask something… (Enter sends, Shift+Enter: new line)").tag(
        sync=True)
    source_label = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        source: Source | None = None,
        *,
        title: str = "",
        system_prompt: str | None = None,
        interval: float = DEFAULT_INTERVAL,
        first_token_timeout: float | None = None,
        stall_timeout: float | None = None,
        total_timeout: float | None = None,
        max_pending: int = 1 << 20,
        **kwargs: Any,
    ) -> None:
        if source is None:  # the embedded default model, loaded on the first question
            from .sources.transformers import TransformersSource

            source = TransformersSource()
        if not isinstance(source, Source):
            raise TypeError(f"expected a nbstream Source, got {type(source).__name__}; "
                            "wrap a function in IteratorSource")
        if interval <= 0:
            raise ValueError("interval must be positive (seconds)")
        super().__init__(title=title, source_label=source.label, **kwargs)
        self.source = source
        self.system_prompt = system_prompt
        self.limits = Limits(first_token_timeout, stall_timeout, total_timeout)
        self.max_pending = max_pending
        self._lock = threading.RLock()
        self._history: list[_UserTurn | Reply] = []
        self._ids = itertools.count(1)
        self._pump = get_pump()
        self._channel = self._pump.open_channel(self._send_delta, self._publish, interval)
        self.on_msg(self._on_view_msg)

    # ------------------------------------------------------------- public API
    def send(self, text: str) -> Reply:  # type: ignore[override]
        """Ask ``text``; returns a :class:`Reply` at once (generation runs on a worker)."""
        if not isinstance(text, str):
            raise TypeError(f"send() takes a str, got {type(text).__name__}")
        if not text.strip():
            raise ValueError("send() needs a non-empty prompt")
        with self._lock:
            turn = _UserTurn(f"m{next(self._ids)}", text)
            self._history.append(turn)
            stream = Stream(f"m{next(self._ids)}", max_pending=self.max_pending,
                            clock=self._pump.clock, limits=self.limits)
            reply = Reply(stream, self.source, lambda: self._conversation_before(reply),
                          prompt=text)
            self._history.append(reply)
        self._pump.add_stream(self._channel, stream)
        lane_for(self.source.lane_key(), self.source.concurrency).submit(
            lambda: run_reply(reply))
        return reply

    def stop(self, id: str | None = None) -> int:
        """Stop the live replies of this chat (or only reply ``id``); returns how many."""
        with self._lock:
            live = [e for e in self._history if isinstance(e, Reply) and not e.done]
        return sum(1 for r in live if (id is None or r.id == id) and r.cancel())

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation: ``[{"role", "content", "id", "status"}, ...]`` (a copy)."""
        with self._lock:
            entries = list(self._history)
        out: list[dict[str, Any]] = []
        for e in entries:
            if isinstance(e, _UserTurn):
                out.append({"role": "user", "content": e.text, "id": e.id, "status": "done"})
            else:
                out.append({"role": "assistant", "content": e.text, "id": e.id,
                            "status": e.status})
        return out

    @property
    def replies(self) -> list[Reply]:
        """The replies of this chat, oldest first."""
        with self._lock:
            return [e for e in self._history if isinstance(e, Reply)]

    @property
    def last(self) -> Reply | None:
        """The latest reply, if any."""
        replies = self.replies
        return replies[-1] if replies else None

    def regenerate(self) -> Reply | None:
        """Stop and drop the last answer, then ask its prompt again."""
        with self._lock:
            idx = next((i for i in range(len(self._history) - 1, -1, -1)
                        if isinstance(self._history[i], Reply)), None)
            if idx is None:
                return None
            last = self._history[idx]
            assert isinstance(last, Reply)
            last.cancel()
            del self._history[idx]
            if idx > 0 and isinstance(self._history[idx - 1], _UserTurn):
                del self._history[idx - 1]
        return self.send(last.prompt)

    def clear(self) -> None:
        """Stop what runs and forget the conversation."""
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

    def __repr__(self) -> str:
        with self._lock:
            n = len(self._history)
        return f"{type(self).__name__}(source={self.source!r}, messages={n})"

    # -------------------------------------------------------------- internals
    def _conversation_before(self, reply: Reply) -> list[ChatMessage]:
        """What the source sees: earlier turns (with text) up to ``reply``'s prompt."""
        msgs: list[ChatMessage] = []
        if self.system_prompt:
            msgs.append({"role": "system", "content": self.system_prompt})
        with self._lock:
            entries = list(self._history)
        for e in entries:
            if e is reply:
                break
            if isinstance(e, _UserTurn):
                msgs.append({"role": "user", "content": e.text})
            elif e.text:
                msgs.append({"role": "assistant", "content": e.text})
        return msgs

    def _publish(self) -> None:
        # pump thread only
        with self._lock:
            entries = list(self._history)
        state: list[MessageState] = [
            e.state() if isinstance(e, _UserTurn) else _reply_state(e) for e in entries]
        if state != self.conversation:
            self.conversation = state
        else:  # a view asked to be brought up to date
            self.send_state("conversation")

    def _send_delta(self, d: Delta) -> None:
        # pump thread only
        self._send({"method": "custom",
                    "content": {"kind": "delta", "id": d.id, "seq": d.seq, "text": d.text}})

    def _on_view_msg(self, _widget: Any, content: Any, _buffers: Sequence[Any]) -> None:
        # main thread or a subshell thread: enqueue or flag, never block
        try:
            kind = content.get("kind") if isinstance(content, dict) else None
            if kind == "send":
                text = content.get("text")
                if isinstance(text, str) and text.strip():
                    self.send(text)
            elif kind == "stop":
                rid = content.get("id")
                self.stop(rid if isinstance(rid, str) else None)
            elif kind == "regenerate":
                self.regenerate()
            elif kind == "clear":
                self.clear()
            elif kind in ("hello", "resync"):
                self._pump.request_publish(self._channel)
            elif kind == "ack":
                rid, seq, ms = content.get("id"), content.get("seq"), content.get("render_ms", 0.0)
                if isinstance(rid, str) and isinstance(seq, int) and isinstance(ms, (int, float)):
                    self._pump.ack(self._channel, rid, seq, float(ms))
            else:
                log.debug("nbstream: ignored view message %r", content)
        except Exception:
            log.exception("nbstream: handling a view message failed")
