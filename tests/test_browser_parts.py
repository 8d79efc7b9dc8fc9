"""A reasoning reply and a reply cut at the token limit, in real JupyterLab + Chromium."""

from __future__ import annotations

import re

import pytest
from conftest import JupyterLab, RunScenario

pytestmark = pytest.mark.browser

THINKING = '''
import time
from nbstream import ChatWidget
from nbstream.core.pieces import Outcome, Reasoning
from nbstream.sources import IteratorSource
from nbstream.sources.base import Source

THOUGHT = [f"step{i}" for i in range(40)]
ANSWER = [f"answer{i}" for i in range(30)]

def think(messages):
    for w in THOUGHT:
        time.sleep(0.06)  # the scenario: a model that thinks for ~2.4 s
        yield Reasoning(w + " ")
    for w in ANSWER:
        time.sleep(0.03)  # the scenario: the answer streams for ~1 s
        yield w + " "

chat = ChatWidget(IteratorSource(think))
chat.send("Think first")
chat
'''

CUT = '''
class Cut(Source):
    def generate(self, messages, emit, cancel):
        emit("the start of an answer")
        return Outcome("length", usage={"completion_tokens": 7})

cut = ChatWidget(Cut())
cut.send("Say a lot")
cut
'''


def test_reasoning_block_folds_when_the_answer_starts_and_continue(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str
) -> None:
    path = jupyterlab.write_notebook(notebook_name, [THINKING, CUT])
    r = run_scenario("parts", timeout=150, notebook=path)
    print(r)
    thinking, answering, clicked, done = r["thinking"], r["answering"], r["clicked"], r["done"]
    # thinking: open, live seconds, announced once as "Thinking", no answer yet
    assert thinking["open"] and thinking["phase"] == "thinking"
    assert re.fullmatch(r"Thinking… \d+ s", thinking["label"]), thinking
    assert thinking["announced"] == "Thinking" and thinking["answer"] == ""
    assert thinking["reasoning"].startswith("step0 step1") and thinking["above"] and thinking["copy"]
    # the answer started: folded, "Thought for n s"
    assert not answering["open"] and answering["phase"] == "done"
    assert re.fullmatch(r"Thought for \d+(\.\d)? s", answering["label"]), answering
    assert answering["announced"] == answering["label"]
    assert answering["answer"].startswith("answer0")
    # a click opens it, and it stays open
    assert clicked["open"] and done["open"]
    assert done["reasoning"].split() == [f"step{i}" for i in range(40)]
    assert done["answer"].split() == [f"answer{i}" for i in range(30)]
    assert "step" not in done["answer"]
    assert done["status"].startswith("done")
    # cut at the token limit, and Continue
    assert r["cut_finish"] == "length"
    assert r["cut_status"].startswith("done · cut at 7 tokens"), r["cut_status"]
    assert r["continue_disabled_after_click"]  # clicked once: no second request
    assert r["users"][0].strip() == "Say a lot"
    assert r["users"][1].strip() == "Continue exactly where your last answer was cut off."
