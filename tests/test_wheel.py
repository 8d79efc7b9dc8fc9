"""The package as a pip user gets it: sdist and wheel built, the wheel installed
into a fresh venv (no Node, no repository on the path), a chat streaming in a
real kernel started from that venv.

The venv holds only third-party packages (nbstream's base dependencies and
ipykernel, from pip's cache after the first run) and is kept between runs,
keyed by those requirements; the freshly built wheel is installed into it with
``--no-deps --force-reinstall`` on every run, and ``pip check`` proves its
dependencies are met. The build runs without an isolated build environment
(hatchling is in the dev extra), so a run takes seconds after the first.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _dist import (
    BUNDLE,
    LOADER,
    ROOT,
    build_dist,
    cached_venv,
    clean_env,
    run,
    wheel_metadata,
)
from _kernel import cell_idle, iopub
from _wire import body_parts, delta_keys
from packaging.requirements import Requirement

pytestmark = pytest.mark.wheel

KERNEL_REQUIREMENT = "ipykernel>=6.29,!=7.0.*"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(sdist, wheel)`` built from this tree (the wheel from the sdist)."""
    return build_dist(tmp_path_factory)


@pytest.fixture(scope="module")
def venv(dist: tuple[Path, Path]) -> Iterator[Path]:
    """The python of a venv holding nbstream's base dependencies, ipykernel and the wheel."""
    _, wheel = dist
    base = sorted(r for r in wheel_metadata(wheel).get_all("Requires-Dist")
                  if "extra ==" not in r)
    wanted = [*base, KERNEL_REQUIREMENT]

    def fill(python: Path) -> None:
        run(python, "-m", "pip", "install", "-q", *wanted, cwd=python.parent)

    yield cached_venv("base", wanted, fill)


@pytest.fixture(scope="module")
def installed(venv: Path, dist: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
              ) -> Path:
    _, wheel = dist
    cwd = tmp_path_factory.mktemp("user")
    run(venv, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel, cwd=cwd)
    run(venv, "-m", "pip", "check", cwd=cwd)
    return venv


def test_the_wheel_holds_the_package_and_the_bundle_only(dist: tuple[Path, Path]) -> None:
    _, wheel = dist
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert z.read("nbstream/static/widget.js") == BUNDLE.read_bytes()
    assert {n.split("/")[0] for n in names} == {"nbstream", f"{wheel.name.split('-py3')[0]}.dist-info"}
    leaked = [n for n in names if any(part in n for part in (
        "tests/", "conftest", "node_modules", "/js/", "benchmarks", "notebooks", ".ts", ".map",
        "__pycache__", "test_"))]
    assert leaked == []
    assert "nbstream/py.typed" in names and "nbstream/static/widget.css" in names
    # the loader, the chunks the runtime sends on demand, and marimo's whole front end
    for name in ("loader.js", "math.js", "highlight.js", "entities.js", "linkify.js",
                 "glyphs.js", "tools.js", "standalone.js"):
        assert f"nbstream/static/{name}" in names, name


def test_metadata_has_urls_license_and_extras(dist: tuple[Path, Path]) -> None:
    _, wheel = dist
    meta = wheel_metadata(wheel)
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Source", "Issues"} <= urls.keys()
    assert all(u.startswith("https://") for u in urls.values())
    assert meta["License-Expression"] == "MIT" and meta.get_all("License-File") == ["LICENSE"]
    with zipfile.ZipFile(wheel) as z:
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in z.namelist())
    extras: dict[str, set[str]] = {}
    for line in meta.get_all("Requires-Dist"):
        req = Requirement(line)
        for extra in ("transformers", "openai"):
            if req.marker is not None and req.marker.evaluate({"extra": extra}):
                extras.setdefault(extra, set()).add(req.name)
    assert {"torch", "transformers", "tokenizers", "gguf"} <= extras["transformers"]
    assert {"httpx", "httpx-sse"} <= extras["openai"]
    assert set(meta.get_all("Provides-Extra")) >= {"transformers", "openai"}


def test_the_sdist_rebuilds_without_build_outputs(dist: tuple[Path, Path]) -> None:
    sdist, _ = dist
    with tarfile.open(sdist) as t:
        names = [n.split("/", 1)[1] for n in t.getnames() if "/" in n]
    assert "LICENSE" in names and "js/package.json" in names and "pyproject.toml" in names
    assert not [n for n in names if "node_modules" in n or n.startswith((".venv", "dist/"))]


