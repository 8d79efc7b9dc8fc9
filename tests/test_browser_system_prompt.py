"""Browser test of the system prompt you can see (issue 13, item 5), in real JupyterLab.

tests/browser/system_prompt.mjs, in the light and the dark theme (screenshots
test-artifacts/test_system_prompt_edited_in_the_view-*-widget.png): the line at
the top of the chat shows the system prompt collapsed to its first line; an edit
in the view (Ctrl+Enter) reaches the kernel (a source that answers with the
system prompt it was given), without running the cell again; the reply's status
line carries its generation options on hover; ``chat.system_prompt = ...`` from
Python updates the line. The light run also in Notebook 7 (...-notebook7-light-...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import THEME_NAMES, JupyterLab, RunScenario

pytestmark = pytest.mark.browser

EDITED = "You are a pirate.\nSay arr."
FROM_PYTHON = "Set from Python."
CELL = '''\
from nbstream import ChatWidget
from nbstream.sources import Source


class EchoSystem(Source):
    """Answers with the system prompt it was given and the options it was asked with."""

    generation_options = frozenset({"temperature", "max_new_tokens"})

    def generate(self, messages, emit, cancel):
        return self.generate_with(messages, emit, cancel, {})

    def generate_with(self, messages, emit, cancel, options):
        system = messages[0]["content"] if messages[0]["role"] == "system" else "(none)"
        emit("System prompt seen: " + system.replace("\\n", " / "))
        emit(" ; options: " + ", ".join(f"{k}={v}" for k, v in sorted(options.items())))


chat = ChatWidget(EchoSystem(), title="system prompt", system_prompt="You are terse.\\nNo lists.",
                  generation={"temperature": 0.2, "max_new_tokens": 64})
chat'''
SEEN = "System prompt seen: You are a pirate. / Say arr. ; options: max_new_tokens=64, temperature=0.2"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_system_prompt_edited_in_the_view(
    jupyterlab: JupyterLab,
    run_scenario: RunScenario,
    notebook_name: str,
    theme_setting: Any,
    theme: str,
) -> None:
    theme_setting(THEME_NAMES[theme])
    path = jupyterlab.write_notebook(notebook_name, [CELL])
    nb7 = {}
    if theme == "light":
        nb7["nb7_notebook"] = jupyterlab.write_notebook(f"nb7-{notebook_name}", [CELL])
    r = run_scenario("system_prompt", timeout=240, notebook=path, label=theme, edited=EDITED,
                     python_prompt=FROM_PYTHON, **nb7)
    assert r["theme"] == THEME_NAMES[theme]

    # collapsed to its first line at first; no "add" button while there is one
    before = r["before"]
    assert before["shown"] and before["preview"] == "You are terse. …", before
    assert before["expanded"] == "false" and not before["add_shown"], before
    # Ctrl+Enter saved the edit, ran no cell, and left one widget
    edit = r["after_edit"]
    assert not edit["editing"] and edit["preview"] == "You are a pirate. …", edit
    assert edit["full"] == EDITED, edit
    assert edit["chats"] == 1 and edit["prompts"] == before["prompts"], (before, edit)
    # the kernel's source saw the edited prompt, with the widget's options
    reply = r["reply"]
    assert reply["text"].strip() == SEEN, reply
    assert repr(EDITED) in r["kernel"], r["kernel"]
    assert "{'temperature': 0.2, 'max_new_tokens': 64}" in r["kernel"], r["kernel"]
    # the options in force, on the status line's hover
    assert reply["title"].startswith(
        "Generation options: temperature 0.2 · max_new_tokens 64\n"), reply
    # chat.system_prompt = ... from Python: the line follows
    assert r["after_python"]["preview"] == FROM_PYTHON, r["after_python"]
    assert r["after_python"]["expanded"] == "true", r["after_python"]
    assert r["collapsed"]["expanded"] == "false" and r["collapsed"]["shown"], r["collapsed"]
    shot = Path(r["screenshot_widget"])
    assert shot.is_file() and shot.stat().st_size > 5_000, shot

    if nb7:
        n = r["notebook7"]
        assert n["before"]["shown"] and n["before"]["preview"] == "You are terse. …", n
        assert n["reply"]["text"].strip() == SEEN, n
        assert n["reply"]["title"].startswith("Generation options: temperature 0.2"), n
        assert n["after"]["chats"] == 1 and n["after"]["preview"] == "You are a pirate. …", n
        shot7 = Path(n["screenshot_widget"])
        assert shot7.is_file() and shot7.stat().st_size > 5_000, shot7
