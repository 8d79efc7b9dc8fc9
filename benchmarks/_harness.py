"""Client side of the kernel benchmarks: a real jupyter server, kernels behind it, readers, probes.

One session looks like this::

    harness (this process) ──REST──▶ jupyter server (child process, 127.0.0.1, random token)
      │                                 └─ one IPython kernel per way (what is measured)
      ├─ shell, direct ZMQ: setup cells, the start cell, probe cells ("1")
      ├─ WS reader (child process): /api/kernels/<id>/channels with the v1 websocket
      │    protocol, as JupyterLab 4 connects: what a browser receives, after the
      │    server's IOPub rate limit and its ZMQ queues
      └─ ZMQ reader (child process, only with ``Config.zmq_reader``): the kernel's IOPub
           socket, directly

The server runs with ``_server_ext.CountingConnection``, which counts what
reached it and what its rate limit dropped; the kernel counts what it sent
(``_ways.py``). The readers run in their own processes so that parsing
hundreds of megabytes of naive updates does not hold this process's GIL while
it times probes. All times are ``time.monotonic()`` (CLOCK_MONOTONIC, one
clock for every process on the machine), so a piece's scheduled time in the
kernel and its arrival in a reader compare directly.

A way that leaves the kernel free (nbstream, the thread way) is measured in
two passes: the *wire* pass sends nothing to the kernel while the stream runs
(any request makes the kernel publish an ``idle`` status, and jupyter_server
resets its rate-limit window on every ``idle``: probing would hide drops);
the *probe* pass sends a trivial cell every ``probe_interval`` and times the
replies. A main-thread way needs one pass (``both``): its probe waits in the
kernel's queue until the cell ends. The control (``source``) sends nothing
and has only a probe pass.

``run_matrix(Config(...))`` runs everything and returns one row per run;
``aggregate()`` folds repetitions into medians. The command line and the
tables are in ``kernel_bench.py``.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing as mp
import os
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nbstream.core.pieces import FINAL_STATUSES

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
COUNTED = ("comm_msg", "display_data", "update_display_data")
WAYS = ("nbstream", "display", "html", "html_thread", "panel")
#: the control: the same sources feeding nothing (what the synthetic producer alone costs)
CONTROL = "source"
#: ways whose start cell returns at once: the kernel is free while they stream
FREE_WAYS = frozenset({"nbstream", "html_thread", CONTROL})
#: where ``pip install --target`` puts Panel for the ``panel`` way (kept out of the venv)
DEFAULT_PANEL_SITE = Path(
    os.environ.get("NBS_BENCH_PANEL_SITE", Path.home() / ".cache" / "nbstream-bench" / "panel-site")
)
RATE_WARNING = "rate exceeded"  # in "IOPub message rate exceeded." / "IOPub data rate exceeded."
_IDX = re.compile(r"\bw(\d+)")  # " w12", "<p>w12"; not "Row00237"


# ---------------------------------------------------------------- configuration
@dataclass
class Config:
    """What to run. Defaults: the default run of ``kernel_bench.py``."""

    ways: tuple[str, ...] = WAYS
    rates: tuple[float, ...] = (200, 2000, 10000)
    streams: tuple[int, ...] = (1, 8)
    reps: int = 1
    #: each stream lasts about this long at its rate (pieces = rate * duration) ...
    duration: float = 2.0
    #: ... but has at most this many pieces (a 10,000/s stream is shorter)
    max_pieces: int = 6000
    #: a naive way gives up after this many seconds (it falls behind without bound)
    budget: float = 6.0
    jitter: float = 0.2
    seed: int = 0
    interval: float = 0.04  # nbstream's flush interval
    probe_interval: float = 0.1
    idle_probes: int = 10
    #: also run the control: the same sources on threads, feeding nothing
    control: bool = True
    #: measure every way in two passes; by default only the ways that leave the kernel
    #: free (nbstream, html_thread) need two (see the module docstring)
    separate_passes: bool = False
    #: also observe the kernel's IOPub socket directly (ZMQ) in the wire pass
    zmq_reader: bool = False
    panel_site: str = str(DEFAULT_PANEL_SITE)
    #: how long the readers wait for the server to forward a backlog after the stream
    drain_quiet: float = 0.5
    drain_max: float = 30.0

    def pieces(self, rate: float) -> int:
        return max(20, min(self.max_pieces, round(rate * self.duration)))


def schedule(n: int, rate: float, jitter: float, seed: int) -> list[float]:
    """Offsets from t0 at which ScriptedSource emits its pieces (same RNG, same order)."""
    rng = random.Random(seed)
    gap = 1.0 / rate
    due = 0.0
    out: list[float] = []
    for i in range(n):
        if i:
            due += gap * (1.0 + jitter * rng.uniform(-1.0, 1.0))
        out.append(due)
    return out


def last_index(s: str) -> int:
    """The number of the last piece (``w<number>``) in ``s``; -1 if none."""
    found = _IDX.findall(s, max(0, len(s) - 48))
    if not found and len(s) > 48:
        found = _IDX.findall(s)
    return int(found[-1]) if found else -1


# ---------------------------------------------------------------------- readers
# A record is (arrival time, kind, key, content bytes, last piece index, final).
# kind: an IOPub msg_type in COUNTED, or "warn" for the server's rate-limit warning.
Record = tuple[float, str, str, int, int, bool]


def extract(msg_type: str, content: dict[str, Any]) -> tuple[str, int, bool]:
    """(key, last piece index, final) of a message the stream sent."""
    if msg_type in ("display_data", "update_display_data"):
        key = (content.get("transient") or {}).get("display_id") or ""
        data = content.get("data") or {}
        text = data.get("text/markdown") or data.get("text/html") or ""
        return key, last_index(text if isinstance(text, str) else ""), False
    key = content.get("comm_id", "")
    data = content.get("data")
    if isinstance(data, dict):
        method = data.get("method")
        if method == "custom":  # nbstream delta
            c = data.get("content") or {}
            if c.get("kind") == "delta":
                return key, last_index(c.get("text", "")), False
            return key, -1, False
        state = data.get("state") if method == "update" else None
        if isinstance(state, dict):
            if isinstance(state.get("value"), str):  # ipywidgets HTML
                return key, last_index(state["value"]), False
            if "last_id" in state or any(_MSG_KEY.match(k) for k in state):
                return (key, *_extract_keys(state))
            conv = state.get("conversation")
            if isinstance(conv, list):  # nbstream synced state
                for e in reversed(conv):
                    if isinstance(e, dict) and e.get("role") == "assistant":
                        return (
                            key,
                            last_index(e.get("text", "")),
                            e.get("status") in FINAL_STATUSES,
                        )
        return key, -1, False
    if isinstance(data, str):  # Panel / Bokeh: a JSON document patch as a string
        return key, last_index(data), False
    return key, -1, False


_MSG_KEY = re.compile(r"^m\d+(?:\.(\d+))?$")


def _extract_keys(state: dict[str, Any]) -> tuple[int, bool]:
    """(last piece index, final) of an nbstream update of per-message keys (protocol.py):
    the last delta key's text, and whether an assistant meta in it is final."""
    idx, final = -1, False
    for k, v in state.items():
        m = _MSG_KEY.match(k)
        if m is None:
            continue
        if m.group(1) is not None:  # a delta: a string, or [[type, text], ...]
            text = v if isinstance(v, str) else "".join(
                run[1] for run in v) if isinstance(v, list) else ""
            i = last_index(text)
            idx = i if i >= 0 else idx
        elif isinstance(v, dict) and v.get("role") == "assistant":
            final = final or v.get("status") in FINAL_STATUSES
    return idx, final


