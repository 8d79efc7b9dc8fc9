"""The heavy renderers load on demand (js/src/chunks.ts), in real JupyterLab (headless
Chromium): tests/browser/chunks.mjs, then nbconvert's HTML of the saved notebook
(tests/browser/flow_nbconvert_html.mjs), offline.

A plain chat's page imports no chunk (the first render parses neither Temml, nor
highlight.js, nor the table of character references: ``&amp;`` needs none, nor
linkify-it); a reply with math, code, ``&hellip;`` and a bare URL brings the four
(the kernel's runtime widget sends them with the text that needs them), its formulas
render as MathML, its code is highlighted, ``&hellip;`` shows as "…" and the URL is
a link; a chat whose model called a tool loads the tools chunk (sent by the kernel
with the call) and shows its card; the notebook saved with widget state,
reopened with no kernel, renders them again from the saved chunks, and so does its
nbconvert HTML opened with no server and no network. Nothing is ever fetched from
outside the server.
Screenshots: test-artifacts/<test>-live.png, <test>-reopened.png.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import ARTIFACTS, BROWSER_DIR, OFFLINE_ENV, JupyterLab, RunScenario

pytestmark = pytest.mark.browser

WIDGETS_SETTING = "lab/api/settings/@jupyter-widgets/jupyterlab-manager:plugin"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PLAIN = ("## Plain\n\nNo math here, no code: a **list**\n\n- one\n- two\n\n"
         "It costs $5 and $10, fish &amp; chips.\n")
RICH = ("The root: $x = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}$&hellip;\n\n"
        "$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$\n\n"
        "```python\ndef area(r):\n    return 3.14159 * r ** 2\n```\n\n"
        "See https://en.wikipedia.org/wiki/Quadratic_formula for more.\n")
LINK = "https://en.wikipedia.org/wiki/Quadratic_formula"
TOOLS = (
    "from nbstream import ChatWidget, tool\n"
    "from nbstream.sources import ScriptedSource, call\n"
    "def weather(city: str) -> str:\n"
    "    \"\"\"The weather in a city.\n\n    Args:\n        city: the city\n    \"\"\"\n"
    "    return f'18 °C in {city}'\n"
    "tools = ChatWidget(ScriptedSource(rounds=[['Let me check. ', call('weather', city='Oslo')],\n"
    "                                          'It is 18 °C.'], rate=400),\n"
    "                   tools=[tool(weather, approve=True)])\n"
    "tools.send('weather?').wait(60)\n"
    "tools"
)
CARD = [["weather", "done", "18 °C in Oslo"]]


def _chat(name: str, answer: str) -> str:
    return (
        "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        f"{name} = ChatWidget(ScriptedSource({answer!r}, rate=400))\n"
        f"{name}.send('go').wait(60)\n"
        f"{name}"
    )


@pytest.fixture
def lab_setting(jupyterlab: JupyterLab) -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """Set a JupyterLab user setting through the REST API; put the defaults back afterwards."""
    touched: list[str] = []

    def put(endpoint: str, raw: dict[str, Any]) -> None:
        jupyterlab.api("PUT", endpoint, {"raw": json.dumps(raw)})
        touched.append(endpoint)

    try:
        yield put
    finally:
        for endpoint in touched:
            jupyterlab.api("PUT", endpoint, {"raw": "{}"})


def test_math_and_code_load_on_demand_offline_and_from_a_saved_notebook(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str,
    lab_setting: Callable[[str, dict[str, Any]], None],
) -> None:
    lab_setting(WIDGETS_SETTING, {"saveState": True})
    path = jupyterlab.write_notebook(notebook_name,
                                     [_chat("plain", PLAIN), _chat("rich", RICH), TOOLS])
    r = run_scenario("chunks", timeout=400, notebook=path)
    # a plain chat: the page imported no chunk
    assert r["plain"]["status"] == "done" and r["plain"]["chunk_loads"] == []
    assert r["plain"]["maths"] == 0 and r["plain"]["highlighted"] == 0
    assert r["plain"]["decoded"] == ["&"] and r["plain"]["as_written"] == []
    assert r["plain"]["links"] == []
    # math, code, "&hellip;", a bare URL: the four chunks, each once; MathML laid out,
    # code highlighted, the reference decoded, the URL linked
    every = ["entities", "highlight", "linkify", "math"]
    live = r["live"]
    assert sorted(live["chunk_loads"]) == every, live
    assert live["maths"] == 2 and live["frac_stacked"] is True, live
    assert live["pending"] == 0 and live["sources"] == [], live
    assert live["highlighted"] == 1 and live["keyword"] == "def", live
    assert "…" in live["decoded"] and live["as_written"] == [], live
    assert live["links"] == [LINK], live
    assert live["tools"] == [] and live["tools_pending"] == 0, live
    # a chat whose model called a tool: the tools chunk, and the card
    tools = r["tools"]
    assert sorted(tools["chunk_loads"]) == [*every, "tools"], tools
    assert tools["tools"] == CARD and tools["tools_pending"] == 0, tools
    every = [*every, "tools"]
    # reopened with no kernel: rendered from the chunks saved in the notebook
    again = r["reopened"]
    assert again["maths"] == 2 and again["highlighted"] == 1 and again["pending"] == 0, again
    assert "…" in again["decoded"] and again["as_written"] == [], again
    assert again["links"] == [LINK], again
    assert sorted(again["chunk_loads"]) == every
    assert r["reopened_tools"]["tools"] == CARD, r["reopened_tools"]
    assert r["reopened_tools"]["tools_pending"] == 0
    assert r["reopened_plain"]["status"] == "done"
    assert r["outside"] == [], r["outside"]
    # the saved file: the runtime holds the five chunks, once
    nb = json.loads((jupyterlab.root_dir / path).read_text())
    models = nb["metadata"]["widgets"][WIDGET_STATE]["state"].values()
    runtimes = [m["state"] for m in models if "bundle" in m["state"]]
    assert len(runtimes) == 1 and sorted(runtimes[0]["chunks"]) == every

    # nbconvert's HTML, opened with no server and no network: the same, from the saved chunks
    html = ARTIFACTS / "test_chunks_export.html"
    proc = subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", str(jupyterlab.root_dir / path),
         "--output-dir", str(ARTIFACTS), "--output", html.stem],
        capture_output=True, text=True, timeout=120, env={**os.environ, **OFFLINE_ENV},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert WIDGET_STATE in html.read_text()
    if not (BROWSER_DIR / "node_modules" / "@jupyter-widgets" / "html-manager").is_dir():
        pytest.fail("tests/browser/node_modules lacks @jupyter-widgets/html-manager: "
                    "run `npm ci` in tests/browser")
    h = run_scenario("flow_nbconvert_html", html=str(html), expect_math=True, expect_tools=True)
    assert h["missing"] == [] and h["widget_errors"] == 0, h
    assert h["roots"] == 3
    assert h["tool_names"] == ["weather"] and h["tools_pending"] == 0, h
    assert h["maths"] == 2 and h["highlighted"] == 1 and h["links"] == [LINK], h
    assert sorted(h["chunk_loads"]) == every
