"""The package as pip users get it: the sdist and wheel built from this tree, and
fresh venvs kept between runs (a plain module, imported by the packaging tests).

* :func:`build_dist` builds ``(sdist, wheel)`` once per test process (the
  wheel from the sdist, without an isolated build environment: hatchling is in
  the dev extra), so test modules that all need the wheel share one build.
* :func:`cached_venv` makes a venv under ``$NBSTREAM_WHEEL_VENVS`` (default: a
  folder inside the running venv, so ``make distclean`` removes it too), named by
  what it was asked to hold, and keeps it: a second run asking for the same
  reuses it at once. It is built in place (its scripts' shebangs name their real path)
  under a file lock, and marked ready only when every install step succeeded, so a
  half-built venv is never used.
* :func:`clean_env` and :func:`run`: subprocesses that see neither the
  repository (no ``PYTHONPATH``) nor the test venv.

Everything runs on the test's thread.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "nbstream" / "static" / "widget.js"
LOADER = ROOT / "nbstream" / "static" / "loader.js"

_built: dict[str, tuple[Path, Path]] = {}


def clean_env() -> dict[str, str]:
    """The environment without anything that would put the repository on the path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(*args: str | Path, cwd: Path, timeout: float = 600) -> str:
    """Run a command in :func:`clean_env`; its stdout, or an assertion naming its output."""
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def build_dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(sdist, wheel)`` built from this tree (the wheel from the sdist), once per process."""
    if "dist" not in _built:
        if not BUNDLE.is_file():
            pytest.fail(f"{BUNDLE} is missing: run `make bundle` (make test builds it first)")
        out = tmp_path_factory.mktemp("dist")
        run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT, cwd=out)
        (sdist,) = out.glob("nbstream-*.tar.gz")
        (wheel,) = out.glob("nbstream-*.whl")
        _built["dist"] = (sdist, wheel)
    return _built["dist"]


def wheel_metadata(wheel: Path) -> Message:
    """The wheel's METADATA, parsed (``get_all("Requires-Dist")`` and friends)."""
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(z.read(name).decode())


def venvs_home() -> Path:
    """Where the venvs live (a real path: a venv's scripts name it in their shebangs)."""
    default = Path(sys.prefix) / "nbstream-wheel-venvs"
    return Path(os.environ.get("NBSTREAM_WHEEL_VENVS", default)).resolve()


def venv_key(parts: object) -> str:
    """A short, stable name for a venv holding ``parts`` (on this Python)."""
    return hashlib.sha256(json.dumps([sys.version, parts]).encode()).hexdigest()[:12]


#: a kept venv of the same kind unused for this long is removed when another is built
STALE_S = 3 * 24 * 3600


def cached_venv(kind: str, what: object, fill: Callable[[Path], None]) -> Path:
    """The python of the venv ``<kind>-<key of what>``; made and filled by ``fill(python)``
    if missing.

    ``what`` says what the venv holds (the requirements, the install lines): it
    names the venv and is written beside it, in ``ready``, whose time is updated on
    each use. ``fill`` installs it (and raises if a step fails: the next run starts
    over). Building a new venv of a ``kind`` removes that kind's venvs unused for
    :data:`STALE_S` (several worktrees may share the folder, each with its own key).
    """
    home = venvs_home()
    home.mkdir(parents=True, exist_ok=True)
    name = f"{kind}-{venv_key(what)}"
    target = home / name
    python = target / "env" / "bin" / "python"
    with open(home / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run building the same venv: wait for it
        ready = target / "ready"
        if not ready.is_file():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            run(sys.executable, "-m", "venv", target / "env", cwd=home)
            fill(python)
            ready.write_text(json.dumps(what, indent=1))
            _remove_stale(home, kind, keep=name)
        ready.touch()
    return python


def _remove_stale(home: Path, kind: str, keep: str) -> None:
    now = time.time()
    for other in home.glob(f"{kind}-*"):
        if other.name == keep or not other.is_dir():
            continue
        used = max(p.stat().st_mtime for p in (other, other / "ready") if p.exists())
        if now - used > STALE_S:
            shutil.rmtree(other, ignore_errors=True)
            (home / f"{other.name}.lock").unlink(missing_ok=True)