def _record(t: float, header: bytes, content: bytes) -> Record | None:
    msg_type = json.loads(header).get("msg_type", "")
    if msg_type in COUNTED:
        key, idx, final = extract(msg_type, json.loads(content))
        return (t, msg_type, key, len(content), idx, final)
    if msg_type == "stream" and b"rate exceeded" in content:
        c = json.loads(content)
        if c.get("name") == "stderr" and RATE_WARNING in c.get("text", ""):
            return (t, "warn", c["text"].splitlines()[0], 0, -1, False)
    return None


def _reader_main(conn: Any) -> None:
    """A reader process: ("open", kind, target, token) ... ("drain", quiet, max) ... ("quit",)."""
    import zmq
    from websocket import WebSocketTimeoutException, create_connection

    ctx = zmq.Context()
    while True:
        cmd = conn.recv()
        if cmd[0] == "quit":
            return
        _, kind, target, token = cmd
        ws = sub = None
        try:
            if kind == "ws":
                ws = create_connection(
                    target,
                    header=[f"Authorization: token {token}"],
                    subprotocols=["v1.kernel.websocket.jupyter.org"],
                    timeout=30,
                )
                ws.settimeout(0.05)
            else:
                sub = ctx.socket(zmq.SUB)
                sub.setsockopt(zmq.RCVHWM, 0)
                sub.setsockopt(zmq.SUBSCRIBE, b"")
                sub.connect(target)
        except Exception as exc:
            conn.send(("error", repr(exc)))
            continue
        conn.send(("ready",))
        cpu0 = time.process_time()
        records: list[Record] = []
        last_counted = time.monotonic()
        draining: tuple[float, float, float] | None = None  # (since, quiet, max)
        while True:
            t: float | None = None
            parts: tuple[bytes, bytes] | None = None
            if ws is not None:
                try:
                    _op, raw = ws.recv_data()
                except WebSocketTimeoutException:
                    raw = None
                except Exception:  # closed under us
                    raw = None
                    draining = draining or (time.monotonic(), 0.0, 0.0)
                if raw:
                    t = time.monotonic()
                    if isinstance(raw, str):
                        raw = raw.encode()
                    nparts = int.from_bytes(raw[:8], "little")
                    offs = [
                        int.from_bytes(raw[8 * (i + 1) : 8 * (i + 2)], "little")
                        for i in range(nparts)
                    ]
                    if raw[offs[0] : offs[1]] == b"iopub" and nparts >= 6:
                        parts = (raw[offs[1] : offs[2]], raw[offs[4] : offs[5]])
            elif sub is not None and sub.poll(50):
                frames = sub.recv_multipart(copy=True)
                t = time.monotonic()
                i = frames.index(b"<IDS|MSG>")
                parts = (frames[i + 2], frames[i + 5])
            if parts is not None and t is not None:
                rec = _record(t, *parts)
                if rec is not None:
                    records.append(rec)
                    last_counted = t
            if draining is None and conn.poll():
                _, quiet, max_wait = conn.recv()
                draining = (time.monotonic(), quiet, max_wait)
            if draining is not None:
                now = time.monotonic()
                since, quiet, max_wait = draining
                if (now - max(last_counted, since) >= quiet) or now - since >= max_wait:
                    break
        if ws is not None:
            with contextlib.suppress(Exception):
                ws.close()
        if sub is not None:
            sub.close(linger=0)
        conn.send(("records", records, time.process_time() - cpu0))


