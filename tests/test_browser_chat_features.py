"""Browser tests of the chat's reading features, in real JupyterLab (headless Chromium).

* Math in a streamed reply (tests/browser/math.mjs), in the light and the dark
  theme (screenshots test-artifacts/test_math_*-widget.png): every delimiter
  renders as MathML that Chromium lays out, a formula shows only once closed
  (pending source dimmed on the way, never an error for a valid formula),
  prices stay text, a broken formula shows its source, Copy gives the TeX;
  the light run also in Notebook 7 (...-notebook7-light-widget.png).
* Scrolling while a long reply streams (tests/browser/scroll.mjs): the notebook
  never scrolls, one long paragraph is followed (or "Jump to latest" shows) at
  every frame, the list stops at the top of the long reply, and the reader's
  place is kept when they scrolled up (screenshot ...-pinned-widget.png).
* The reader's place survives the frame in which a long paragraph closes
  (tests/browser/scroll_close.mjs): deterministic, with the source held at a gate;
  light and dark (...-<theme>-widget.png, the reader's view after the paragraph
  closed), and in Notebook 7 a long reply stops at its top (...-notebook7-widget.png).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import THEME_NAMES, JupyterLab, RunScenario

pytestmark = pytest.mark.browser


BROKEN = r"$\frac{1}{$"
MATH_ANSWER = (
    "## Math, streamed\n\n"
    r"Euler's identity $e^{i\pi} + 1 = 0$ and the Pythagorean \(a^2 + b^2 = c^2\)."
    "\n"
    "A coffee costs $5 and a book $10: those stay text.\n\n"
    "The sum of the first $n$ integers:\n\n"
    "$$\n\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\n$$\n\n"
    "and a Gaussian integral\n"
    "\\[\n\\int_{-\\infty}^{\\infty} e^{-x^2}\\,dx = \\sqrt{\\pi}\n\\]\n\n"
    r"A matrix inline, $$\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}$$, and a broken one: "
    f"{BROKEN} (shown as source).\n"
)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_math_streamed(
    jupyterlab: JupyterLab,
    run_scenario: RunScenario,
    notebook_name: str,
    theme_setting: Any,
    theme: str,
) -> None:
    theme_setting(THEME_NAMES[theme])
    # The answer streams in small pieces and stops at GATE inside the first display
    # formula, so a pending formula is on screen whatever the machine's load (a
    # paced source could be coalesced past it); the scenario opens the gate once
    # it saw it.
    gate_at = MATH_ANSWER.index(r"\sum") + len(r"\sum_{k=1}")
    cell = (
        "import threading\n"
        "from nbstream import ChatWidget\n"
        "from nbstream.sources import IteratorSource\n"
        f"ANSWER = {MATH_ANSWER!r}\n"
        "GATE = threading.Event()\n"
        "def answer(messages):\n"
        f"    for i in range(0, {gate_at}, 7):\n"
        f"        yield ANSWER[i : min(i + 7, {gate_at})]\n"
        "    assert GATE.wait(120)\n"
        f"    for i in range({gate_at}, len(ANSWER), 7):\n"
        "        yield ANSWER[i : i + 7]\n"
        "chat = ChatWidget(IteratorSource(answer), title='math')\n"
        "chat.send('Some formulas, please')\n"
        "chat"
    )
    path = jupyterlab.write_notebook(notebook_name, [cell])
    # the light run opens the notebook in Notebook 7 too (one screenshot there; no gate)
    nb7 = {}
    if theme == "light":
        scripted = (
            "from nbstream import ChatWidget\n"
            "from nbstream.sources import ScriptedSource\n"
            f"chat = ChatWidget(ScriptedSource({MATH_ANSWER!r}, rate=150), title='math')\n"
            "chat.send('Some formulas, please')\n"
            "chat"
        )
        nb7["nb7_notebook"] = jupyterlab.write_notebook(f"nb7-{notebook_name}", [scripted])
    r = run_scenario("math", timeout=240, notebook=path, label=theme, broken=BROKEN, **nb7)
    assert r["theme"] == THEME_NAMES[theme]
    if nb7:
        n = r["notebook7"]["measured"]
        assert n["formulas"] == 6 and n["all_laid_out"] and n["frac_stacked"], n
        assert n["sources"] == [BROKEN] and n["pending_left"] == 0, n
        shot7 = Path(r["notebook7"]["screenshot_widget"])
        assert shot7.is_file() and shot7.stat().st_size > 5_000, shot7
    m = r["measured"]
    # $e^{iπ}+1=0$, \(a^2+b^2=c^2\), $n$, the two display blocks, the inline $$matrix$$
    assert m["formulas"] == 6, m
    assert m["display"] == 3 and m["inline"] == 3, m
    assert m["all_laid_out"] and m["display_is_block"], m
    assert m["frac_stacked"] is True, m  # Chromium's MathML layout: numerator above
    assert m["tallest_display"] > m["tallest_inline"], m
    assert m["pending_left"] == 0, m
    assert m["sources"] == [BROKEN], m
    assert "costs $5 and a book $10: those stay text" in m["text"], m["text"]
    assert m["overflow"] <= 1, m  # nothing wider than the reply
    # on the way: pending source was shown (at the gate), and the only error is the
    # broken formula
    w = r["watched"]
    assert w["pending"] > 0 and r["pending_at_gate"] >= 1, (w, r["pending_at_gate"])
    assert set(w["sources"]) == {BROKEN}, w
    assert w["outside"] == 0, w
    # Copy gives the Markdown, TeX and all
    assert r["copied"] == MATH_ANSWER, r["copied"]
    shot = Path(r["screenshot_widget"])
    assert shot.is_file() and shot.stat().st_size > 5_000, shot


SCROLL_WORDS = 20_000
LONG_PARAGRAPH_WORDS = 900


def _long_answer() -> str:
    words = [f"w{i}" for i in range(SCROLL_WORDS)]
    paragraph = " ".join(words[:LONG_PARAGRAPH_WORDS])
    rest = words[LONG_PARAGRAPH_WORDS:]
    paragraphs = [" ".join(rest[i : i + 60]) for i in range(0, len(rest), 60)]
    return paragraph + "\n\n" + "\n\n".join(paragraphs)


def test_scrolling_respects_the_reader(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str
) -> None:
    spacer = "print('\\n'.join(f'line {i}' for i in range(60)))"
    path = jupyterlab.write_notebook(
        notebook_name,
        [
            spacer,
            "from nbstream import ChatWidget\n"
            "from nbstream.sources import ScriptedSource\n"
            f"ANSWER = {_long_answer()!r}\n"
            "chat = ChatWidget(ScriptedSource(ANSWER, rate=1600), title='scroll')\n"
            "chat",
            spacer,
        ],
    )
    r = run_scenario("scroll", timeout=240, notebook=path, timeout_ms=90_000)
    samples = r["samples"]
    streaming = [s for s in samples if s["status"] in ("queued", "loading", "running")]
    assert len(streaming) > 30, len(streaming)

    # the notebook itself never scrolled while the reply streamed
    assert {s["nb"] for s in samples} == {samples[0]["nb"]}, sorted({s["nb"] for s in samples})

    # the long paragraph: its height counts (the defect: scrollHeight stuck while
    # the open block grew), and at every frame the list is at its bottom or offers the jump
    paragraph = [s for s in streaming if s["blocks"] == 1 and s["len"] > 0]
    assert paragraph, "no sample while the first paragraph streamed"
    long = [s for s in paragraph if s["len"] > 3_000]
    assert long and all(s["height"] > s["client"] + 200 for s in long), long[:3]
    for s in paragraph:
        at_bottom = s["height"] - s["top"] - s["client"] <= 24
        assert at_bottom or s["jump"], s

    # it followed until the reply's top reached the list's top, and stopped there
    first_jump = next(s for s in streaming if s["jump"])
    assert first_jump["blocks"] == 1, first_jump  # still inside the long paragraph
    assert first_jump["reply"] is not None
    assert abs(first_jump["top"] - (first_jump["reply"] - 4)) <= 2, first_jump

    # the reader scrolled up: their place was kept while the text kept coming
    read = r["read"]
    assert read["len_after"] >= read["len_before"] + 5_000, read
    assert abs(read["kept"] - read["at"]) <= 1, read
    assert read["jump"], read

    # after the jump it followed to the end
    assert r["end"] == {"at_bottom": True, "jump": False}, r["end"]
    shot = Path(r["screenshot_widget"])
    assert shot.is_file() and shot.stat().st_size > 5_000, shot


CLOSE_PARAGRAPH_WORDS = 900


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_reader_keeps_place_when_the_paragraph_closes(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str, theme_setting: Any,
    theme: str,
) -> None:
    # The defect: the closed paragraph is a new node that may skip layout
    # (content-visibility) before it was ever laid out, counting as a 3em
    # placeholder; for one layout the list shrank and the browser clamped the
    # reader's scrollTop to the top. Found as a rare flake of the scroll test.
    theme_setting(THEME_NAMES[theme])
    paragraph = " ".join(f"w{i}" for i in range(CLOSE_PARAGRAPH_WORDS))
    path = jupyterlab.write_notebook(
        notebook_name,
        [
            "import threading\n"
            "from nbstream import ChatWidget\n"
            "from nbstream.sources import IteratorSource\n"
            "GATE = threading.Event()\n"
            f"PARAGRAPH = {paragraph!r}\n"
            "def answer(messages):\n"
            "    for i in range(0, len(PARAGRAPH), 400):\n"
            "        yield PARAGRAPH[i : i + 400]\n"
            "    assert GATE.wait(120)\n"
            "    # the paragraph's last words and the next block in one delta\n"
            "    yield ' and its end.\\n\\nThe next block.'\n"
            "chat = ChatWidget(IteratorSource(answer), title='close')\n"
            "chat",
        ],
    )
    # the light run opens a long scripted answer in Notebook 7 too: it stops at the
    # reply's top there as well (no gate: Notebook 7 exposes no app to run a cell from)
    nb7 = {}
    if theme == "light":
        nb7["nb7_notebook"] = jupyterlab.write_notebook(f"nb7-{notebook_name}", [
            "from nbstream import ChatWidget\n"
            "from nbstream.sources import ScriptedSource\n"
            f"chat = ChatWidget(ScriptedSource({_long_answer()!r}, rate=1600), title='close')\n"
            "chat",
        ])
    r = run_scenario(
        "scroll_close", timeout=240, notebook=path, paragraph_chars=len(paragraph),
        timeout_ms=60_000, label=theme, **nb7,
    )
    assert r["theme"] == THEME_NAMES[theme]
    shot = Path(r["screenshot_widget"])
    assert shot.is_file() and shot.stat().st_size > 5_000, shot
    if nb7:
        n = r["notebook7"]
        # pinned at the reply's top (below the question), offering the jump
        assert n["jump"] and n["top"] > 0 and n["height"] > n["client"], n
        assert abs(n["top"] - (n["reply"] - 4)) <= 2, n
        shot7 = Path(n["screenshot_widget"])
        assert shot7.is_file() and shot7.stat().st_size > 5_000, shot7
    before, after = r["before"], r["after"]
    # the list stopped at the reply's top, below the question: a place to lose
    assert before["top"] > 0 and before["height"] > before["client"] + 200, before
    assert after["blocks"] == 2, after
    assert after["jump"], after  # still not following: the reader reads
    # what the reader sees never moved, not even for one frame: the reply's top
    # stays where it was in the list's viewport (scrollTop itself may change by
    # the difference when a message above the view renders from a placeholder:
    # seen once in CI, 70 -> 62 with the reply 8 px higher in the content)
    assert after["seen"] == before["seen"], (before, after)
    assert all(t["seen"] == before["seen"] for t in after["tops"]), (before, after["tops"])
    moved = after["top"] - before["top"]
    assert moved == 0 or before["deferred"] > after["deferred"], (before, after)
