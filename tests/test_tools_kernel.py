"""Tools in a real kernel (#20): a tool that must touch the notebook's variables
(``main_thread=True``) runs on the kernel's main thread between cells, never beside a
cell; every other tool runs on a thread of its own while cells go on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _kernel import execute, value
from _wait import wait_until
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

pytestmark = pytest.mark.kernel

SETUP = '''
import threading, time
from nbstream import ChatWidget, tool
from nbstream.sources import ScriptedSource, call

seen = []
namespace_value = 41

def bump() -> str:
    """Add one to the notebook's variable."""
    global namespace_value
    seen.append((threading.current_thread().name, busy))
    namespace_value += 1
    return str(namespace_value)

def where() -> str:
    """Where it runs."""
    seen.append((threading.current_thread().name, busy))
    return "ok"

busy = False
main = ChatWidget(ScriptedSource(rounds=[[call("bump")], "done"], rate=500),
                  tools=[tool(bump, approve=True, main_thread=True)])
worker = ChatWidget(ScriptedSource(rounds=[[call("where")], "done"], rate=500),
                    tools=[tool(where, approve=True)])
'''

# a cell that keeps the main thread busy for a while: a main-thread tool may not run in it
BUSY = '''
busy = True
r = main.send("bump it")
t0 = time.monotonic()
while time.monotonic() - t0 < 1.5:
    pass
calls_during_cell = len(seen)
busy = False
'''


@pytest.fixture(scope="module")
def kernel() -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    km, kc = start_new_kernel(kernel_name="python3", env={"HF_HUB_OFFLINE": "1"})
    try:
        execute(kc, SETUP)
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _wait(kc: BlockingKernelClient, expr: str, timeout: float = 30) -> None:
    wait_until(lambda: value(kc, expr), timeout, f"waiting for {expr}")


def test_a_main_thread_tool_runs_between_cells_on_the_main_thread(
        kernel: tuple[KernelManager, BlockingKernelClient]) -> None:
    _, kc = kernel
    execute(kc, BUSY)
    assert value(kc, "calls_during_cell") == 0  # not beside the busy cell
    _wait(kc, "r.done")  # ...but once it ended, with no cell waiting for it
    assert value(kc, "seen") == [("MainThread", False)]
    assert value(kc, "namespace_value") == 42 and value(kc, "r.text") == "done"


def test_other_tools_run_on_their_own_thread_while_a_cell_runs(
        kernel: tuple[KernelManager, BlockingKernelClient]) -> None:
    _, kc = kernel
    execute(kc, '''
seen.clear()
busy = True
w = worker.send("where?")
t0 = time.monotonic()
while not w.done and time.monotonic() - t0 < 20:
    time.sleep(0.01)  # the scenario: a cell busy on the main thread while the tool runs
busy = False
''')
    (name, during), = value(kc, "seen")
    assert name.startswith("nbstream-tool-where") and during is True
    assert value(kc, "w.text") == "done"
