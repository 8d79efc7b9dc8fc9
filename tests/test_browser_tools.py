"""Tool calls (#20) in real JupyterLab + Chromium, in the light and the dark theme: the
card streams its arguments in a bounded box, asks for approval (Allow by keyboard,
Deny by click, both checked by the kernel), shows the result and the time, the answer
follows; hostile names, ids, arguments and results run nothing; Notebook 7 shows the
cards too. Screenshots: test-artifacts/test_tool_card_in_lab_*-<theme>-*.png."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import REPO, THEME_NAMES, JupyterLab, RunScenario

pytestmark = pytest.mark.browser

PAYLOADS = {p["tool"]: p["text"] for p in json.loads(
    (REPO / "tests" / "browser" / "xss_payloads.json").read_text()) if "tool" in p}

LONG_QUERY = " ".join(f"word{i}" for i in range(120))

CARD = f'''
import time
from nbstream import ChatWidget, tool
from nbstream.sources import ScriptedSource, call

def search(query: str) -> str:
    """Search the notes.

    Args:
        query: what to look for
    """
    return f"3 notes match ({{len(query.split())}} words)"

def delete_notes(pattern: str) -> str:
    """Delete notes.

    Args:
        pattern: which notes
    """
    return "deleted"

model = ScriptedSource(rounds=[
    ["Let me search. ", call("search", query={LONG_QUERY!r}),
     call("delete_notes", pattern="*")],
    lambda m: "Found: " + m[-2]["content"] + " / " + m[-1]["content"],
], rate=25)
chat = ChatWidget(model, tools=[search, delete_notes], title="tools")
chat.send("Find my notes, then clean up")
chat
'''

HOSTILE = f'''
P = {json.dumps(PAYLOADS)!r}
import json as _json
P = _json.loads(P)

class Html:
    def _repr_html_(self):
        return P["result_html"]
    def __repr__(self):
        return P["result_html"]

class Md:
    def _repr_markdown_(self):
        return P["result_markdown"]
    def __repr__(self):
        return "markdown"

def html_result() -> object:
    """Hostile HTML."""
    return Html()

def md_result() -> object:
    """Hostile Markdown."""
    return Md()

hostile = ChatWidget(ScriptedSource(rounds=[
    [call(P["name"], P["arguments"], id=P["id"]), call("html_result", id="h"),
     call("md_result", id="m")],
    "done",
], rate=200), tools=[tool(html_result, approve=True), tool(md_result, approve=True)])
hostile.send("go")
hostile
'''

NB7 = '''
from nbstream import ChatWidget, tool
from nbstream.sources import ScriptedSource, call

def search(query: str) -> str:
    """Search the notes.

    Args:
        query: what to look for
    """
    return "3 notes match"

chat = ChatWidget(ScriptedSource(rounds=[[call("search", query="notes")], "Found 3."], rate=50),
                  tools=[tool(search, approve=True)])
chat.send("Find my notes")
chat
'''


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_tool_card_in_lab(
    jupyterlab: JupyterLab,
    run_scenario: RunScenario,
    notebook_name: str,
    theme_setting: Any,
    theme: str,
) -> None:
    theme_setting(THEME_NAMES[theme])
    stem = notebook_name.removesuffix(".ipynb")
    lab_nb = jupyterlab.write_notebook(f"{stem}-lab.ipynb", [CARD, HOSTILE])
    nb7 = jupyterlab.write_notebook(f"{stem}-nb7.ipynb", [NB7])
    r = run_scenario("tools", timeout=300, notebook=lab_nb, nb7_notebook=nb7, label=theme)
    assert r["theme"] == THEME_NAMES[theme]
    # the arguments streamed: seen growing, in a box that stops growing at its bound
    streaming = [s for s in r["samples"] if s["state"] == "streaming"]
    assert len({s["args"] for s in streaming}) >= 3, r["samples"]
    heights = [s["height"] for s in r["samples"]]
    assert heights == sorted(heights), heights  # never jumps back
    assert max(s["box"] for s in r["samples"]) <= 220, r["samples"]  # ~9em, then it scrolls
    # approval: the whole arguments, the three buttons; Allow reached with the keyboard
    a = r["approval"]
    assert a["state"] == "awaiting_approval" and a["label"] == "waiting for your approval"
    assert a["args"] == json.dumps({"query": LONG_QUERY})
    assert a["buttons"] == ["Allow", "Always allow", "Deny"] and a["between"]
    assert r["focused"]
    assert r["allowed"]["state"] == "done" and r["allowed"]["buttons"] == []
    assert r["done"]["result"] == "3 notes match (120 words)"
    assert r["done"]["time"].endswith(("ms", "s"))
    assert r["denied"]["state"] == "denied" and r["denied"]["error"] == "denied by the user"
    assert r["done"]["answer"] == ("Found: 3 notes match (120 words) / "
                                   "The user denied this tool call.")
    # in the theme's colors: the card stands apart from the chat, its text readable
    c = r["done"]["colors"]
    assert c["card_bg"] != c["chat_bg"], c
    # hostile text ran nothing, and stayed text
    assert r["hostile_before_clicks"]["bad"] == [], r["hostile_before_clicks"]  # nothing loads
    h = r["hostile"]  # after a click on every result and image placeholder
    assert h["bad"] == [] and h["canary"] is None, h
    assert h["cards"] == 3 and h["names"][0] == PAYLOADS["name"], h
    assert h["checked"] > 20
    assert r["dialogs"] == [] and r["theme_after"] == r["theme"]
    # Notebook 7
    assert r["nb7"]["card"]["state"] == "done" and r["nb7"]["card"]["result"] == "3 notes match"
