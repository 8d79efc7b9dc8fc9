"""Attachments in Notebook 7, Voilà and ``marimo run`` (#21), in a real browser: a picture
dropped onto the chat and sent travels to the kernel (the source says what it got) and
back as the question's thumbnail (the kernel's preview, a binary buffer). JupyterLab's
own, fuller test (pick, paste, drop, limits, refusals, themes) is
test_browser_attachments.py."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import JupyterLab, RunScenario, free_port
from test_browser_marimo_voila import scenario, serve

pytestmark = pytest.mark.browser

SOURCE = '''\
from nbstream import ChatWidget
from nbstream.sources import IteratorSource

def answer(messages):
    got = messages[-1].get("attachments", ())
    yield "Got " + ", ".join(f"{a.name} {a.width}x{a.height}" for a in got)

ChatWidget(IteratorSource(answer), title="attachments")'''

MARIMO_APP = '''\
import marimo

app = marimo.App()


@app.cell
def _():
    import marimo as mo

    from nbstream import ChatWidget
    from nbstream.sources import IteratorSource

    def answer(messages):
        got = messages[-1].get("attachments", ())
        yield "Got " + ", ".join(f"{a.name} {a.width}x{a.height}" for a in got)

    chat = mo.ui.anywidget(ChatWidget(IteratorSource(answer), title="attachments"))
    chat
    return


if __name__ == "__main__":
    app.run()
'''


def check(r: dict[str, Any]) -> None:
    assert r["dropped"]["accepted"], r
    assert re.fullmatch(r"picture\.png \(\d+ B\)", r["tray"]["label"]), r["tray"]
    assert r["question"] == "what is in it?"
    assert r["thumbnail"] == {"alt": "picture.png", "src": "data:image/png;base64,",
                              "width": 120, "height": 80}
    assert r["reply_status"] == "done" and r["reply"] == "Got picture.png 120x80", r
    assert r["tray_empty"]


def _notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SOURCE)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path.write_text(nbformat.writes(nb))


def test_attachments_in_notebook_7(jupyterlab: JupyterLab, run_scenario: RunScenario,
                                   notebook_name: str) -> None:
    path = jupyterlab.write_notebook(notebook_name, [SOURCE])
    check(run_scenario("attach_nb7", timeout=240, notebook=path))


def test_attachments_in_voila(tmp_path: Path) -> None:
    _notebook(tmp_path / "chat.ipynb")
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    cmd = [sys.executable, "-m", "voila", "chat.ipynb", "--no-browser", f"--port={port}",
           "--Voila.ip=127.0.0.1", "--VoilaConfiguration.show_tracebacks=True"]
    with serve(cmd, f"{url}voila/static/favicon.ico", "voila-attach-server.log", tmp_path,
               tmp_path / "home") as log_path:
        check(scenario("attach_voila", url, log_path, "test_attachments_in_voila"))


def test_attachments_in_marimo_run(tmp_path: Path) -> None:
    app = tmp_path / "attach_app.py"
    app.write_text(MARIMO_APP)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    cmd = [sys.executable, "-m", "marimo", "run", str(app), "--host", "127.0.0.1",
           "--port", str(port), "--headless", "--no-token", "--no-sandbox"]
    with serve(cmd, url, "marimo-attach-server.log", tmp_path, tmp_path / "home") as log_path:
        check(scenario("attach_marimo", url, log_path, "test_attachments_in_marimo_run"))