class Reader:
    """A reader process (see ``_reader_main``); reusable across runs."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_reader_main, args=(child,), daemon=True)
        self._proc.start()

    def open(self, kind: str, target: str, token: str = "", timeout: float = 60) -> None:
        self._conn.send(("open", kind, target, token))
        if not self._conn.poll(timeout):
            raise TimeoutError(f"{kind} reader did not connect to {target}")
        reply = self._conn.recv()
        if reply[0] != "ready":
            raise RuntimeError(f"{kind} reader: {reply[1]}")

    def drain(self, quiet: float, max_wait: float) -> None:
        self._conn.send(("drain", quiet, max_wait))

    def records(self, timeout: float) -> tuple[list[Record], float]:
        """The records since ``open`` and the CPU seconds the reader spent on them."""
        if not self._conn.poll(timeout):
            raise TimeoutError("reader did not finish")
        _, records, cpu = self._conn.recv()
        return list(records), float(cpu)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.send(("quit",))
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()


# ----------------------------------------------------------------------- server
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rate_limit_defaults() -> dict[str, Any]:
    """The installed jupyter_server's IOPub limits (class defaults)."""
    import jupyter_server
    from jupyter_server.services.kernels.connection.channels import (
        ZMQChannelsWebsocketConnection as C,
    )

    return {
        "jupyter_server": jupyter_server.__version__,
        "limit_rate": C.limit_rate.default_value,
        "iopub_msg_rate_limit": C.iopub_msg_rate_limit.default_value,
        "iopub_data_rate_limit": C.iopub_data_rate_limit.default_value,
        "rate_limit_window": C.rate_limit_window.default_value,
    }


