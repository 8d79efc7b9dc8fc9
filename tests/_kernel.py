"""Talking to a real kernel over its shell channel only (IOPub is left for the
test to read): run code, evaluate an expression."""

from __future__ import annotations

import ast
import time
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
