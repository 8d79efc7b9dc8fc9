"""Shared fixtures: a real JupyterLab server, notebooks written into it, browser scenarios.

``jupyterlab`` (session scope) starts ``jupyter lab`` from the running interpreter's
environment on 127.0.0.1, on a free port, with a random token, offline
(``HF_HUB_OFFLINE=1``, no news feed, no update check, no extension-manager index),
with its config, runtime, settings and workspace directories in a temporary
folder so nothing of the user's own JupyterLab set-up leaks in. Its root is a
temporary folder holding a copy of the repository's ``notebooks/``; tests add
their own notebooks with :meth:`JupyterLab.write_notebook`. The server runs in
its own process group and is stopped at the end through that group and the
kernels it started (nothing else is touched).

``run_scenario`` runs ``node tests/browser/<name>.mjs`` against that server and
returns the JSON the scenario prints on its last stdout line; see
``tests/browser/lab.mjs`` for the scenario side. Screenshots and the server log
land in ``test-artifacts/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
BROWSER_DIR = REPO / "tests" / "browser"
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("NBS_CHROMIUM", "/usr/bin/chromium")

#: environment every child process (server, kernels, scenarios) gets: nothing
#: may reach a model hub or the network
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    "JUPYTER_PLATFORM_DIRS": "1",
}

#: JupyterLab user settings written into the server's private settings dir
LAB_SETTINGS = {
    # no "would you like news?" toast, no news or update requests from the page
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def _parent_death_signal() -> Callable[[], None] | None:
    """A preexec_fn (Linux) that makes the child get SIGTERM when the test process dies.

    So a pytest killed from outside (a CI timeout) leaves no server or browser
    behind; JupyterLab shuts its kernels down on SIGTERM. Everything is looked
    up here, before any fork: the child only makes one libc call.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def preexec() -> None:
        prctl(pr_set_pdeathsig, sigterm)

    return preexec


_PREEXEC = _parent_death_signal()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_notebook(cells: Sequence[str | tuple[str, str]]) -> dict[str, Any]:
    """An nbformat-4 notebook on the ``python3`` kernel from cell sources.

    Each cell is a code source, or a ``(cell_type, source)`` pair with
    ``cell_type`` "code" or "markdown".
    """
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    for cell in cells:
        kind, source = ("code", cell) if isinstance(cell, str) else cell
        if kind == "code":
            nb.cells.append(nbformat.v4.new_code_cell(source))
        elif kind == "markdown":
            nb.cells.append(nbformat.v4.new_markdown_cell(source))
        else:
            raise ValueError(f"unknown cell type {kind!r}")
    nbformat.validate(nb)
    return dict(nb)


