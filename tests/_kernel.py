"""Talking to a real kernel: run code and evaluate expressions over its shell
channel (IOPub is left for the test to read), and read IOPub, one loop for all."""

from __future__ import annotations

import ast
import queue
import time
from collections.abc import Iterator
from typing import Any


def shell_reply(kc: Any, msg_id: str, timeout: float) -> dict[str, Any]:
    """The shell reply to the request ``msg_id`` (others are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        reply = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply  # type: ignore[no-any-return]


def execute(kc: Any, code: str, timeout: float = 60) -> dict[str, Any]:
    """Run ``code``; raises AssertionError with the traceback if it failed."""
    reply = shell_reply(kc, kc.execute(code), timeout)
    if reply["content"]["status"] != "ok":
        raise AssertionError("".join(reply["content"].get("traceback", [])))
    return reply


def value(kc: Any, expr: str) -> Any:
    """Evaluate ``expr`` in the kernel (a user expression, so IOPub is untouched)."""
    # an execute queued just after an interrupt is answered "aborted" (ipykernel
    # stops on error): ask again
    for _ in range(5):
        reply = shell_reply(kc, kc.execute("", silent=True, user_expressions={"v": expr}), 60)
        if reply["content"].get("status") != "aborted":
            break
    v = reply["content"]["user_expressions"]["v"]
    if v["status"] != "ok":
        raise AssertionError(f"{expr}: {v}")
    return ast.literal_eval(v["data"]["text/plain"])


def iopub(kc: Any, timeout: float, waiting_for: str, *, poll: float = 0.5,
          ticks: bool = False) -> Iterator[Any]:
    """The kernel's IOPub messages as they arrive, for at most ``timeout`` seconds: the
    test stops iterating once it has what it waits for. When the time is up, raises
    AssertionError naming ``waiting_for``. With ``ticks``, also yields None each time
    ``poll`` seconds pass with no message (for a test that does something meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {waiting_for} within {timeout:g} s")
        try:
            yield kc.get_iopub_msg(timeout=min(poll, left))
        except queue.Empty:
            if ticks:
                yield None


def cell_idle(msg: dict[str, Any], msg_id: str) -> bool:
    """Whether ``msg`` is the "idle" status that ends the request ``msg_id`` (IOPub is
    ordered: everything that request caused came before it)."""
    return (msg["msg_type"] == "status" and msg["parent_header"].get("msg_id") == msg_id
            and msg["content"]["execution_state"] == "idle")


def drain_iopub(kc: Any, quiet: float = 0.2) -> None:
    """Read IOPub until it stays quiet for ``quiet`` seconds."""
    while True:
        try:
            kc.get_iopub_msg(timeout=quiet)
        except queue.Empty:
            return
