"""The front end travels once per kernel: a shared runtime widget, a small loader per widget.

Sizes, not times. The saved-notebook bound (each widget beyond the first adds at
most 30 KB beyond its text) is checked on a notebook that nbclient executes
with ``store_widget_state=True``, as benchmarks/saved_notebook.py measures it.
That the saved notebook still renders with no kernel (reopened in JupyterLab,
and as nbconvert HTML) is tests/test_browser_flow.py's saved-state test.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import nbstream.widgets.runtime as rt_mod
from nbstream import ChatWidget
from nbstream.sources import ScriptedSource
from nbstream.widgets.runtime import Runtime, runtime_ref, shared_runtime, widget_esm

REPO = Path(__file__).resolve().parents[1]
STATIC = REPO / "nbstream" / "static"
needs_bundle = pytest.mark.skipif(
    not (STATIC / "widget.js").exists() or not (STATIC / "loader.js").exists(),
    reason="the front end is not built (npm run build in js/)",
)


def test_every_widget_names_the_one_runtime() -> None:
    a, b = ChatWidget(ScriptedSource("x")), ChatWidget(ScriptedSource("y"))
    try:
        rt = shared_runtime()
        assert a._runtime == b._runtime == f"IPY_MODEL_{rt.model_id}" == runtime_ref()
        assert isinstance(rt, Runtime) and rt.version and len(rt.version) == 16
    finally:
        a.close()
        b.close()


def test_a_closed_runtime_is_replaced() -> None:
    first = shared_runtime()
    first.close()
    w = ChatWidget(ScriptedSource("x"))
    try:
        assert shared_runtime() is not first
        assert w._runtime == f"IPY_MODEL_{shared_runtime().model_id}"
    finally:
        w.close()


@needs_bundle
def test_each_widget_carries_a_small_loader_and_no_css() -> None:
    w = ChatWidget(ScriptedSource("x"))
    try:
        assert len(str(w._esm)) <= 4096  # the loader, not the ~230 KB bundle
        assert str(w._esm) == widget_esm() == (STATIC / "loader.js").read_text()
        assert not w.has_trait("_css") or w._css == ""
        rt = shared_runtime()
        assert rt.bundle == (STATIC / "widget.js").read_text()
        assert rt.css == (STATIC / "widget.css").read_text()
    finally:
        w.close()


@needs_bundle
@pytest.mark.kernel  # nbclient runs the notebooks in real kernels
def test_saved_notebook_stores_the_bundle_once() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import saved_notebook as sn

    one = sn.measure(sn.execute(sn.cells("nbstream", 1)))
    eight = sn.measure(sn.execute(sn.cells("nbstream", 8)))
    per = sn.per_widget_beyond_text(eight)
    assert len(per) == 8
    assert max(per) <= 30 * 1024, per
    # 7 more widgets, each within the bound (their text counted apart)
    text = sum(m["bytes"] - m["beyond_text"] for m in eight["models"] if m["has_conversation"])
    text_one = sum(m["bytes"] - m["beyond_text"] for m in one["models"] if m["has_conversation"])
    growth = eight["file_bytes"] - one["file_bytes"] - (text - text_one)
    assert growth <= 7 * 30 * 1024, growth
    # the bundle is in the file once
    bundle_models = [m for m in eight["models"] if m["bytes"] > 100 * 1024]
    assert len(bundle_models) == 1, bundle_models


@needs_bundle
def test_in_marimo_each_widget_carries_the_whole_front_end(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeMarimo:
        @staticmethod
        def running_in_notebook() -> bool:
            return True

    monkeypatch.setitem(sys.modules, "marimo", FakeMarimo)
    assert rt_mod.standalone()
    assert rt_mod.widget_esm() == (STATIC / "widget.js").read_text()
    assert rt_mod.widget_css() == (STATIC / "widget.css").read_text()
    assert rt_mod.widget_runtime_ref() == ""