def test_extras_resolve_with_pip(installed: Path, dist: tuple[Path, Path], tmp_path: Path) -> None:
    _, wheel = dist
    report = run(installed, "-m", "pip", "install", "--dry-run", "-q", "--report", "-",
                 f"nbstream[openai] @ {wheel.as_uri()}", cwd=tmp_path)
    names = {item["metadata"]["name"].lower() for item in json.loads(report)["install"]}
    assert {"httpx", "httpx-sse"} <= names  # nbstream itself is installed already


def test_the_installed_wheel_imports_from_the_venv_with_the_bundle(
    installed: Path, tmp_path: Path
) -> None:
    out = run(installed, "-c", """
import json, sys, hashlib, nbstream
from nbstream import ChatWidget
from nbstream.sources import ScriptedSource
from nbstream.widgets.runtime import shared_runtime
w = ChatWidget(ScriptedSource("x"))
sha = lambda s: hashlib.sha256(s.encode()).hexdigest()
print(json.dumps({"file": nbstream.__file__, "path": sys.path,
                  "esm": sha(w._esm), "esm_len": len(w._esm),
                  "bundle": sha(shared_runtime().bundle), "bundle_len": len(shared_runtime().bundle),
                  "torch": "torch" in sys.modules}))
""", cwd=tmp_path)
    facts = json.loads(out.strip().splitlines()[-1])
    assert facts["file"].startswith(str(installed.parent.parent))
    assert not any(p and Path(p).resolve() == ROOT for p in facts["path"])
    # each widget carries the small loader; the bundle travels once, in the shared runtime
    assert facts["esm_len"] > 500
    assert facts["esm"] == hashlib.sha256(LOADER.read_text().encode()).hexdigest()
    assert facts["bundle_len"] > 10_000
    assert facts["bundle"] == hashlib.sha256(BUNDLE.read_text().encode()).hexdigest()
    assert facts["torch"] is False  # the base install never imports torch
    assert shutil.which("node", path=str(installed.parent)) is None


def test_a_scripted_chat_streams_in_a_kernel_from_the_venv(installed: Path, tmp_path: Path) -> None:
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = tmp_path / "kernels" / "wheelvenv"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(installed), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "nbstream wheel", "language": "python"}))
    km = KernelManager(kernel_name="wheelvenv",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")]))
    km.start_kernel(env=clean_env(), cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        text = "Streamed from the installed wheel. " * 6
        msg_id = kc.execute(f"""
import nbstream, sys
from nbstream import ChatWidget
from nbstream.sources import ScriptedSource
chat = ChatWidget(ScriptedSource({text!r}, rate=300))
display(chat)
reply = chat.send("hi")
reply.wait(timeout=120)
assert 'site-packages' in nbstream.__file__, nbstream.__file__
""")
        deltas: dict[int, str] = {}  # the reply's (m2) deltas by seq: their answer text
        final: dict[str, Any] = {}  # its latest meta
        idle = False
        for msg in iopub(kc, 180, "end of the cell and of its reply", poll=1):
            content = msg["content"]
            if msg["msg_type"] == "error":
                raise AssertionError("\n".join(content["traceback"]))
            idle = idle or cell_idle(msg, msg_id)
            if msg["msg_type"] == "comm_msg":
                data = content["data"]
                for mid, seq, body in delta_keys(data):
                    if mid == "m2":
                        deltas[seq] = body_parts(body)[0]
                meta = data.get("state", {}).get("m2") if data.get("method") == "update" else None
                if isinstance(meta, dict):
                    final = meta
            if idle and final.get("status") == "done":
                break
        assert final["status"] == "done"
        assert deltas, "no delta streamed"
        assert sorted(deltas) == list(range(1, final["seq"] + 1))  # no gap, none twice
        assert "".join(deltas[s] for s in sorted(deltas)) == text
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_a_base_install_says_what_to_install_at_construction(installed: Path, tmp_path: Path) -> None:
    # the venv really lacks the transformers extra and the model wheel: no simulation here
    out = run(installed, "-c", """
from nbstream import ChatWidget
try:
    ChatWidget()
except ModuleNotFoundError as exc:
    print(type(exc).__name__, exc)
""", cwd=tmp_path)
    assert out.startswith("ExtraMissing") and 'pip install "nbstream[transformers]"' in out
