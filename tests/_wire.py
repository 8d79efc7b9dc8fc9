"""What a widget sends to its views, captured at the comm boundary and read back
the way a view does (per-message state keys; see nbstream/widgets/protocol.py)."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

import ipywidgets

from nbstream.widgets.widget import StreamingWidget

_DELTA = re.compile(r"^(m\d+)\.(\d+)$")


def body_parts(body: Any) -> tuple[str, str]:
    """(answer, reasoning) of a delta key's value."""
    if isinstance(body, str):
        return body, ""
    answer = "".join(run[1] for run in body if run[0] == "answer")
    reasoning = "".join(run[1] for run in body if run[0] == "reasoning")
    return answer, reasoning


def conversation_of(model: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages a view reads from a model's keys: m1..m<last_id>, each with the
    text and reasoning of its deltas 1..seq that are present (in order)."""
    out = []
    for n in range(1, int(model.get("last_id", 0)) + 1):
        mid = f"m{n}"
        meta = model.get(mid)
        if not isinstance(meta, dict):
            continue
        e = {"id": mid, **meta}
        text, reasoning, seq = meta.get("text", ""), "", 0
        while isinstance(model.get(f"{mid}.{seq + 1}"), (str, list)):
            seq += 1
            a, r = body_parts(model[f"{mid}.{seq}"])
            text, reasoning = text + a, reasoning + r
        e.update(text=text, reasoning=reasoning, have=seq)
        e.setdefault("error", None)
        e.setdefault("detail", None)
        out.append(e)
    return out


def delta_keys(msg: dict[str, Any]) -> list[tuple[str, int, Any]]:
    """(id, seq, body) of the delta keys an update message carries (not removals)."""
    if msg.get("method") != "update":
        return []
    out = []
    for k, v in msg.get("state", {}).items():
        m = _DELTA.match(k)
        if m and v is not None:
            out.append((m.group(1), int(m.group(2)), v))
    return out


def meta_ids(msg: dict[str, Any]) -> list[str]:
    """The ids of the metas an update message carries."""
    if msg.get("method") != "update":
        return []
    return [k for k in msg.get("state", {}) if re.fullmatch(r"m\d+", k)]


class Wire:
    """Everything a widget sends to the view, in order, and the model it builds."""

    def __init__(self, w: StreamingWidget) -> None:
        self.msgs: list[dict[str, Any]] = []
        #: the binary buffers of each message (attachment previews), in order
        self.buffers: list[list[bytes]] = []
        self.lock = threading.Lock()
        #: the front-end model, as ipywidgets merges update messages (key by key)
        self.model: dict[str, Any] = {}
        #: the conversation a view shows after each update that carried a meta
        self._states: list[list[dict[str, Any]]] = []
        w._send = self._capture  # type: ignore[method-assign]

    def _capture(self, msg: dict[str, Any], buffers: Any = None) -> None:
        with self.lock:
            self.msgs.append(msg)
            self.buffers.append([bytes(b) for b in buffers or ()])
            if msg.get("method") == "update":
                self.model.update(msg["state"])
                # binary keys, put back where their paths say (as ipywidgets' front end does)
                for path, buf in zip(msg.get("buffer_paths") or [], buffers or []):
                    if len(path) == 1:
                        self.model[path[0]] = bytes(buf)
                if meta_ids(msg):
                    self._states.append(conversation_of(self.model))

    def deltas(self, mid: str | None = None) -> list[dict[str, Any]]:
        """The deltas sent, in order, as {id, seq, text, reasoning}."""
        with self.lock:
            msgs = list(self.msgs)
        out = []
        for m in msgs:
            for i, seq, body in delta_keys(m):
                if mid is None or i == mid:
                    a, r = body_parts(body)
                    out.append({"id": i, "seq": seq, "text": a, "reasoning": r})
        return out

    def states(self) -> list[list[dict[str, Any]]]:
        """The conversation a view shows after each update that carried a meta."""
        with self.lock:
            return list(self._states)

    def shown(self) -> list[dict[str, Any]]:
        """The conversation a view shows now."""
        with self.lock:
            return conversation_of(self.model)

    def bytes(self) -> int:
        import json

        with self.lock:
            return sum(len(json.dumps(m, ensure_ascii=False).encode()) for m in self.msgs)


def view_text(wire: Wire, mid: str) -> str:
    """What a view shows of message ``mid``'s answer now."""
    for e in wire.shown():
        if e["id"] == mid:
            return str(e["text"])
    return ""


def send_from_view(widget: ipywidgets.Widget, content: Any,
                   buffers: Sequence[bytes] = ()) -> None:
    """Send ``content`` as a view does (``model.send(content, callbacks, buffers)`` in
    the browser) to ``widget`` (a nbstream widget, or the kernel's runtime widget): a
    ``comm_msg`` whose data is ipywidgets' ``custom`` method, with ``buffers`` as the
    message's binary buffers (memoryviews, as a kernel's session hands them on),
    handed to the widget's comm, so that the dispatch a kernel runs (the comm's
    callback, ipywidgets' ``_handle_msg`` and ``_handle_custom_msg``, the widget's
    ``on_msg`` handlers) runs here too. Returns once the handlers returned."""
    comm = widget.comm
    assert comm is not None, "the widget is closed"
    comm.handle_msg({
        "header": {"msg_type": "comm_msg"},
        "parent_header": {},
        "metadata": {},
        "content": {"comm_id": comm.comm_id, "data": {"method": "custom", "content": content}},
        "buffers": [memoryview(b) for b in buffers],
    })
