"""Run code in a kernel from a benchmark: a cell, and an expression's value."""

from __future__ import annotations

import ast
import time
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient


def shell(kc: BlockingKernelClient, code: str, timeout: float = 600) -> dict[str, Any]:
    """Run ``code`` as a cell; its shell reply (RuntimeError with the traceback if it failed)."""
    msg_id = kc.execute(code)
    deadline = time.monotonic() + timeout
    while True:
        reply = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            if reply["content"]["status"] != "ok":
                raise RuntimeError("".join(reply["content"].get("traceback", [])))
            return reply  # type: ignore[no-any-return]


def value(kc: BlockingKernelClient, expr: str, timeout: float = 600) -> Any:
    """The value of ``expr`` in the kernel (a Python literal: its repr is parsed back)."""
    msg_id = kc.execute("", silent=True, user_expressions={"v": expr})
    deadline = time.monotonic() + timeout
    while True:
        reply = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            result = reply["content"]["user_expressions"]["v"]
            if result["status"] != "ok":
                raise RuntimeError(f"{expr}: {result.get('ename')}: {result.get('evalue')}")
            return ast.literal_eval(result["data"]["text/plain"])
