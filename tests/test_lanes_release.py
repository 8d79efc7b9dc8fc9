"""Nothing grows for ever: a lane leaves the registry when its last worker ends, so
the lane made for each stream() call or iterator source goes away; 1,000 stream()
calls leave no lane, worker thread, pump stream, reply or buffer behind."""

from __future__ import annotations

import gc
import threading
import weakref
from collections import Counter

from _wait import wait_until

from nbstream import Reply, StreamView, stream
from nbstream.core import lanes
from nbstream.core.pump import get_pump
from nbstream.core.stream import Stream


def test_a_lane_leaves_the_registry_when_its_work_is_done() -> None:
    key = ("test", "release")
    gate = threading.Event()
    ran: list[int] = []
    assert lanes.submit(key, 1, lambda: (gate.wait(10), ran.append(1))) is True
    assert lanes.submit(key, 1, lambda: ran.append(2)) is False  # waits its turn
    lane = lanes.get(key)
    assert lane is not None
    wait_until(lambda: lane.busy == 1 and lane.pending() == 1, 10)  # one runs, one waits
    gate.set()
    wait_until(lambda: lanes.get(key) is None, 10)
    assert ran == [1, 2]
    # the key's next job makes a new lane; a job handed to the retired one follows it
    done = threading.Event()
    assert lane.submit(done.set) is True
    assert done.wait(10)
    wait_until(lambda: lanes.get(key) is None, 10)


def test_one_key_never_runs_on_two_lanes_while_lanes_come_and_go() -> None:
    """Jobs submitted from several threads while lanes retire: per key, at most
    ``limit`` jobs ever run at once, and every job runs exactly once."""
    running: Counter[str] = Counter()
    most: Counter[str] = Counter()
    ran: Counter[int] = Counter()
    lock = threading.Lock()

    def job(key: str, n: int) -> None:
        with lock:
            running[key] += 1
            most[key] = max(most[key], running[key])
        with lock:
            running[key] -= 1
            ran[n] += 1

    def submitter(t: int) -> None:
        for i in range(500):
            key = f"k{i % 3}"
            n = t * 1000 + i
            lanes.submit(("race", key), 1, lambda key=key, n=n: job(key, n))

    threads = [threading.Thread(target=submitter, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_until(lambda: sum(ran.values()) == 2000, 30)
    assert set(ran.values()) == {1}
    assert max(most.values()) == 1
    wait_until(lambda: all(lanes.get(("race", f"k{i}")) is None for i in range(3)), 10)


def _count(kind: type) -> int:
    return sum(1 for o in gc.get_objects() if type(o) is kind)


def test_1000_stream_calls_leave_nothing_behind() -> None:
    gc.collect()
    pump = get_pump()
    base_lanes, base_threads = lanes.count(), threading.active_count()
    base_objects = {k: _count(k) for k in (StreamView, Reply, Stream)}
    replies: list[weakref.ref[Reply]] = []
    sources: list[weakref.ref[object]] = []
    pieces: list[weakref.ref[object]] = []

    class Pieces(list[str]):
        """A list of pieces that can be weakly referenced (a plain list cannot)."""

    for i in range(1000):
        data = Pieces([f"piece {i} ", "and the end"])
        view = stream(data)
        pieces.append(weakref.ref(data))
        replies.append(weakref.ref(view.reply))
        sources.append(weakref.ref(view.source))
        assert view.wait(10) == f"piece {i} and the end"
        view.close()
        del view, data
    wait_until(lambda: lanes.count() <= base_lanes, 30, "every lane released")
    wait_until(lambda: threading.active_count() <= base_threads, 30, "every worker ended")
    wait_until(lambda: pump.active_streams() == 0, 30, "the pump holds no stream")
    gc.collect()
    assert [r for r in replies if r() is not None] == []
    assert [s for s in sources if s() is not None] == []
    assert [p for p in pieces if p() is not None] == []
    assert {k: _count(k) for k in base_objects} == base_objects


def test_views_left_open_still_release_their_lane_thread_and_pieces() -> None:
    """A view the user keeps (it is on screen) keeps its text, but not its lane, its
    worker, its place in the pump or the iterable it was given."""
    pump = get_pump()
    base_lanes, base_threads = lanes.count(), threading.active_count()

    class Pieces(list[str]):
        """A list of pieces that can be weakly referenced."""

    views: list[StreamView] = []
    pieces: list[weakref.ref[object]] = []
    for i in range(300):
        data = Pieces([f"piece {i}"])
        views.append(stream(data))
        pieces.append(weakref.ref(data))
        del data
    assert [v.wait(10) for v in views] == [f"piece {i}" for i in range(300)]
    wait_until(lambda: lanes.count() <= base_lanes, 30, "every lane released")
    wait_until(lambda: threading.active_count() <= base_threads, 30, "every worker ended")
    wait_until(lambda: pump.active_streams() == 0, 30, "the pump holds no stream")
    gc.collect()
    assert [p for p in pieces if p() is not None] == []
    for v in views:
        v.close()
