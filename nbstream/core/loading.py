"""What a source says while it loads: one line of text, and how far it got.

The contract between sources (which report) and the stream core (which keeps
the latest report and lets the pump send it). It imports nothing else of
nbstream, so both sides can depend on it without depending on each other.

A source calls :func:`report_loading` from its ``prepare()``, or from anything
``prepare()`` calls on the same thread::

    def prepare(self) -> None:
        for i, part in enumerate(parts):
            report_loading("loading weights", i / len(parts))
            ...

No argument is added to ``prepare()``, so sources written before this
(``prepare(self)``) keep working and may start reporting at any time.

Threads: the report goes to whatever reply is loading *on the calling
thread*: the reply's worker thread installs a receiver around ``prepare()``
(:func:`reporting_to`, in ``reply.run_reply``) and removes it afterwards. The
receiver is held in a :class:`contextvars.ContextVar`, so two worker threads
loading two models each report to their own reply. Called anywhere else (a
direct ``source.prepare()`` in a cell, another thread), a report goes nowhere.
A source that loads on threads of its own takes the receiver with
:func:`current_reporter` on the worker thread and calls it from there.

The receiver (the reply's :class:`~nbstream.core.stream.Stream`) only records the
latest report; how often it reaches the view is the pump's business (at most a
few times per second), so a source may report as often as it likes: per
tensor, per file, per byte.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["LoadingProgress", "Reporter", "current_reporter", "report_loading", "reporting_to"]

#: longest ``text`` a report may carry (a status line, not a log)
MAX_TEXT = 200


@dataclass(frozen=True)
class LoadingProgress:
    """One report: what is happening (``text``, e.g. "preparing the model (first
    run, once)") and the fraction done, 0..1 (None: unknown)."""

    text: str
    fraction: float | None = None


Reporter = Callable[[LoadingProgress], None]

_receiver: ContextVar[Reporter | None] = ContextVar("nbstream_loading_receiver", default=None)


def check_progress(text: object, fraction: object = None) -> LoadingProgress:
    """A :class:`LoadingProgress` of ``text`` and ``fraction``, checked.

    Raises ``TypeError`` / ``ValueError`` naming the argument.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    if not text.strip():
        raise ValueError("text must not be blank")
    if len(text) > MAX_TEXT:
        raise ValueError(f"text must be at most {MAX_TEXT} characters, got {len(text)}")
    if fraction is None:
        return LoadingProgress(text, None)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise TypeError(f"fraction must be a float in [0, 1] or None, not {fraction!r}")
    if not (math.isfinite(fraction) and 0.0 <= fraction <= 1.0):
        raise ValueError(f"fraction must be in [0, 1], got {fraction!r}")
    return LoadingProgress(text, float(fraction))


def report_loading(text: str, fraction: float | None = None) -> None:
    """Tell the view what the loading reply waits for: ``text`` (one short line,
    shown as "text… 42%") and ``fraction`` done (0..1, or None when unknown).

    Call it from a source's ``prepare()`` (on its worker thread); cheap, never
    blocks; a no-op where no reply is loading on this thread. Bad arguments
    raise ``TypeError`` / ``ValueError`` naming the argument.
    """
    progress = check_progress(text, fraction)
    receiver = _receiver.get()
    if receiver is not None:
        receiver(progress)


def current_reporter() -> Reporter | None:
    """The receiver of this thread's reports (None: no reply is loading here), for
    a source that loads on threads of its own."""
    return _receiver.get()


@contextmanager
def reporting_to(receiver: Reporter) -> Iterator[None]:
    """Send this thread's :func:`report_loading` calls to ``receiver`` meanwhile."""
    token = _receiver.set(receiver)
    try:
        yield
    finally:
        _receiver.reset(token)
