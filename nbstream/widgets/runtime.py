"""The front end, shared: one widget per kernel carries the bundle and the CSS.

Each nbstream widget's own ``_esm`` is a small loader (``js/src/loader.ts``,
~1 KB) that names this model in its ``_runtime`` trait and imports the bundle
from it. So the ~230 KB bundle and ~13 KB of CSS travel once per kernel, and
a notebook saved with widget state (JupyterLab's "save widget state",
nbclient's ``store_widget_state=True``) stores them once, however many widgets
it shows; a reopened notebook or its nbconvert HTML renders from that saved
copy with no kernel.

The runtime is a plain ``@jupyter-widgets/base`` ``WidgetModel`` (no view, no
anywidget), so every widget manager (JupyterLab, Notebook 7, nbconvert's
html-manager) can restore it. :func:`runtime_ref` creates it on first use,
on whichever thread builds the first widget (under a lock), and again if it
was closed (``Widget.close_all()``).

Front ends known not to render nbstream's updates are found here too:
:func:`warn_unsupported_frontend` warns once, when a widget is built
(``nbstream.doctor()`` reports the same problem, with the fix).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import sys
import threading
import warnings
from pathlib import Path

import ipywidgets
import traitlets

_STATIC = Path(__file__).parent.parent / "static"
_MISSING_BUNDLE = """
export default { render({ el }) {
  el.textContent =
    "nbstream: the front end is not built (run `make setup`, or `npm run build` in js/).";
} };
"""


class Runtime(ipywidgets.Widget):  # type: ignore[misc]
    """The front-end bundle and CSS, synced once per kernel (see the module docstring)."""

    #: the ES module every nbstream view renders with (js/src/index.ts, bundled)
    bundle = traitlets.Unicode("").tag(sync=True)
    #: the widgets' stylesheet, added to the page once per version
    css = traitlets.Unicode("").tag(sync=True)
    #: a hash of both: views share one import per page and version
    version = traitlets.Unicode("").tag(sync=True)


def _read(name: str, fallback: str) -> str:
    path = _STATIC / name
    return path.read_text(encoding="utf-8") if path.exists() else fallback


def _new_runtime() -> Runtime:
    bundle = _read("widget.js", _MISSING_BUNDLE)
    css = _read("widget.css", "")
    version = hashlib.sha256((bundle + "\0" + css).encode()).hexdigest()[:16]
    return Runtime(bundle=bundle, css=css, version=version)


_runtime: Runtime | None = None
_lock = threading.Lock()


def shared_runtime() -> Runtime:
    """The kernel's runtime widget, created (its comm opened) on first use."""
    global _runtime
    with _lock:
        if _runtime is None or _runtime.comm is None:
            _runtime = _new_runtime()
        return _runtime


def runtime_ref() -> str:
    """How a widget's ``_runtime`` trait names the runtime: ``IPY_MODEL_<model id>``."""
    return f"IPY_MODEL_{shared_runtime().model_id}"


def standalone() -> bool:
    """Whether widgets carry the whole front end themselves (no shared runtime).

    So in marimo, which renders each anywidget on its own and is not known to
    restore a plain ipywidgets model that no cell displays; there the notebook
    is not saved with widget state anyway.
    """
    marimo = sys.modules.get("marimo")
    try:
        return bool(marimo is not None and marimo.running_in_notebook())
    except Exception:  # an old or partial marimo: be safe, carry the bundle
        return marimo is not None


def widget_esm() -> str:
    """The ``_esm`` of every nbstream widget: the small loader (``static/loader.js``),
    or the whole bundle where there is no shared runtime (:func:`standalone`).

    The text, not the Path: anywidget connects every instance of a class whose
    ``_esm`` is a file to that file's change signal (hot reload), keeping each
    widget alive for ever; a str keeps closed widgets collectable."""
    return _read("widget.js" if standalone() else "loader.js", _MISSING_BUNDLE)


def widget_css() -> str:
    """The ``_css`` of every nbstream widget: none (the runtime adds it), or the
    stylesheet where there is no shared runtime."""
    return _read("widget.css", "") if standalone() else ""


def widget_runtime_ref() -> str:
    """A new widget's ``_runtime``: :func:`runtime_ref`, or "" where there is none."""
    return "" if standalone() else runtime_ref()


#: the first marimo whose comms accept sends from any thread of the session
MARIMO_MIN = (0, 23, 14)

_warned: set[str] = set()


def running_in_marimo() -> bool:
    """Whether this kernel is a marimo notebook's (marimo imported and running one)."""
    try:
        import marimo

        return bool(marimo.running_in_notebook())
    except Exception:
        return False


def version_tuple(version: str | None) -> tuple[int, ...]:
    """``"0.23.14"`` as ``(0, 23, 14)``: the first three numbers (``()`` for none)."""
    if not version:
        return ()
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3])


def _marimo_version() -> str | None:
    try:
        return importlib.metadata.version("marimo")
    except importlib.metadata.PackageNotFoundError:
        return None


def warn_unsupported_frontend() -> None:
    """Warn once, at a widget's construction, where updates are known not to render."""
    if "marimo" in sys.modules and "marimo" not in _warned and running_in_marimo():
        version = _marimo_version()
        if version and version_tuple(version) < MARIMO_MIN:
            _warned.add("marimo")
            warnings.warn(
                f"nbstream needs marimo >= {'.'.join(map(str, MARIMO_MIN))} (this is "
                f"{version}): older marimo drops updates sent from background threads and "
                "the widget stays empty. Upgrade marimo.",
                RuntimeWarning, stacklevel=3)
