"""One meaning of Stop in a real JupyterLab: the button and Escape stop the running
reply and cancel the queued one (tests/browser/stop_queued.mjs)."""

from __future__ import annotations

import pytest
from conftest import JupyterLab, RunScenario

pytestmark = pytest.mark.browser

# A source that records each question it is asked, then types a long answer slowly:
# the first answer is still running when the second prompt is sent, so that one queues.
CELL = """\
import time
from nbstream import ChatWidget
from nbstream.sources import IteratorSource

ASKED = []

def answer(messages):
    ASKED.append(messages[-1]["content"])
    for i in range(3000):
        time.sleep(0.025)  # a slow model is the scenario: 40 words/s for over a minute
        yield f"word{i} "

chat = ChatWidget(IteratorSource(answer))
chat"""


def test_stop_button_and_escape_cancel_the_queued_reply(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str
) -> None:
    path = jupyterlab.write_notebook(notebook_name, [CELL])
    r = run_scenario("stop_queued", notebook=path, timeout=180)
    for how in ("button", "escape"):
        phase = r[how]
        assert phase["runningStatus"] == "running", phase
        running, queued = phase["ends"][phase["running"]], phase["ends"][phase["queued"]]
        assert running["status"] == "stopped", phase
        assert queued["status"] == "stopped", phase  # cancelled, not started next
        assert not queued["text"], phase
        k_running, k_queued = r["kernel"][phase["running"]], r["kernel"][phase["queued"]]
        assert k_running.get("status") == "stopped", k_running
        assert k_queued.get("status") == "stopped" and k_queued.get("content") == "", k_queued
    # the source was only ever asked the two first questions: the queued ones never ran
    assert r["asked"] == ["button: first question", "escape: first question"]