_SERVER_EXTENSIONS = (
    "jupyterlab",
    "notebook",
    "notebook_shim",
    "jupyter_lsp",
    "jupyter_server_terminals",
)


class Server:
    """``jupyter server`` on 127.0.0.1 with private config/runtime dirs; stopped on exit."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}/"
        self.runtime = workdir / "runtime"
        root = workdir / "root"
        for d in (self.runtime, root, workdir / "config"):
            d.mkdir(parents=True, exist_ok=True)
        self.counts_dir = workdir / "counts"
        self.counts_dir.mkdir(exist_ok=True)
        pythonpath = os.pathsep.join(p for p in (str(BENCH_DIR), os.environ.get("PYTHONPATH")) if p)
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(self.runtime),
            "PYTHONPATH": pythonpath,
            "NBS_BENCH_COUNTS_DIR": str(self.counts_dir),
            "JUPYTER_CONFIG_DIR": str(workdir / "config"),
            "JUPYTER_PLATFORM_DIRS": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        }
        args = [
            sys.executable,
            "-m",
            "jupyter_server",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            "--ServerApp.open_browser=False",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.kernel_websocket_connection_class=_server_ext.CountingConnection",
            # Lab's, Notebook's, LSP's and the terminals' server extensions are not on the
            # kernel websocket's path; not loading them starts the server faster
            "--ServerApp.jpserver_extensions={"
            + ", ".join(f"{e!r}: False" for e in _SERVER_EXTENSIONS)
            + "}",
        ]
        if hasattr(os, "getuid") and os.getuid() == 0:
            args.append("--ServerApp.allow_root=True")
        self.log_path = workdir / "server.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            args, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.api("GET", "api/status", timeout=2)
                break
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"jupyter server did not start; see {self.log_path}"
                    ) from None
                time.sleep(0.2)

    def api(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def start_kernel(self) -> str:
        return str(self.api("POST", "api/kernels", {"name": "python3"})["id"])

    def connection_file(self, kernel_id: str, timeout: float = 30) -> Path:
        path = self.runtime / f"kernel-{kernel_id}.json"
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no connection file for kernel {kernel_id}")
            time.sleep(0.05)
        return path

    def ws_url(self, kernel_id: str) -> str:
        return (
            f"ws://127.0.0.1:{self.port}/api/kernels/{kernel_id}/channels"
            f"?session_id={uuid.uuid4().hex}"
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(Exception):
                for k in self.api("GET", "api/kernels", timeout=5):
                    self.api("DELETE", f"api/kernels/{k['id']}", timeout=10)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self._log.close()


# ----------------------------------------------------------------------- kernel
class Kernel:
    """One kernel behind the server, with a direct shell client for cells and probes."""

    def __init__(self, server: Server) -> None:
        from jupyter_client.blocking.client import BlockingKernelClient

        self.server = server
        self.id = server.start_kernel()
        cf = server.connection_file(self.id)
        info = json.loads(cf.read_text())
        self.iopub_url = f"{info['transport']}://{info['ip']}:{info['iopub_port']}"
        self.kc = BlockingKernelClient()
        self.kc.load_connection_file(str(cf))
        self.kc.start_channels(iopub=False, stdin=False, hb=False, control=False)
        self._replies: dict[str, dict[str, Any]] = {}
        self.reply(self.kc.kernel_info(), timeout=60)

    def reply(self, msg_id: str, timeout: float) -> dict[str, Any]:
        """The shell reply to ``msg_id`` (replies to other requests are kept for later)."""
        deadline = time.monotonic() + timeout
        while msg_id not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to {msg_id} within {timeout} s")
            try:
                msg = self.kc.get_shell_msg(timeout=left)
            except Exception:
                continue
            self._replies[msg["parent_header"].get("msg_id", "")] = msg
        return self._replies.pop(msg_id)

    def execute(self, code: str, timeout: float = 120) -> dict[str, Any]:
        reply = self.reply(self.kc.execute(code, store_history=False), timeout)
        if reply["content"]["status"] != "ok":
            c = reply["content"]
            raise RuntimeError(f"{c.get('ename')}: {c.get('evalue')}")
        return reply

    def probe(self, timeout: float = 120) -> float:
        """Seconds a trivial cell takes from request to reply."""
        t0 = time.monotonic()
        self.reply(self.kc.execute("1", store_history=False), timeout)
        return time.monotonic() - t0

    def interrupt(self) -> None:
        with contextlib.suppress(Exception):
            self.server.api("POST", f"api/kernels/{self.id}/interrupt")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.kc.stop_channels()


# -------------------------------------------------------------------------- run
@dataclass
class Run:
    """One stream run: its setting and the raw observations."""

    way: str
    rate: float
    streams: int
    rep: int
    pass_: str  # "wire", "probe" or "both"
    n: int
    report: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    ws: list[Record] = field(default_factory=list)
    zmq: list[Record] = field(default_factory=list)
    probes: list[float] = field(default_factory=list)
    idle: list[float] = field(default_factory=list)
    ws_cpu: float = math.nan
    zmq_cpu: float = math.nan
    t_send: float = 0.0
    cell_s: float = math.nan
    error: str | None = None


def passes_for(cfg: Config, way: str) -> tuple[str, ...]:
    """A main-thread way's probe waits in the kernel's queue until the cell ends, so it
    cannot reset the rate-limit window mid-stream: one pass measures both."""
    if way == CONTROL:
        return ("probe",)  # it sends nothing
    if cfg.separate_passes or way in FREE_WAYS:
        return ("wire", "probe")
    return ("both",)


def run_once(
    cfg: Config,
    kernel: Kernel,
    server: Server,
    readers: tuple[Reader, Reader | None],
    way: str,
    rate: float,
    streams: int,
    rep: int,
    pass_: str,
    workdir: Path,
) -> Run:
    """Set up, record, stream, collect (see the module docstring)."""
    n = cfg.pieces(rate)
    run = Run(way, rate, streams, rep, pass_, n)
    out = workdir / f"report-{uuid.uuid4().hex}.json"
    counts = server.counts_dir / f"counts-{kernel.id}.json"
    counts.unlink(missing_ok=True)
    ws_reader, zmq_reader = readers
    zmq = zmq_reader if pass_ != "probe" else None
    probing = pass_ in ("probe", "both")
    kernel.execute(
        f"_nbs_bench.setup({way!r}, streams={streams}, n={n}, rate={rate!r}, "
        f"jitter={cfg.jitter!r}, seed={cfg.seed}, budget={cfg.budget!r}, "
        f"interval={cfg.interval!r}, panel_site={cfg.panel_site!r})"
    )
    ws_reader.open("ws", server.ws_url(kernel.id), server.token)
    if zmq is not None:
        zmq.open("zmq", kernel.iopub_url)
    time.sleep(0.3)  # the server's kernel_info nudge; a SUB socket's subscription
    if probing:
        for _ in range(cfg.idle_probes):
            run.idle.append(kernel.probe())
            time.sleep(0.02)
    timeout = cfg.budget + n / rate + 60
    run.t_send = time.monotonic()
    start_id = kernel.kc.execute(f"_nbs_bench.start({str(out)!r})", store_history=False)
    deadline = run.t_send + timeout
    next_probe = run.t_send + cfg.probe_interval / 2  # a 0.2 s stream still gets probed
    while not out.exists():
        now = time.monotonic()
        if now > deadline:
            run.error = f"no report after {timeout:.0f} s"
            kernel.interrupt()
            break
        if probing and now >= next_probe:
            run.probes.append(kernel.probe(timeout=timeout))
            next_probe = max(next_probe + cfg.probe_interval, time.monotonic())
        else:
            time.sleep(0.005 if probing else 0.02)
    try:
        reply = kernel.reply(start_id, timeout=30)
        run.cell_s = time.monotonic() - run.t_send
        if reply["content"]["status"] != "ok":
            run.error = f"{reply['content'].get('ename')}: {reply['content'].get('evalue')}"
    except TimeoutError as exc:
        run.error = str(exc)
    ws_reader.drain(cfg.drain_quiet, cfg.drain_max)
    if zmq is not None:
        zmq.drain(cfg.drain_quiet, cfg.drain_max)
    run.ws, run.ws_cpu = ws_reader.records(cfg.drain_max + 30)
    if zmq is not None:
        run.zmq, run.zmq_cpu = zmq.records(cfg.drain_max + 30)
    if out.exists():
        run.report = json.loads(out.read_text())
        out.unlink()
        if run.report.get("error"):
            run.error = run.report["error"]
    deadline = time.monotonic() + 10  # the server writes its counts when the websocket closes
    while not counts.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    if counts.exists():
        run.server = json.loads(counts.read_text())
    return run


# ---------------------------------------------------------------------- figures
def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile (nan for no values)."""
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def _peak(times: list[float], window: float = 1.0) -> int:
    """The most messages in any ``window`` seconds."""
    best, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window:
            j += 1
        best = max(best, i - j + 1)
    return best