@dataclass
class JupyterLab:
    """A running JupyterLab server (see the module docstring)."""

    url: str  # base URL, ends with "/"
    token: str
    root_dir: Path
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """Call the server's REST API (``path`` relative to the base URL); JSON or None."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path.lstrip("/"),
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def write_notebook(self, relpath: str, cells: Sequence[str | tuple[str, str]]) -> str:
        """Write a notebook under the server's root; returns its path as Lab names it."""
        import nbformat

        target = self.root_dir / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.from_dict(make_notebook(cells)), str(target))
        return Path(relpath).as_posix()

    def shutdown_kernels(self) -> None:
        """Shut down every session and kernel of this server (between scenarios)."""
        with contextlib.suppress(OSError, urllib.error.URLError):
            for session in self.api("GET", "api/sessions"):
                with contextlib.suppress(OSError, urllib.error.URLError):
                    self.api("DELETE", f"api/sessions/{session['id']}")
            for kernel in self.api("GET", "api/kernels"):
                with contextlib.suppress(OSError, urllib.error.URLError):
                    self.api("DELETE", f"api/kernels/{kernel['id']}")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _wait_for_status(lab: JupyterLab, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if lab.process.poll() is not None:
            raise RuntimeError(
                f"jupyter lab exited with {lab.process.returncode}:\n{lab.log_tail()}"
            )
        try:
            lab.api("GET", "api/status", timeout=2.0)
            return
        except (OSError, urllib.error.URLError) as exc:
            last = exc
        time.sleep(0.2)  # polling another process until it answers
    raise RuntimeError(
        f"jupyter lab did not answer /api/status in {timeout} s ({last}):\n{lab.log_tail()}"
    )


def _descendants(pid: int) -> list[Any]:
    """psutil handles on the live descendants of ``pid`` (a process we started)."""
    try:
        import psutil

        return list(psutil.Process(pid).children(recursive=True))
    except Exception:  # psutil missing, or the process is already gone
        return []


def _kill_all(processes: list[Any], grace: float = 5.0) -> None:
    """Terminate, then kill, the psutil handles that are still alive."""
    for child in processes:
        with contextlib.suppress(Exception):
            child.terminate()
    for child in processes:
        with contextlib.suppress(Exception):
            child.wait(grace)
        with contextlib.suppress(Exception):
            child.kill()


def _stop_process_tree(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Stop a process we started in its own group, and the descendants it left."""
    descendants = _descendants(proc.pid)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    _kill_all(descendants)  # kernels run in process groups of their own


@contextlib.contextmanager
def start_jupyterlab(
    root_dir: Path,
    home: Path,
    startup_timeout: float = 90.0,
    *,
    python: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    log_name: str = "jupyterlab-server.log",
) -> Iterator[JupyterLab]:
    """Start JupyterLab on ``root_dir``; private dirs under ``home``; stop it on exit.

    ``python``: the interpreter whose environment runs the server and its
    kernels (default: this one); its folder goes first on ``PATH``. ``env``: the
    environment to start from (default: this process's), under
    :data:`OFFLINE_ENV` and the private dirs. The log goes to
    ``test-artifacts/<log_name>``.
    """
    for sub in ("config", "data", "runtime", "settings", "workspaces", "ipython"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    for relpath, settings in LAB_SETTINGS.items():
        target = home / "settings" / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(settings))

    port = free_port()
    token = secrets.token_hex(16)
    python = str(python or sys.executable)
    bin_dir = str(Path(python).parent)
    base_env = os.environ if env is None else env
    child_env = {
        **base_env,
        **OFFLINE_ENV,
        "PATH": bin_dir + os.pathsep + base_env.get("PATH", ""),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "IPYTHONDIR": str(home / "ipython"),
    }
    child_env.pop("JUPYTER_TOKEN", None)
    cmd = [
        python,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.terminals_enabled=False",
        # no requests to the outside world from the server or the page
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        # window.jupyterapp, for the scenarios' commands and kernel status
        "--LabApp.expose_app_in_browser=True",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers and CI machines often run as root
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / log_name
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=root_dir,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_PREEXEC,
        )
    lab = JupyterLab(
        url=f"http://127.0.0.1:{port}/",
        token=token,
        root_dir=root_dir,
        port=port,
        log_path=log_path,
        process=proc,
    )
    try:
        _wait_for_status(lab, startup_timeout)
        yield lab
    finally:
        if proc.poll() is None:
            lab.shutdown_kernels()
        _stop_process_tree(proc)


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    """A JupyterLab server for the whole session; root holds a copy of notebooks/."""
    base = tmp_path_factory.mktemp("jupyterlab")
    root = base / "root"
    root.mkdir()
    if (REPO / "notebooks").is_dir():
        shutil.copytree(
            REPO / "notebooks",
            root / "notebooks",
            ignore=shutil.ignore_patterns(".ipynb_checkpoints"),
        )
    with start_jupyterlab(root, base / "home") as lab:
        yield lab


class ScenarioError(AssertionError):
    """A browser scenario failed; the message carries its error, stderr and screenshot."""


def _scenario_failure(
    name: str, why: str, stdout: str, stderr: str, lab: JupyterLab
) -> ScenarioError:
    result: Any = None
    lines = [line for line in stdout.splitlines() if line.strip()]
    if lines:
        with contextlib.suppress(ValueError):
            result = json.loads(lines[-1])
    parts = [f"browser scenario {name!r} {why}"]
    if isinstance(result, dict):
        if result.get("error"):
            parts.append(f"error: {result['error']}")
        if result.get("screenshot"):
            parts.append(f"screenshot: {result['screenshot']}")
        if result.get("console"):
            parts.append("browser console:\n  " + "\n  ".join(result["console"][-20:]))
    parts.append("stderr (tail):\n" + stderr[-4000:])
    parts.append("server log (tail):\n" + lab.log_tail(2000))
    return ScenarioError("\n".join(parts))


def _check_browser_tools() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH (browser tests need Node 20+; run `make test`)")
    if not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
        pytest.fail(
            "tests/browser/node_modules is missing: run `make test` (or `npm ci` in tests/browser)"
        )
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run `make chromium` (apt-get install chromium)")
    return node


RunScenario = Callable[..., dict[str, Any]]


@pytest.fixture
def run_scenario(jupyterlab: JupyterLab, request: pytest.FixtureRequest) -> Iterator[RunScenario]:
    """``run_scenario(name, *, timeout=120, **params) -> dict``: see :func:`scenario_runner`,
    against the session's ``jupyterlab``."""
    yield scenario_runner(jupyterlab, request.node.name)


def scenario_runner(jupyterlab: JupyterLab, test_name: str) -> RunScenario:
    """``run(name, *, timeout=120, **params) -> dict`` against ``jupyterlab``.

    Runs ``node tests/browser/<name>.mjs`` with ``NBS_URL``, ``NBS_TOKEN``,
    ``NBS_PARAMS`` (the params as JSON), ``NBS_ARTIFACTS``, ``NBS_ARTIFACT``
    (a file-name prefix: the test's name) and ``NBS_TIMEOUT_MS``; returns the
    JSON object on its last stdout line. On failure or timeout raises
    :class:`ScenarioError` with the scenario's error, stderr and screenshot path.
    Every kernel of the server is shut down after each scenario.
    """
    node = _check_browser_tools()
    test_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in test_name)
    runs = 0

    def run(name: str, *, timeout: float = 120.0, **params: Any) -> dict[str, Any]:
        nonlocal runs
        runs += 1
        script = BROWSER_DIR / f"{name}.mjs"
        if not script.is_file():
            raise FileNotFoundError(script)
        ARTIFACTS.mkdir(exist_ok=True)
        artifact = test_name if runs == 1 else f"{test_name}-{runs}"
        env = {
            **os.environ,
            **OFFLINE_ENV,
            "NBS_URL": jupyterlab.url,
            "NBS_TOKEN": jupyterlab.token,
            "NBS_PARAMS": json.dumps(params),
            "NBS_ARTIFACTS": str(ARTIFACTS),
            "NBS_ARTIFACT": artifact,
            "NBS_CHROMIUM": CHROMIUM,
            # the scenario gives up a little earlier than we do, so that it can
            # still take its failure screenshot and report
            "NBS_TIMEOUT_MS": str(int(max(timeout - 10.0, timeout * 0.8) * 1000)),
        }
        proc = subprocess.Popen(
            [node, str(script)],
            cwd=BROWSER_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=_PREEXEC,
        )
        try:
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                # SIGTERM first: lab.mjs takes a screenshot, reports and closes
                # the browser; then the process tree we started goes
                descendants = _descendants(proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    stdout, stderr = proc.communicate(timeout=15)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    stdout, stderr = proc.communicate()
                _kill_all(descendants)
                raise _scenario_failure(
                    name, f"timed out after {timeout:.0f} s", stdout, stderr, jupyterlab
                ) from None
            if proc.returncode != 0:
                raise _scenario_failure(
                    name, f"exited with {proc.returncode}", stdout, stderr, jupyterlab
                )
            lines = [line for line in stdout.splitlines() if line.strip()]
            try:
                result = json.loads(lines[-1])
            except (IndexError, ValueError):
                raise _scenario_failure(
                    name, "printed no JSON result", stdout, stderr, jupyterlab
                ) from None
            if not isinstance(result, dict):
                raise _scenario_failure(
                    name, "printed a non-object result", stdout, stderr, jupyterlab
                )
            # kept whole beside the screenshots; shown with long lists cut (CI
            # logs keep only a failure's tail) with a failing test's captured output
            saved = ARTIFACTS / f"{artifact}.json"
            saved.write_text(json.dumps(result, indent=1), encoding="utf-8")
            print(f"scenario {name} ({artifact}; whole: {saved}): "
                  f"{json.dumps(_shortened(result), indent=1)}")
            return result
        finally:
            jupyterlab.shutdown_kernels()

    return run


def _shortened(value: Any, keep: int = 4) -> Any:
    """``value`` with every list longer than ``2 * keep + 1`` cut to its ends."""
    if isinstance(value, dict):
        return {k: _shortened(v, keep) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > 2 * keep + 1:
            cut = f"... {len(value) - 2 * keep} more ..."
            return [*map(_shortened, value[:keep]), cut, *map(_shortened, value[-keep:])]
        return [_shortened(v, keep) for v in value]
    return value


#: JupyterLab's theme setting, and the two themes the browser tests shoot
THEMES_SETTING = "lab/api/settings/@jupyterlab/apputils-extension:themes"
THEME_NAMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}


@pytest.fixture
def theme_setting(jupyterlab: JupyterLab) -> Iterator[Any]:
    """Set the server's theme setting; put JupyterLab Light back afterwards."""

    def set_theme(name: str) -> None:
        jupyterlab.api("PUT", THEMES_SETTING, {"raw": json.dumps({"theme": name})})

    try:
        yield set_theme
    finally:
        set_theme(THEME_NAMES["light"])


@pytest.fixture
def notebook_name(request: pytest.FixtureRequest) -> str:
    """A notebook file name unique to the current test (``<test name>.ipynb``)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)
    return f"{safe}-{secrets.token_hex(3)}.ipynb"


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Notebooks get the ``notebooks`` marker; tests marked ``gpu`` need CUDA: skipped,
    with the reason, on machines without it."""
    for item in items:
        if str(item.fspath).endswith(".ipynb"):
            item.add_marker(pytest.mark.notebooks)
    if any(item.get_closest_marker("gpu") for item in items) and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device (none here)")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)
