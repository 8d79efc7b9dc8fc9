"""Kernel side of the kernel benchmarks: the ways to stream, run inside the kernel under test.

The harness (``_harness.py``) loads this module into a fresh IPython kernel
(``import _ways``) and drives it with two cells per run:

* ``setup(way, ...)`` creates and displays what the stream goes into (widgets,
  display handles, Panel feeds). This is not part of the stream: the harness
  starts recording IOPub only after it.
* ``start(out)`` runs the stream(s) and, once every stream has ended, writes a
  JSON report to ``out``. The harness waits for that file rather than asking
  the kernel, because any request makes the kernel publish an ``idle`` status,
  and jupyter_server resets its IOPub rate-limit window on every ``idle``.

Every way streams the same text (``" w0 w1 w2 ..."``: the piece number is in
the text, so a client can tell which pieces a message carries) on the same
schedule: ``ScriptedSource(text, rate, jitter, seed).generate``, whose first
clock reading is recorded as the stream's ``t0`` (``time.monotonic``, the
same clock as the harness on the same machine).

Ways (what a user would write):

``nbstream``   ``ChatWidget(ScriptedSource(...)).send("go")``; the cell returns at once
``display``    ``h = display(Markdown(""), display_id=True)``, ``h.update(Markdown(text))``
               per piece, in the cell (main thread, blocking)
``html``       ``w = ipywidgets.HTML(); w.value = text`` per piece, in the cell
``html_thread`` the same, each stream on its own ``threading.Thread``; the cell returns
``panel``      ``feed = pn.chat.ChatFeed(); msg = feed.stream(piece, message=msg)``
               per piece, in the cell
``source``     the control: the same ScriptedSource on a thread per stream, its pieces
               appended to a list; nothing is sent. What the synthetic producer alone
               costs the kernel (nbstream's worker threads run this same loop)

For N concurrent streams the main-thread ways update N targets in one loop
(one schedule), ``html_thread`` runs N threads and ``nbstream`` N widgets.

The naive ways give up after ``budget`` seconds (they fall behind their
producer without bound at high rates; the report says how far they got).

``sent`` and ``sent_bytes`` count the messages the kernel really sent
(``comm_msg``, ``display_data``, ``update_display_data`` on IOPub during the
run) and their JSON content bytes, by wrapping the kernel's
``Session.serialize``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

COUNTED = frozenset({"comm_msg", "display_data", "update_display_data"})
WAYS = ("nbstream", "display", "html", "html_thread", "panel", "source")


def text_for(n: int) -> str:
    """The streamed text: ``n`` pieces ``" w0"``, ``" w1"``, ... (ScriptedSource splits it so)."""
    return "".join(f" w{i}" for i in range(n))


class FirstClock:
    """``time.monotonic`` that remembers its first reading (the source's schedule origin)."""

    def __init__(self) -> None:
        self.t0: float | None = None

    def __call__(self) -> float:
        t = time.monotonic()
        if self.t0 is None:
            self.t0 = t
        return t


class GiveUp(Exception):
    """A naive way ran past its time budget."""


# ------------------------------------------------------------------ send counter
_count_lock = threading.Lock()
_counting = False
_counts: dict[str, int] = {}
_bytes: dict[str, int] = {}


def _install_counter() -> None:
    """Wrap the kernel's ``Session.serialize`` (once) to count what the stream sends.

    ``serialize`` builds every message the kernel sends; its last frame is the
    JSON content, so counting there costs a length, not a second encoding.
    """
    from IPython import get_ipython

    ip = get_ipython()
    sessions = {
        id(s): s
        for s in (ip.kernel.session, getattr(ip.display_pub, "session", None))
        if s is not None
    }
    for s in sessions.values():
        if getattr(s, "_nbs_bench_wrapped", False):
            continue
        orig = s.serialize

        def serialize(msg: Any, *args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
            frames = _orig(msg, *args, **kwargs)
            if _counting:
                kind = msg.get("header", {}).get("msg_type", "")
                if kind in COUNTED:
                    with _count_lock:
                        _counts[kind] = _counts.get(kind, 0) + 1
                        _bytes[kind] = _bytes.get(kind, 0) + len(frames[-1])
            return frames

        s.serialize = serialize
        s._nbs_bench_wrapped = True


def _set_counting(on: bool) -> None:
    global _counting
    with _count_lock:
        if on:
            _counts.clear()
            _bytes.clear()
        _counting = on


# ------------------------------------------------------------------------- state
class Run:
    """What ``setup`` prepared and ``start`` streams."""

    def __init__(
        self,
        way: str,
        streams: int,
        n: int,
        rate: float,
        jitter: float,
        seed: int,
        budget: float,
        interval: float,
    ) -> None:
        self.way = way
        self.streams = streams
        self.n = n
        self.rate = rate
        self.jitter = jitter
        self.seed = seed
        self.budget = budget
        self.interval = interval
        self.text = text_for(n)
        self.keys: list[str] = []  # display ids or comm ids, one per stream
        self.clocks: list[FirstClock] = []
        self.targets: list[Any] = []
        self.produced = [0] * streams
        self.gave_up = False
        self.error: str | None = None
        self.extra: dict[str, Any] = {}

    def source(self, clock: FirstClock) -> Any:
        from nbstream.sources import ScriptedSource

        return ScriptedSource(
            self.text, rate=self.rate, jitter=self.jitter, seed=self.seed, clock=clock
        )


_run: Run | None = None


def setup(
    way: str,
    *,
    streams: int,
    n: int,
    rate: float,
    jitter: float = 0.0,
    seed: int = 0,
    budget: float = 10.0,
    interval: float = 0.04,
    panel_site: str | None = None,
) -> list[str]:
    """Create and display ``streams`` targets for ``way``; return their keys."""
    global _run
    _install_counter()
    teardown()
    run = Run(way, streams, n, rate, jitter, seed, budget, interval)
    from IPython.display import display

    if way == "nbstream":
        from nbstream import ChatWidget

        for _ in range(streams):
            clock = FirstClock()
            chat = ChatWidget(run.source(clock), interval=interval)
            display(chat)  # type: ignore[no-untyped-call]
            run.clocks.append(clock)
            run.targets.append(chat)
            run.keys.append(chat.model_id)
    elif way == "display":
        tag = uuid.uuid4().hex[:8]
        run.keys = [f"nbs-bench-{tag}-{k}" for k in range(streams)]
    elif way in ("html", "html_thread"):
        import ipywidgets

        for _ in range(streams):
            w = ipywidgets.HTML()
            display(w)  # type: ignore[no-untyped-call]
            run.targets.append(w)
            run.keys.append(w.model_id)
    elif way == "panel":
        if panel_site and panel_site not in sys.path:
            sys.path.append(panel_site)  # after the venv: its packages win over the extra ones
        import panel as pn

        pn.extension()
        for _ in range(streams):
            feed = pn.chat.ChatFeed()
            display(feed)  # type: ignore[no-untyped-call]
            # In a browser, Panel's front end opens a comm back to the kernel, which
            # opens the kernel->browser comm (Panel buffers updates until then). No
            # browser here: open it as that callback would.
            comms = list(feed._comms.values())
            for server_comm, _client_comm in comms:
                server_comm.init()
            run.targets.append(feed)
            run.keys.append(comms[0][0]._comm.comm_id)
    elif way == "source":
        run.keys = [f"source-{k}" for k in range(streams)]
    else:
        raise ValueError(f"unknown way {way!r}; one of {WAYS}")
    _run = run
    return run.keys


def teardown() -> None:
    """Close what the previous run created (its comms), so runs do not add up."""
    global _run
    run, _run = _run, None
    if run is None:
        return
    for t in run.targets:
        with contextlib.suppress(Exception):
            if hasattr(t, "close"):
                t.close()


# ------------------------------------------------------------------------- start
def start(out: str) -> None:
    """Run the prepared streams; the report goes to ``out`` once every stream ended.

    Main-thread ways return when done (the cell blocks); ``nbstream`` and
    ``html_thread`` return at once and a watcher thread writes the report.
    """
    run = _run
    if run is None:
        raise RuntimeError("setup() first")
    _set_counting(True)
    started = time.monotonic()
    way = run.way
    if way == "nbstream":
        replies = [chat.send("go") for chat in run.targets]

        def watch() -> None:
            for r in replies:
                r.wait()
            ended = time.monotonic()
            # the pump publishes the final state in the step that settled the stream
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and any(
                c._channel.streams or c._channel.changed or c._channel.resend for c in run.targets
            ):
                time.sleep(0.005)
            time.sleep(0.05)
            run.produced = [r.stats.get("pieces", 0) for r in replies]
            run.extra["statuses"] = [r.status for r in replies]
            run.extra["deltas_sent"] = sum(c._channel.deltas_sent for c in run.targets)
            run.extra["publishes"] = sum(c._channel.publishes for c in run.targets)
            run.extra["delta_text_bytes"] = sum(c._channel.delta_bytes for c in run.targets)
            run.extra["final_text_ok"] = all(r.text == run.text for r in replies)
            # in the kernel: gaps between one stream's flushes, and how long its oldest
            # unsent piece waited (the pump's own share of the lag)
            gaps: list[float] = []
            held: list[float] = []
            for r in replies:
                flushes = r.stream.timeline()[2]
                gaps += [(b.sent_at - a.sent_at) * 1000 for a, b in itertools.pairwise(flushes)]
                held += [(f.sent_at - f.first_piece_at) * 1000 for f in flushes]
            run.extra["flush_gaps_ms"] = _spread(gaps)
            run.extra["held_ms"] = _spread(held)
            _report(run, out, started, ended)

        threading.Thread(target=watch, name="nbs-bench-watch", daemon=True).start()
    elif way in ("html_thread", "source"):
        threads = []
        for k in range(run.streams):
            clock = FirstClock()
            run.clocks.append(clock)
            target, args = (
                (_produce, (run, clock, [k], _setter(run.targets[k])))
                if way == "html_thread"
                else (_feed_nothing, (run, clock, k))
            )
            threads.append(
                threading.Thread(target=target, args=args, name=f"nbs-bench-{k}", daemon=True)
            )
        for t in threads:
            t.start()

        def watch_threads() -> None:
            for t in threads:
                t.join()
            _report(run, out, started, time.monotonic())

        threading.Thread(target=watch_threads, name="nbs-bench-watch", daemon=True).start()
    else:
        clock = FirstClock()
        run.clocks = [clock] * run.streams
        if way == "display":
            from IPython.display import Markdown, display

            handles = [
                display(Markdown(""), display_id=key)  # type: ignore[no-untyped-call]
                for key in run.keys
            ]

            def update_all(text: str, piece: str) -> None:
                md = Markdown(text)  # type: ignore[no-untyped-call]
                for h in handles:
                    h.update(md)
        elif way == "html":

            def update_all(text: str, piece: str) -> None:
                for w in run.targets:
                    w.value = text
        elif way == "panel":
            msgs: list[Any] = [None] * run.streams

            def update_all(text: str, piece: str) -> None:
                for k, feed in enumerate(run.targets):
                    msgs[k] = feed.stream(piece, message=msgs[k])
        else:  # pragma: no cover - setup() rejects it
            raise ValueError(way)
        _produce(run, clock, list(range(run.streams)), update_all)
        _report(run, out, started, time.monotonic())


def _setter(w: Any) -> Callable[[str, str], None]:
    def set_value(text: str, _piece: str) -> None:
        w.value = text

    return set_value


def _spread(values: list[float]) -> dict[str, float]:
    """p50 / p95 / max of ``values`` (nearest rank)."""
    if not values:
        return {}
    v = sorted(values)

    def q(x: float) -> float:
        return round(v[min(len(v) - 1, max(0, int(x * len(v) + 0.999999) - 1))], 1)

    return {"p50": q(0.5), "p95": q(0.95), "max": round(v[-1], 1)}


def _feed_nothing(run: Run, clock: FirstClock, k: int) -> None:
    """The control: the source alone, on its own thread, its pieces kept in a list."""
    parts: list[str] = []
    run.source(clock).generate([], parts.append, threading.Event())
    run.produced[k] = len(parts)


def _produce(
    run: Run, clock: FirstClock, ks: list[int], update: Callable[[str, str], None]
) -> None:
    """The naive loop: on the source's schedule, append each piece and show the whole text."""
    deadline = time.monotonic() + run.budget
    parts: list[str] = []
    text = ""

    def emit(piece: str) -> None:
        nonlocal text
        if time.monotonic() > deadline:
            raise GiveUp()
        text += piece
        update(text, piece)
        parts.append(piece)

    try:
        run.source(clock).generate([], emit, threading.Event())
    except GiveUp:
        run.gave_up = True
    except Exception as exc:  # report, do not hang the harness
        run.error = f"{type(exc).__name__}: {exc}"
    for k in ks:
        run.produced[k] = len(parts)


def _report(run: Run, out: str, started: float, ended: float) -> None:
    _set_counting(False)
    with _count_lock:
        sent, sent_bytes = dict(_counts), dict(_bytes)
    report = {
        "way": run.way,
        "streams": run.streams,
        "n": run.n,
        "rate": run.rate,
        "jitter": run.jitter,
        "seed": run.seed,
        "text_chars": len(run.text),
        "keys": run.keys,
        "t0": [c.t0 for c in run.clocks],
        "produced": run.produced,
        "gave_up": run.gave_up,
        "error": run.error,
        "started": started,
        "ended": ended,
        "sent": sent,
        "sent_bytes": sent_bytes,
        **run.extra,
    }
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f)
    os.replace(tmp, out)
