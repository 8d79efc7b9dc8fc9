"""Waiting for events in tests: never a fixed sleep for another thread's work.

``wait_until(condition, timeout)`` polls ``condition`` until it returns a
truthy value and returns that value; past ``timeout`` it fails the test with
``message`` (or the condition's source name). The timeout is a safety net for
a hang, not a performance target: keep it generous (a loaded 2-core machine
is slow), and assert counts and order after the wait, never durations.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: poll period; short enough not to slow the suite, long enough not to spin
_POLL = 0.005


def wait_until(condition: Callable[[], T], timeout: float = 30.0, message: str = "") -> T:
    """Return ``condition()`` once truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(condition, "__name__", repr(condition))
            raise AssertionError(f"timed out after {timeout:g} s waiting for: {what}")
        time.sleep(_POLL)  # polling the condition, not waiting for a duration
