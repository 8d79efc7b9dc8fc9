"""The kernel end of the wire: what views send, checked against the protocol.

A view is not trusted (a stale bundle, a bug, or a hostile page can send
anything). :func:`parse_view_msg` checks each custom message against the type
``protocol.py`` declares for its ``kind`` (:data:`~nbstream.widgets.protocol.ViewMsg`:
its fields, their types, the ``MAX_*`` bounds) before any handler sees it, so
the handlers work on typed messages and only check what the types cannot say
(an id the widget knows, a text that is not blank). A message that fails is
ignored, counted and logged by the widget's :class:`ViewMessageFilter`.

Pure functions and one small lock-guarded class: any thread may use this module
(view messages are handled on the kernel's main thread, or a subshell's).
"""

from __future__ import annotations

import logging
import reprlib
import threading
import typing
from typing import Any

import msgspec

from .protocol import ViewMsg

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


def parse_view_msg(content: object) -> ViewMsg:
    """``content`` as the :data:`ViewMsg` its ``kind`` declares (fields of other
    names are dropped); raises :class:`BadViewMessage` saying what does not fit.

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
    return msg


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
