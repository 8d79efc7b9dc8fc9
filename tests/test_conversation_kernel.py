"""Save -> load in a real IPython kernel: the same messages, reasoning, statuses and
reasons, and the loaded conversation reaches the front end on IOPub at once (the
per-message keys a view reads), sent by the pump thread from inside the kernel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _kernel import execute, iopub, value
from _wire import conversation_of
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import start_new_kernel

pytestmark = pytest.mark.kernel

SETUP = """
import threading
from nbstream import ChatWidget
from nbstream.core.pieces import Reasoning
from nbstream.sources import IteratorSource
from tests._wait import wait_until

STOP_GATE, SLOW_GATE = threading.Event(), threading.Event()

def answer(messages):
    q = messages[-1]["content"]
    if q == "think":
        yield Reasoning("Let me think.")
        yield "Forty-two."
    elif q == "stop":
        yield "partial"
        STOP_GATE.wait(60)  # held until the test stopped this reply
    elif q == "fail":
        yield "before the error"
        raise RuntimeError("the source broke")
    elif q == "slow":
        yield "slow start"
        SLOW_GATE.wait(60)  # the stall timeout ends it meanwhile
    else:
        yield f"you said {q}"

chat = ChatWidget(IteratorSource(answer), title="kept", system_prompt="Be kind.",
                  stall_timeout=1.0)
chat.send("think").wait(30)
r = chat.send("stop")
wait_until(lambda: r.stream.seq >= 1, message="the first piece sent")
r.cancel()
STOP_GATE.set()
try:
    chat.send("fail").wait(30)
except Exception:
    pass
try:
    chat.send("slow").wait(30)
except Exception:
    pass
SLOW_GATE.set()
"""


@pytest.fixture(scope="module")
def kernel() -> Iterator[BlockingKernelClient]:
    root = str(Path(__file__).resolve().parent.parent)
    km, kc = start_new_kernel(kernel_name="python3", cwd=root, env={
        "HF_HUB_OFFLINE": "1", "PYTHONPATH": root})
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def front_end_model(kc: BlockingKernelClient, comm_id: str, last_id: int,
                    timeout: float = 30) -> dict[str, Any]:
    """The model the front end builds from ``comm_id``'s open and update messages on
    IOPub, read until it names ``last_id`` messages and holds all their metas."""
    model: dict[str, Any] = {}
    for msg in iopub(kc, timeout, f"all {last_id} messages on the front end"):
        content = msg["content"]
        if content.get("comm_id") != comm_id:
            continue
        if msg["msg_type"] == "comm_open":
            model.update(content["data"].get("state", {}))
        elif msg["msg_type"] == "comm_msg" and content["data"].get("method") == "update":
            model.update(content["data"]["state"])
        if model.get("last_id") == last_id and all(f"m{n}" in model
                                                   for n in range(1, last_id + 1)):
            return model
    raise AssertionError("unreachable")  # iopub() raises when the time is up


def test_save_then_load_in_a_kernel(kernel: BlockingKernelClient, tmp_path: Path) -> None:
    kc = kernel
    execute(kc, SETUP, timeout=90)
    expected = [
        ("user", "think", "done"), ("assistant", "Forty-two.", "done"),
        ("user", "stop", "done"), ("assistant", "partial", "stopped"),
        ("user", "fail", "done"), ("assistant", "before the error", "error"),
        ("user", "slow", "done"), ("assistant", "slow start", "timeout"),
    ]
    described = "[(m['role'], m['content'], m['status']) for m in {}.messages]"
    assert value(kc, described.format("chat")) == expected
    path = str(tmp_path / "conversation.json")
    execute(kc, f"saved = chat.save({path!r})\n"
                f"loaded = ChatWidget.load({path!r}, IteratorSource(answer))\n"
                "loaded_comm = loaded.comm.comm_id", timeout=90)
    assert value(kc, described.format("loaded")) == expected
    details = "[(r.reasoning, r.finish_reason, r.reason) for r in {}.replies]"
    assert value(kc, details.format("loaded")) == value(kc, details.format("chat")) == [
        ("Let me think.", "stop", None),
        ("", "cancelled", None),
        ("", "error", "RuntimeError: the source broke"),
        ("", "timeout", "no token for 1 s"),
    ]
    assert value(kc, "(loaded.title, loaded.system_prompt)") == ("kept", "Be kind.")
    assert value(kc, "loaded.to_markdown() == chat.to_markdown()") is True

    # what the front end receives for the loaded chat: its eight messages, at once
    comm_id = value(kc, "loaded_comm")
    model = front_end_model(kc, comm_id, 8)
    shown = conversation_of(model)
    assert [(e["role"], e["text"], e["status"]) for e in shown] == expected
    assert shown[1]["reasoning"] == "Let me think."
    assert shown[5]["error"] == "RuntimeError: the source broke"

    # and the loaded chat goes on, the model seeing the loaded history
    assert value(kc, "loaded.send('more').wait(30)") == "you said more"
    assert value(kc, "[m['status'] for m in loaded.messages][-2:]") == ["done", "done"]