def _view(
    records: list[Record], keys: list[str], sched: list[float], t0s: list[float | None], n: int
) -> dict[str, Any]:
    """What one client saw: messages, bytes, rate, per-piece lag, text shown at the end."""
    msgs = [r for r in records if r[1] in COUNTED]
    times = [r[0] for r in msgs]
    lags: list[float] = []
    first: list[float] = []  # first piece -> client, per stream
    final: list[float] = []  # last piece -> client, per stream that got it
    shown = complete = 0
    for key, t0 in zip(keys, t0s, strict=True):
        best = last = -1
        for t, _kind, k, _b, idx, _final in msgs:
            if k != key or idx < 0:
                continue
            last = idx
            if idx > best and t0 is not None:
                for i in range(best + 1, min(idx, n - 1) + 1):
                    lags.append(t - (t0 + sched[i]))
                if best < 0:
                    first.append(t - (t0 + sched[0]))
                if idx >= n - 1 > best:
                    final.append(t - (t0 + sched[n - 1]))
                best = idx
        shown += last + 1
        complete += last == n - 1
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    valid_t0 = [t for t in t0s if t is not None]
    return {
        "msgs": len(msgs),
        "bytes": sum(r[3] for r in msgs),
        "warnings": sum(1 for r in records if r[1] == "warn"),
        # over at least 1 s, like the peak: a burst of 20 messages in 50 ms is not 400/s
        "rate_mean": len(msgs) / max(span, 1.0),
        "rate_peak": _peak(times),
        "lag_p50": quantile(lags, 0.5) * 1000,
        "lag_p95": quantile(lags, 0.95) * 1000,
        "lag_max": max(lags) * 1000 if lags else math.nan,
        "first_lag_max": max(first) * 1000 if first else math.nan,
        "last_lag_max": max(final) * 1000 if final else math.nan,
        "shown": shown / (n * len(keys)) if keys else math.nan,
        "complete": complete,
        "end_s": (times[-1] - min(valid_t0)) if times and valid_t0 else math.nan,
    }


