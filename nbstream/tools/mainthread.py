"""Running a tool on the kernel's main thread, never beside a cell.

A tool that reads or changes the notebook's variables (``Tool(fn,
main_thread=True)``) must not run while a cell runs: both would touch the same
objects from two threads. Its calls are queued here and run on the main
thread, one at a time, in one of two places:

* between cells: the kernel's event loop (ipykernel's ``kernel.io_loop``, on
  the main thread) is asked to run the queue; it does once no cell runs;
* while a cell waits in ``reply.wait()``: the wait runs the queue between its
  slices, so a cell that waits for a reply whose tools need the main thread
  does not wait forever.

Outside a kernel only ``reply.wait()`` runs them. A call still queued when the
tool's timeout passes ends with a timeout error like any other call.

Threads: any thread submits; only the main thread runs jobs (``drain``).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("nbstream")

__all__ = ["drain", "submit"]

_lock = threading.Lock()
_queue: deque[Callable[[], None]] = deque()


def submit(job: Callable[[], None]) -> None:
    """Queue ``job`` for the main thread, and ask the kernel's event loop to run it."""
    with _lock:
        _queue.append(job)
    loop = _kernel_loop()
    if loop is not None:
        try:
            loop.add_callback(drain)  # tornado: thread-safe
        except Exception:  # a closing kernel: reply.wait() still drains
            log.debug("nbstream: could not schedule a main-thread tool", exc_info=True)


def drain() -> int:
    """Run the queued jobs, on the main thread only; returns how many ran."""
    if threading.current_thread() is not threading.main_thread():
        return 0
    ran = 0
    while True:
        with _lock:
            if not _queue:
                return ran
            job = _queue.popleft()
        try:
            job()
        except Exception:  # a job reports its own errors; never break the loop
            log.exception("nbstream: a main-thread tool job failed")
        ran += 1


def _kernel_loop() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    return getattr(kernel, "io_loop", None)
