"""A loading reply's status line in a real browser (tests/browser/loading.mjs).

The source reports "preparing the model (first run, once)" at 42% and holds at
a gate (a ``threading.Event`` opened from a cell), then "loading model" at a
second gate, then answers: the status line says each in turn, with the working
indicator, then the answer replaces them (screenshot ...-preparing-widget.png).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import JupyterLab, RunScenario

pytestmark = pytest.mark.browser

PREPARING = "preparing the model (first run, once)"
ANSWER = "Hello from a model that took its time to load."


def test_status_line_shows_the_loading_progress(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str
) -> None:
    path = jupyterlab.write_notebook(
        notebook_name,
        [
            "import threading\n"
            "from nbstream import ChatWidget\n"
            "from nbstream.sources import ScriptedSource, report_loading\n"
            "GATE1, GATE2 = threading.Event(), threading.Event()\n"
            "class SlowModel(ScriptedSource):\n"
            "    loaded = False\n"
            "    @property\n"
            "    def prepared(self):\n"
            "        return self.loaded\n"
            "    def prepare(self):\n"
            f"        report_loading({PREPARING!r}, 0.42)\n"
            "        assert GATE1.wait(120)\n"
            "        report_loading('loading model')\n"
            "        assert GATE2.wait(120)\n"
            "        self.loaded = True\n"
            f"chat = ChatWidget(SlowModel({ANSWER!r}, rate=200), title='loading')\n"
            "chat",
        ],
    )
    r = run_scenario("loading", timeout=180, notebook=path, preparing=PREPARING,
                     timeout_ms=60_000)
    assert r["preparing"] == {"label": f"{PREPARING}… 42%", "status": "loading",
                              "waiting": True}, r["preparing"]
    assert r["loading"] == {"label": "loading model…", "status": "loading",
                            "waiting": True}, r["loading"]
    assert r["end"]["text"] == ANSWER, r["end"]
    assert r["end"]["label"].startswith("done"), r["end"]
    shot = Path(r["screenshot_widget"])
    assert shot.is_file() and shot.stat().st_size > 5_000, shot
