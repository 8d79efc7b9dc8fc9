"""marimo and Voilà in a real browser: the chat renders, streams, finishes, and
Stop and the input box work; in `marimo run`, two sessions each get only their
own reply.

Each test starts its server (``marimo run examples/marimo_chat.py`` or
``voila`` on a notebook written here) from this environment on 127.0.0.1, in
its own process group, and stops that group at the end; then runs
``node tests/browser/<name>.mjs`` against it like ``run_scenario`` does for
JupyterLab.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import ARTIFACTS, BROWSER_DIR, CHROMIUM, OFFLINE_ENV, free_port

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
MARIMO_APP = ROOT / "examples" / "marimo_chat.py"


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server we started and everything in its process group."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(Exception):
        import psutil  # kernels a server started in groups of their own

        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()


@contextlib.contextmanager
def serve(cmd: list[str], url: str, log_name: str, cwd: Path, home: Path,
          timeout: float = 120) -> Iterator[Path]:
    """Run a server until ``url`` answers; yield its log path; stop its group after."""
    for sub in ("config", "data", "runtime", "ipython"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **OFFLINE_ENV,
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
           "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_DATA_DIR": str(home / "data"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "IPYTHONDIR": str(home / "ipython"),
           "MARIMO_SKIP_UPDATE_CHECK": "1", "HOME": str(home)}
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / log_name
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, f"{cmd[2]} exited:\n{log_path.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            assert time.monotonic() < deadline, f"{url} never answered:\n{log_path.read_text()[-3000:]}"
            time.sleep(0.2)  # polling a server that is starting
        yield log_path
    finally:
        _stop_group(proc)


def scenario(name: str, url: str, log_path: Path, artifact: str, timeout: float = 240) -> dict[str, Any]:
    """``node tests/browser/<name>.mjs`` against ``url``; the JSON it prints."""
    import shutil

    node = shutil.which("node")
    if node is None or not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
        pytest.fail("node and tests/browser/node_modules are needed: run `make test`")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run `make chromium`")
    env = {**os.environ, **OFFLINE_ENV, "NBS_URL": url, "NBS_TOKEN": "", "NBS_PARAMS": "{}",
           "NBS_ARTIFACTS": str(ARTIFACTS), "NBS_ARTIFACT": artifact, "NBS_CHROMIUM": CHROMIUM,
           "NBS_TIMEOUT_MS": str(int((timeout - 15) * 1000))}
    proc = subprocess.Popen([node, str(BROWSER_DIR / f"{name}.mjs")], cwd=BROWSER_DIR, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_group(proc)  # type: ignore[arg-type]
        stdout, stderr = proc.communicate()
    lines = [line for line in stdout.splitlines() if line.strip()]
    result = json.loads(lines[-1]) if lines else {}
    if proc.returncode != 0 or not result.get("ok"):
        raise AssertionError(
            f"scenario {name} failed: {result.get('error')}\nscreenshot: {result.get('screenshot')}"
            f"\nconsole: {result.get('console')}\nstderr: {stderr[-3000:]}"
            f"\nserver log: {log_path.read_text()[-3000:]}")
    print(json.dumps(result, indent=1))
    return result  # type: ignore[no-any-return]


def check_chat(result: dict[str, Any]) -> None:
    assert result["rendered"]
    first = result["first"]
    assert first["status"] == "done" and first["text"] == first["expected"]
    stopped = result["stopped"]
    # streamed: the long answer was seen `running` with part of its text (the scenario
    # clicks Stop only then), and it ends stopped with a prefix of the whole answer
    assert stopped["status"] == "stopped" and stopped["prefix"]
    assert 40 < stopped["length"] < stopped["full_length"]


def test_marimo_run_streams_stops_and_keeps_sessions_apart(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    cmd = [sys.executable, "-m", "marimo", "run", str(MARIMO_APP), "--host", "127.0.0.1",
           "--port", str(port), "--headless", "--no-token", "--no-sandbox"]
    with serve(cmd, url, "marimo-server.log", tmp_path, tmp_path / "home") as log_path:
        result = scenario("marimo", url, log_path, "test_marimo_run")
    check_chat(result)
    s = result["sessions"]
    assert s["b_started_empty"]
    assert s["a"]["status"] == "done" and s["a"]["text"] == s["a"]["expected"]
    assert s["b"]["status"] == "done" and s["b"]["text"] == s["b"]["expected"]
    assert not any("beta" in t for t in s["a_texts"]) and not any("alpha" in t for t in s["b_texts"])
    assert len(s["b_texts"]) == 1 and len(s["a_texts"]) == 3


VOILA_SOURCE = '''\
import time
from nbstream import ChatWidget
from nbstream.sources import IteratorSource

def answer(messages):
    question = messages[-1]["content"]
    words = 400 if question.startswith("long") else 12
    yield f"You said: {question}."
    for i in range(words):
        time.sleep(0.02)  # the pace of a small model
        yield f" word{i}"

ChatWidget(IteratorSource(answer), title="nbstream in Voilà")'''


def test_voila_renders_streams_and_stops(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(VOILA_SOURCE)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    (tmp_path / "chat.ipynb").write_text(nbformat.writes(nb))
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    cmd = [sys.executable, "-m", "voila", "chat.ipynb", "--no-browser", f"--port={port}",
           "--Voila.ip=127.0.0.1", "--VoilaConfiguration.show_tracebacks=True"]
    # readiness: a static file (GET / would execute the notebook in a kernel)
    ready = f"{url}voila/static/favicon.ico"
    with serve(cmd, ready, "voila-server.log", tmp_path, tmp_path / "home") as log_path:
        result = scenario("voila", url, log_path, "test_voila")
    check_chat(result)
