"""Checks of the arguments users pass to the widgets: clear errors in the caller's cell.

Each check raises :class:`TypeError` (wrong type) or :class:`ValueError`
(wrong value) with a message naming the function and the argument, and
returns the value when it is fine. The widget options (``interval``, time
limits, ``max_pending``) are checked in :mod:`nbstream.options`. Pure
functions: any thread.
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence

from .core.pieces import ChatMessage

__all__ = ["check_messages", "check_prompt", "check_system_prompt", "check_title", "short"]


def short(value: object) -> str:
    """A repr of ``value`` short enough for an error message."""
    return reprlib.repr(value)


def check_prompt(text: object, where: str = "send") -> str:
    """``text`` if it is a usable prompt (a non-blank str)."""
    if isinstance(text, (bytes, bytearray)):
        raise TypeError(f"{where}(text) takes a str, got {type(text).__name__}; "
                        "decode it first (text.decode())")
    if not isinstance(text, str):
        raise TypeError(f"{where}(text) takes the prompt as a str, got "
                        f"{type(text).__name__} {short(text)}")
    if not text.strip():
        raise ValueError(f"{where}(text) needs a non-empty prompt, got {text!r}")
    return text


def check_system_prompt(system_prompt: object, where: str, *,
                        attribute: bool = False) -> str | None:
    """``system_prompt`` if it is None or a str (``attribute``: the error names
    ``where.system_prompt`` rather than the constructor's argument)."""
    if system_prompt is not None and not isinstance(system_prompt, str):
        name = f"{where}.system_prompt" if attribute else f"{where}(system_prompt=...)"
        raise TypeError(f"{name} must be a str or None, got "
                        f"{type(system_prompt).__name__} {short(system_prompt)}")
    return system_prompt


def check_title(title: object, where: str) -> str:
    """``title`` if it is a str."""
    if not isinstance(title, str):
        raise TypeError(f"{where}(title=...) must be a str, got {type(title).__name__} "
                        f"{short(title)}")
    return title


def check_messages(messages: object, where: str) -> list[ChatMessage]:
    """``messages`` as a list of ``{"role": str, "content": str}`` dicts."""
    if messages is None:
        return []
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise TypeError(f"{where}(messages=...) must be a list of {{'role', 'content'}} "
                        f"dicts, got {type(messages).__name__} {short(messages)}")
    out: list[ChatMessage] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TypeError(f"{where}(messages=...): item {i} must be a dict with 'role' "
                            f"and 'content', got {type(m).__name__} {short(m)}")
        role, content = m.get("role"), m.get("content")
        if not isinstance(role, str) or not role:
            raise TypeError(f"{where}(messages=...): item {i} needs a str 'role', got "
                            f"{short(role)}")
        if not isinstance(content, str):
            raise TypeError(f"{where}(messages=...): item {i} needs a str 'content', got "
                            f"{type(content).__name__} {short(content)}")
        out.append({"role": role, "content": content})
    return out
