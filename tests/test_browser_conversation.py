"""Browser tests of the conversation features, in real JupyterLab (headless Chromium).

A chat started from a history (tests/browser/conversation.mjs):
``ChatWidget(source, messages=[...])`` shows every message at once with its status
and reasoning, never as live; "Copy all" gives ``chat.to_markdown()``; a question
asked in the view follows the loaded messages. Screenshots:
test-artifacts/test_loaded_conversation_renders_and_copies_<theme>_-widget.png; the light run
in Notebook 7 too, ...-notebook7-widget.png.

Edit and branches in the view (tests/browser/branches.mjs): Regenerate keeps the old
answer, the "< 2 / 2 >" switch goes back, Edit asks anew; in Notebook 7 (light run), a chat
whose branches Python made (send, regenerate) shows the switch, and "previous" brings the
earlier answer back. Screenshots:
test-artifacts/test_edit_and_branches_in_the_view_<theme>_-widget.png; the light run in
Notebook 7 too, ...-notebook7-widget.png.

Both run in the light and the dark theme.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import THEME_NAMES, JupyterLab, RunScenario

from nbstream import ChatWidget
from nbstream.sources import ScriptedSource

pytestmark = pytest.mark.browser

ANSWER = (
    "Here is a **table** and some code:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "```python\nprint('hello')\n```\n"
)
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Show me a table"},
    {"role": "assistant", "content": ANSWER, "reasoning": "A small table will do."},
    {"role": "user", "content": "And a long story?"},
    {"role": "assistant", "content": "Once upon a", "status": "stopped"},
    {"role": "user", "content": "Try again"},
    {"role": "assistant", "content": "", "status": "error", "error": "RuntimeError: down"},
]


FOLLOW_UP = "Thanks!"
REPLY = "You are welcome."


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_loaded_conversation_renders_and_copies(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str, theme_setting: Any,
    theme: str,
) -> None:
    theme_setting(THEME_NAMES[theme])
    cell = (
        "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        f"chat = ChatWidget(ScriptedSource({REPLY!r}, rate=200), title='loaded',\n"
        f"                  messages={HISTORY!r})\n"
        "chat"
    )
    path = jupyterlab.write_notebook(notebook_name, [cell])
    # the light run opens the notebook in Notebook 7 too (one screenshot there)
    nb7 = {}
    if theme == "light":
        nb7["nb7_notebook"] = jupyterlab.write_notebook(f"nb7-{notebook_name}", [cell])
    r = run_scenario("conversation", timeout=300, notebook=path, count=len(HISTORY),
                     question=FOLLOW_UP, **nb7)
    assert r["theme"] == THEME_NAMES[theme]
    loaded = r["loaded"]
    assert [(m["id"], m["role"], m["status"]) for m in loaded] == [
        ("m1", "user", "done"), ("m2", "assistant", "done"),
        ("m3", "user", "done"), ("m4", "assistant", "stopped"),
        ("m5", "user", "done"), ("m6", "assistant", "error"),
    ]
    assert "print('hello')" in loaded[1]["text"] and loaded[1]["reasoning"] is True
    assert loaded[3]["text"].strip() == "Once upon a" and loaded[3]["label"].startswith("stopped")
    assert loaded[5]["label"] == "error: RuntimeError: down"
    # shown as they are: no loaded message was ever queued or running in the view
    assert {i: s for i, s in r["statuses"].items()} == {
        m["id"]: [m["status"]] for m in loaded}, r["statuses"]

    # Copy all == to_markdown() of the same chat (built here, in this process)
    here = ChatWidget(ScriptedSource(REPLY), messages=HISTORY)
    assert r["copied"] == here.to_markdown(), r["copied"]
    assert here.send(FOLLOW_UP).wait(30) == REPLY
    assert r["copied_after"] == here.to_markdown(), r["copied_after"]
    here.close()
    assert [(m["id"], m["status"]) for m in r["after"][-2:]] == [("m7", "done"), ("m8", "done")]
    if nb7:
        n = r["notebook7"]
        assert [(m["id"], m["status"]) for m in n["loaded"]] == [
            (m["id"], m["status"]) for m in loaded]
        assert n["copied"] == r["copied"]
        shot7 = Path(n["screenshot_widget"])
        assert shot7.is_file() and shot7.stat().st_size > 5_000, shot7
    shot = Path(r["screenshot_widget"])
    assert shot.is_file() and shot.stat().st_size > 5_000, shot


NB7_QUESTION = "a question"
NB7_ANSWERS = ["the earlier answer", "the later answer"]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_edit_and_branches_in_the_view(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str, theme_setting: Any,
    theme: str,
) -> None:
    theme_setting(THEME_NAMES[theme])
    path = jupyterlab.write_notebook(
        notebook_name,
        [
            "import itertools\n"
            "from nbstream import ChatWidget\n"
            "from nbstream.sources import IteratorSource\n"
            "count = itertools.count(1)\n"
            "def answer(messages):\n"
            "    yield f\"answer {next(count)} to {messages[-1]['content']}\"\n"
            "chat = ChatWidget(IteratorSource(answer), title='branches')\n"
            "chat.send('first question').wait(30)\n"
            "chat",
        ],
    )
    # the light run also opens, in Notebook 7, a chat whose branches Python made
    nb7: dict[str, Any] = {}
    if theme == "light":
        nb7["nb7_notebook"] = jupyterlab.write_notebook(
            f"nb7-{notebook_name}",
            [
                "from nbstream import ChatWidget\n"
                "from nbstream.sources import ScriptedSource\n"
                f"answers = iter({NB7_ANSWERS!r})\n"
                "chat = ChatWidget(ScriptedSource(lambda messages: next(answers), rate=200),\n"
                "                  title='branches')\n"
                f"chat.send({NB7_QUESTION!r}).wait(30)\n"
                "chat.regenerate().wait(30)\n"
                "chat",
            ],
        )
        nb7["nb7_texts"] = [NB7_QUESTION, *NB7_ANSWERS]
    r = run_scenario("branches", timeout=300, notebook=path, **nb7)
    assert r["theme"] == THEME_NAMES[theme]
    s = r["steps"]

    def brief(step: str) -> list[tuple[str, str, str | None]]:
        return [(m["id"], m["text"], m["pos"]) for m in s[step]]

    assert brief("asked") == [("m1", "first question", None),
                              ("m2", "answer 1 to first question", None)]
    # Regenerate keeps the first answer as an alternative
    assert brief("regenerated") == [("m1", "first question", None),
                                    ("m3", "answer 2 to first question", "2 / 2")]
    assert brief("back") == [("m1", "first question", None),
                             ("m2", "answer 1 to first question", "1 / 2")]
    # Edit: the question in the input box, then a new branch from the question
    assert s["input_on_edit"] == "first question"
    assert brief("edited") == [("m4", "edited question", "2 / 2"),
                               ("m5", "answer 3 to edited question", None)]
    # and back to the original question, with the answer last shown below it
    assert brief("original") == [("m1", "first question", "1 / 2"),
                                 ("m2", "answer 1 to first question", "1 / 2")]
    if nb7:
        n = r["notebook7"]["steps"]
        assert [(m["text"], m["pos"]) for m in n["shown"]] == [
            (NB7_QUESTION, None), (NB7_ANSWERS[1], "2 / 2")]
        assert [(m["text"], m["pos"]) for m in n["back"]] == [
            (NB7_QUESTION, None), (NB7_ANSWERS[0], "1 / 2")]
        shot7 = Path(r["notebook7"]["screenshot_widget"])
        assert shot7.is_file() and shot7.stat().st_size > 5_000, shot7
    shot = Path(r["screenshot_widget"])
    assert shot.is_file() and shot.stat().st_size > 5_000, shot