def figures(run: Run) -> dict[str, Any]:
    """One row of figures for ``run`` (times in ms unless named ``_s``)."""
    rep = run.report
    row: dict[str, Any] = {
        "way": run.way,
        "rate": run.rate,
        "streams": run.streams,
        "rep": run.rep,
        "pass": run.pass_,
        "pieces": run.n,
        "error": run.error,
        "cell_s": run.cell_s,
    }
    if run.probes:
        ms = [p * 1000 for p in run.probes]
        row.update(
            {
                "probes": ms,
                "probe_p50": quantile(ms, 0.5),
                "probe_p95": quantile(ms, 0.95),
                "probe_max": max(ms),
            }
        )
    if run.idle:
        row["idle"] = [p * 1000 for p in run.idle]
        row["idle_p50"] = statistics.median(row["idle"])
    if not rep:
        return row
    n, keys, t0s = rep["n"], rep["keys"], rep["t0"]
    sched = schedule(n, rep["rate"], rep["jitter"], rep["seed"])
    text_bytes = rep["text_chars"] * len(keys)  # the text is ASCII
    sent = sum(rep.get("sent", {}).values())
    sent_bytes = sum(rep.get("sent_bytes", {}).values())
    arrived = sum(v for k, v in run.server.get("arrived", {}).items() if k in COUNTED)
    dropped = sum(v for k, v in run.server.get("dropped", {}).items() if k in COUNTED)
    ws = _view(run.ws, keys, sched, t0s, n)
    produced = rep.get("produced") or [0]
    row.update(
        {
            "stream_s": sched[-1],
            "text_bytes": text_bytes,
            "produced": sum(produced) / (n * len(produced)),
            "gave_up": bool(rep.get("gave_up")),
            "sent": sent,
            "sent_bytes": sent_bytes,
            "bytes_x_text": sent_bytes / text_bytes if text_bytes else math.nan,
            "recv": ws["msgs"],
            "recv_bytes": ws["bytes"],
            "lost": sent - ws["msgs"],
            "lost_queue": sent - arrived if run.server else math.nan,
            "lost_limit": dropped if run.server else math.nan,
            "warnings": ws["warnings"],
            "rate_peak": ws["rate_peak"],
            "rate_mean": ws["rate_mean"],
            "lag_p50": ws["lag_p50"],
            "lag_p95": ws["lag_p95"],
            "lag_max": ws["lag_max"],
            "first_lag_max": ws["first_lag_max"],
            "last_lag_max": ws["last_lag_max"],
            "shown": ws["shown"],
            "complete": ws["complete"],
            "end_s": ws["end_s"],
            "ws_reader_cpu_s": run.ws_cpu,
        }
    )
    if run.zmq:
        zm = _view(run.zmq, keys, sched, t0s, n)
        row.update(
            {
                "zmq_msgs": zm["msgs"],
                "zmq_lag_p50": zm["lag_p50"],
                "zmq_lag_p95": zm["lag_p95"],
                "zmq_rate_peak": zm["rate_peak"],
                "zmq_reader_cpu_s": run.zmq_cpu,
            }
        )
    for k in ("deltas_sent", "publishes", "final_text_ok", "statuses", "flush_gaps_ms",
              "held_ms"):
        if k in rep:
            row[k] = rep[k]
    if "delta_text_bytes" in rep:
        row["delta_x_text"] = rep["delta_text_bytes"] / text_bytes
    return row


