"""Worker threads: one first-in first-out lane per model.

A lane runs the replies of every source that shares one model (equal
:meth:`Source.lane_key`), at most ``limit`` at a time (default 1: a local
model generates one answer at a time, and two widgets on one model take
turns instead of mixing their text). Worker threads are started on demand and
end when the lane is empty, so stopping and starting replies repeatedly does
not accumulate threads; a lane whose last worker ends leaves the registry, so
a lane per ``stream()`` call or per iterator source does not accumulate either
(the next job of that key makes a new lane).

Ownership: the registry is guarded by ``_lanes_lock``; a lane's queue and
counters by its own lock (always taken after the registry's, never before). A
job, once taken from the queue, belongs to the worker thread running it.
Jobs are handed to a lane by :func:`submit`, which looks the lane up and
queues the job under the registry lock, so a job never lands on a lane that
just left the registry (two lanes of one key could then run at once).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable

log = logging.getLogger("nbstream.core.lanes")

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
        self._retired = False  # left the registry: its key's next job goes to a new lane

    def submit(self, job: Job) -> bool:
        """Queue ``job``. True if it starts at once, False if it waits its turn.

        Prefer the module's :func:`submit`; a lane that already left the
        registry hands the job to its key's current lane.
        """
        with self._lock:
            if not self._retired:
                return self._queue_job(job)
        return submit(self.key, self.limit, job)

    def _enqueue(self, job: Job) -> bool:
        # caller holds _lanes_lock and this lane is registered (hence not retired)
        with self._lock:
            return self._queue_job(job)

    def _queue_job(self, job: Job) -> bool:
        # caller holds self._lock
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

    def _retire_if_idle(self) -> bool:
        # caller holds _lanes_lock (taken before this lane's lock)
        with self._lock:
            if self._workers or self._queue:
                return False
            self._retired = True
            return True

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._workers -= 1
                    last = self._workers == 0
                    self._idle.notify_all()
                    break
                job = self._queue.popleft()
            try:
                job()
            except BaseException:  # a job reports its own errors; this is a last resort
                log.exception("nbstream: a worker job raised")
            del job  # the finished job (and the reply it holds) is not kept by this frame
        if last:
            _release(self)


_lanes: dict[Hashable, Lane] = {}
_lanes_lock = threading.Lock()


def submit(key: Hashable, limit: int, job: Job) -> bool:
    """Queue ``job`` on the lane of ``key`` (made if there is none, with ``limit``).

    True if the job starts at once, False if it waits its turn.
    """
    with _lanes_lock:
        lane = _lanes.get(key)
        if lane is None:
            lane = _lanes[key] = Lane(key, limit)
        return lane._enqueue(job)


def _release(lane: Lane) -> None:
    """Drop ``lane`` from the registry if it is still idle (its last worker ended)."""
    with _lanes_lock:
        if _lanes.get(lane.key) is lane and lane._retire_if_idle():
            del _lanes[lane.key]


def get(key: Hashable) -> Lane | None:
    """The live lane of ``key``, if one has jobs or workers."""
    with _lanes_lock:
        return _lanes.get(key)


def count() -> int:
    """How many lanes are alive (each has queued jobs or a running worker)."""
    with _lanes_lock:
        return len(_lanes)
