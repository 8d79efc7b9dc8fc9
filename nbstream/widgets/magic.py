"""Cell magics: ``%%stream`` and ``%%chat`` (load with ``%load_ext nbstream``).

``%%stream [SOURCE]`` sends the cell's text as a prompt and shows the answer
live under the cell (a :class:`~nbstream.widgets.streamview.StreamView`).
``%%chat [SOURCE]`` does the same but remembers: each ``%%chat`` cell on the
same source continues one conversation, which suits exploration and slides.
``SOURCE`` names a variable holding a :class:`~nbstream.sources.Source`, or a
``ChatWidget`` (the prompt is then sent into that chat); without it, the
embedded default model answers. ``--compare A B ...`` shows several sources
side by side; ``--system TEXT`` sets a system prompt; ``--timeout S`` limits
the whole answer. The view is also stored as ``_stream`` in the namespace.
"""

from __future__ import annotations

import shlex
from typing import Any

from ..sources.base import ChatMessage, Source
from .chat import ChatWidget, resolve_source
from .compare import Compare
from .streamview import StreamView, stream

_default: Source | None = None
#: %%chat memory: per source object, the (prompt, view) of each earlier cell
_memory: dict[int, list[tuple[str, StreamView]]] = {}


def _parse(line: str) -> dict[str, Any]:
    import argparse

    p = argparse.ArgumentParser(prog="%%stream", add_help=False, exit_on_error=False)
    p.add_argument("source", nargs="?")
    p.add_argument("--compare", nargs="+", default=None)
    p.add_argument("--system", default=None)
    p.add_argument("--timeout", type=float, default=None)
    p.add_argument("--title", default="")
    try:
        ns, rest = p.parse_known_args(shlex.split(line))
    except (argparse.ArgumentError, ValueError) as exc:
        raise ValueError(f"nbstream magic: {exc}") from None
    if rest:
        raise ValueError(f"nbstream magic: unknown options {' '.join(rest)}")
    return vars(ns)


def _lookup(name: str | None, user_ns: dict[str, Any]) -> Any:
    global _default
    if name is None:
        if _default is None:
            _default = resolve_source(None)
        return _default
    if name not in user_ns:
        raise NameError(f"nbstream magic: no variable named {name!r} in the notebook")
    return user_ns[name]


def run_magic(line: str, cell: str, user_ns: dict[str, Any], *, remember: bool) -> None:
    """Implement ``%%stream`` / ``%%chat``. Returns None, so the cell shows no status
    line that would change from run to run; the view (or reply) is ``_stream``."""
    opts = _parse(line)
    prompt = cell.strip()
    if not prompt:
        raise ValueError("nbstream magic: the cell is empty; write the prompt in it")
    limits = {"total_timeout": opts["timeout"]}
    if opts["compare"]:
        sources = [_lookup(n, user_ns) for n in opts["compare"]]
        view: Any = Compare(sources, prompt, system_prompt=opts["system"], title=opts["title"],
                            **limits)
        from IPython.display import display

        display(view)  # type: ignore[no-untyped-call]
    else:
        target = _lookup(opts["source"], user_ns)
        if isinstance(target, ChatWidget):  # the answer appears in that chat
            user_ns["_stream"] = target.send(prompt)
            return None
        if not isinstance(target, Source):
            raise TypeError(f"nbstream magic: {opts['source']!r} is a "
                            f"{type(target).__name__}, not a Source or a ChatWidget")
        earlier = _memory.setdefault(id(target), []) if remember else []
        history: list[ChatMessage] = []
        for said, answer in earlier:  # earlier answers as they stand now
            if answer.text:  # an unanswered prompt is left out: turns must alternate
                history.append({"role": "user", "content": said})
                history.append({"role": "assistant", "content": answer.text})
        view = stream(target, prompt, messages=history, system_prompt=opts["system"],
                      title=opts["title"], **limits)
        if remember:
            earlier.append((prompt, view))
    user_ns["_stream"] = view
    return None


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%stream`` and ``%%chat``."""

    def stream_magic(line: str, cell: str) -> Any:
        return run_magic(line, cell, ipython.user_ns, remember=False)

    def chat_magic(line: str, cell: str) -> Any:
        return run_magic(line, cell, ipython.user_ns, remember=True)

    ipython.register_magic_function(stream_magic, "cell", "stream")
    ipython.register_magic_function(chat_magic, "cell", "chat")


def forget() -> None:
    """Forget every ``%%chat`` conversation."""
    _memory.clear()


__all__ = ["StreamView", "forget", "load_ipython_extension", "run_magic"]
