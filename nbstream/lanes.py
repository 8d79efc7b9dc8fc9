"""Worker threads: one first-in first-out lane per model.

A lane runs the replies of every source that shares one model (equal
:meth:`Source.lane_key`), at most ``limit`` at a time (default 1: a local
model generates one answer at a time, and two widgets on one model take
turns instead of mixing their text). Worker threads are started on demand and
end when the lane is empty, so stopping and starting replies repeatedly does
not accumulate threads.

Ownership: a lane's queue and counters are guarded by its lock; a job, once
taken from the queue, belongs to the worker thread running it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable

log = logging.getLogger("nbstream.lanes")

Job = Callable[[], None]


class Lane:
    """A FIFO queue of jobs with at most ``limit`` worker threads."""

    def __init__(self, key: Hashable, limit: int = 1) -> None:
        if limit < 1:
            raise ValueError("a lane needs a limit of at least 1")
        self.key = key
        self.limit = limit
        self._lock = threading.Lock()
        self._queue: deque[Job] = deque()
        self._workers = 0
        self._idle = threading.Condition(self._lock)

    def submit(self, job: Job) -> bool:
        """Queue ``job``. True if it starts at once, False if it waits its turn."""
        with self._lock:
            self._queue.append(job)
            starts_now = self._workers < self.limit
            if starts_now:
                self._workers += 1
                t = threading.Thread(target=self._work, name=f"nbstream-worker-{self.key!s:.40}",
                                     daemon=True)
                t.start()
            return starts_now

    @property
    def busy(self) -> int:
        with self._lock:
            return self._workers

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until no worker runs (tests)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._workers == 0, timeout)

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._workers -= 1
                    self._idle.notify_all()
                    return
                job = self._queue.popleft()
            try:
                job()
            except BaseException:  # a job reports its own errors; this is a last resort
                log.exception("nbstream: a worker job raised")


_lanes: dict[Hashable, Lane] = {}
_lanes_lock = threading.Lock()


def lane_for(key: Hashable, limit: int = 1) -> Lane:
    """The lane of ``key`` (created on first use)."""
    with _lanes_lock:
        lane = _lanes.get(key)
        if lane is None:
            lane = _lanes[key] = Lane(key, limit)
        return lane