WIRE_KEYS = (
    "stream_s",
    "produced",
    "sent",
    "sent_bytes",
    "bytes_x_text",
    "recv",
    "recv_bytes",
    "lost",
    "lost_queue",
    "lost_limit",
    "warnings",
    "rate_peak",
    "rate_mean",
    "lag_p50",
    "lag_p95",
    "lag_max",
    "first_lag_max",
    "last_lag_max",
    "shown",
    "complete",
    "end_s",
    "cell_s",
    "zmq_msgs",
    "zmq_lag_p50",
    "zmq_lag_p95",
    "zmq_rate_peak",
    "deltas_sent",
    "publishes",
    "delta_x_text",
)


def aggregate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (way, rate, streams): wire figures are medians over repetitions; probe
    samples are pooled over repetitions before taking percentiles."""
    groups: dict[tuple[str, float, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["way"], r["rate"], r["streams"]), []).append(r)
    out: list[dict[str, Any]] = []
    for (way, rate, streams), rs in groups.items():
        row: dict[str, Any] = {
            "way": way,
            "rate": rate,
            "streams": streams,
            "pieces": rs[0]["pieces"],
        }
        wire = [r for r in rs if r["pass"] in ("wire", "both") and "sent" in r]
        probe = [r for r in rs if r["pass"] in ("probe", "both")]
        row["reps"] = len(wire)
        for k in WIRE_KEYS:
            vals = [r[k] for r in wire if isinstance(r.get(k), (int, float))]
            vals = [v for v in vals if not math.isnan(v)]
            if vals:
                row[k] = statistics.median(vals)
        row["gave_up"] = sum(1 for r in wire if r.get("gave_up"))
        row["final_text_ok"] = all(r.get("final_text_ok", True) for r in rs)
        row["errors"] = sorted({r["error"] for r in rs if r.get("error")})
        probes = [p for r in probe for p in r.get("probes", [])]
        idle = [p for r in probe for p in r.get("idle", [])]
        if probes:
            row.update(
                {
                    "probe_n": len(probes),
                    "probe_p50": quantile(probes, 0.5),
                    "probe_p95": quantile(probes, 0.95),
                    "probe_max": max(probes),
                }
            )
        if idle:
            row["idle_p50"] = statistics.median(idle)
        if probes and idle:
            row["probe_p50_x_idle"] = row["probe_p50"] / row["idle_p50"]
            row["probe_p95_x_idle"] = row["probe_p95"] / row["idle_p50"]
        out.append(row)
    return out


# ------------------------------------------------------------------------ matrix
def panel_version(site: str) -> tuple[str | None, str | None]:
    """(Panel's version, None) if it imports from the venv or ``site``; else (None, why)."""
    code = "import sys; sys.path.append(sys.argv[1]); import panel; print(panel.__version__)"
    try:
        res = subprocess.run([sys.executable, "-c", code, site], capture_output=True,
                             text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None, "importing panel took over 120 s"
    if res.returncode != 0:
        last = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ""
        return None, f"not installed ({last}); pip install --target {site} panel"
    return res.stdout.strip(), None


@contextlib.contextmanager
def session(
    cfg: Config, ways: tuple[str, ...]
) -> Iterator[tuple[Server, dict[str, Kernel], tuple[Reader, Reader | None], Path]]:
    """A server, one kernel per way (each with the kernel-side module loaded), two readers."""
    workdir = Path(tempfile.mkdtemp(prefix="nbs-bench-"))
    server: Server | None = None
    kernels: dict[str, Kernel] = {}
    readers: list[Reader] = []
    try:
        readers = [Reader()] + ([Reader()] if cfg.zmq_reader else [])
        server = Server(workdir)
        for way in ways:
            kernels[way] = Kernel(server)
        for k in kernels.values():
            k.execute(
                f"import sys; sys.path.insert(0, {str(BENCH_DIR)!r}); "
                f"sys.path.insert(0, {str(REPO)!r}); import _ways as _nbs_bench"
            )
        yield server, kernels, (readers[0], readers[1] if len(readers) > 1 else None), workdir
    finally:
        for k in kernels.values():
            k.close()
        if server is not None:
            server.stop()
        for r in readers:
            r.close()
        shutil.rmtree(workdir, ignore_errors=True)


def run_matrix(
    cfg: Config, progress: Callable[[str], None] = print
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every (rep, rate, streams, way, pass), interleaved so that a noisy machine hits all
    ways alike. Returns (rows of figures, ways skipped -> why)."""
    skipped: dict[str, str] = {}
    ways = tuple(cfg.ways) + ((CONTROL,) if cfg.control and CONTROL not in cfg.ways else ())
    if "panel" in ways:
        _version, why = panel_version(cfg.panel_site)
        if why:
            skipped["panel"] = why
            ways = tuple(w for w in ways if w != "panel")
    rows: list[dict[str, Any]] = []
    with session(cfg, ways) as (server, kernels, readers, workdir):
        for rep in range(cfg.reps):
            for rate in cfg.rates:
                for streams in cfg.streams:
                    for way in ways:
                        if way in skipped:
                            continue
                        for pass_ in passes_for(cfg, way):
                            t = time.monotonic()
                            try:
                                run = run_once(
                                    cfg,
                                    kernels[way],
                                    server,
                                    readers,
                                    way,
                                    rate,
                                    streams,
                                    rep,
                                    pass_,
                                    workdir,
                                )
                            except Exception as exc:  # one broken way must not end the session
                                if way == "panel":
                                    skipped[way] = f"{type(exc).__name__}: {exc}"
                                run = Run(
                                    way,
                                    rate,
                                    streams,
                                    rep,
                                    pass_,
                                    cfg.pieces(rate),
                                    error=f"{type(exc).__name__}: {exc}",
                                )
                            row = figures(run)
                            rows.append(row)
                            progress(_progress_line(row, time.monotonic() - t))
    return rows, skipped


def _progress_line(row: dict[str, Any], wall: float) -> str:
    base = (
        f"rep {row['rep']} {row['way']:>11} {row['rate']:>6g}/s x{row['streams']} "
        f"{row['pass']:<5} {wall:5.1f} s"
    )
    if row.get("error"):
        return f"{base}  ERROR {row['error']}"
    parts = []
    if row["pass"] != "probe":
        parts.append(
            f"sent {row.get('sent')} recv {row.get('recv')} "
            f"warn {row.get('warnings')} lag p95 {row.get('lag_p95', math.nan):.0f} ms"
        )
    if row["pass"] != "wire":
        parts.append(
            f"probe p50 {row.get('probe_p50', math.nan):.0f} ms "
            f"(idle {row.get('idle_p50', math.nan):.1f} ms)"
        )
    return f"{base}  " + "; ".join(parts)


def config_dict(cfg: Config) -> dict[str, Any]:
    return asdict(cfg)
