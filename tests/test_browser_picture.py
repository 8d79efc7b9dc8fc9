"""The README's picture, taken in real JupyterLab (headless Chromium) and checked.

A chat mid-answer (tests/browser/picture.mjs): the source waits at a gate in the
middle of a sentence, after reasoning, a heading, display and inline math, a
list and a code block. Before the screenshot the test checks that the picture
shows what the README says it shows: the reasoning block (folded, "Thought for
n s"), the question, the heading, the list, rendered math, a highlighted code
block, all inside the visible part of the message list; and that the answer
uses the cell's width: the code block spans the output area while paragraphs
keep a readable measure.

The screenshot lands in test-artifacts/test_readme_picture-widget.png;
``make picture`` runs this test and copies it to docs/chat.png, the README's
picture.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, JupyterLab, RunScenario

pytestmark = pytest.mark.browser

QUESTION = "How do I get the mean and the spread of a list of numbers?"

THINKING = (
    "They want the mean and the standard deviation. Give the formulas first, then "
    "the standard library's functions, then a small function they can reuse; "
    "say which standard deviation it is (sample, n - 1)."
)

ANSWER = r"""## Mean and standard deviation

For numbers $x_1, \dots, x_n$, the mean $\bar{x}$ and the sample standard deviation $s$ are

$$
\bar{x} = \frac{1}{n} \sum_{i=1}^{n} x_i \qquad s = \sqrt{\frac{1}{n-1} \sum_{i=1}^{n} (x_i - \bar{x})^2}
$$

- `statistics.mean` and `statistics.stdev` compute both, exactly
- for large arrays, `numpy` is faster: `x.mean()` and `x.std(ddof=1)`

```python
from statistics import mean, stdev
def spread(xs: list[float]) -> tuple[float, float]:
    return mean(xs), stdev(xs)  # the sample standard deviation: divides by n - 1
```

`spread([2, 4, 4, 4, 5, 5, 7, 9])`
gives 5 and 2.14;
with $n$ for $n - 1$, it is 2 (`statistics.pstdev`)."""

#: the answer stops here until the scenario has taken the picture: in the middle of
#: the last paragraph's third line (the code block before it is final, and only then
#: highlighted, once two lines after it are complete: js/src/incremental.ts)
GATE_AT = ANSWER.index("it is 2")
#: the rendered text shortly before the gate, and how many formulas it holds
MARKER = "2.14;"
FORMULAS = 6
assert MARKER in ANSWER[:GATE_AT] and ANSWER[:GATE_AT].count("$") == 2 * FORMULAS + 2

#: the artifact `make picture` copies to docs/chat.png
ARTIFACT = REPO / "test-artifacts" / "test_readme_picture-widget.png"


def notebook_cell() -> str:
    return (
        "import threading, time\n"
        "from nbstream import ChatWidget\n"
        "from nbstream.sources import IteratorSource, Reasoning\n"
        f"THINKING = {THINKING!r}\n"
        f"ANSWER = {ANSWER!r}\n"
        "GATE = threading.Event()\n"
        "def scripted(messages):\n"
        "    for word in THINKING.split(' '):\n"
        "        time.sleep(0.04)  # the scenario: a model thinking word by word\n"
        "        yield Reasoning(word + ' ')\n"
        f"    for i in range(0, {GATE_AT}, 6):\n"
        "        time.sleep(0.01)  # then answering, ~100 pieces a second\n"
        f"        yield ANSWER[i : min(i + 6, {GATE_AT})]\n"
        "    assert GATE.wait(300)\n"
        f"    yield ANSWER[{GATE_AT}:]\n"
        "chat = ChatWidget(IteratorSource(scripted), title='nbstream')\n"
        f"chat.send({QUESTION!r})\n"
        "chat"
    )


def test_readme_picture(jupyterlab: JupyterLab, run_scenario: RunScenario,
                        notebook_name: str) -> None:
    path = jupyterlab.write_notebook(notebook_name, [notebook_cell()])
    r = run_scenario("picture", timeout=240, notebook=path, width=1080, marker=MARKER,
                     formulas=FORMULAS)
    m = r["measured"]

    # mid-answer: still running, Stop can be pressed
    assert m["status"] == "running" and m["stop_enabled"], m
    assert MARKER in m["text_tail"], m["text_tail"]
    # everything the README's caption names is in the picture (the visible part of the list)
    assert m["question_visible"], m
    reasoning = m["reasoning"]
    assert reasoning["present"] and reasoning["phase"] == "done", reasoning
    assert reasoning["label"].startswith("Thought for"), reasoning
    assert reasoning["visible"], reasoning
    assert m["heading"]["count"] == 1 and m["heading"]["visible"], m["heading"]
    assert m["list_items"]["count"] == 2 and m["list_items"]["visible"], m["list_items"]
    code = m["code"]
    assert code["highlighted"] and code["spans"] >= 5 and code["visible"], code
    math = m["math"]
    assert math["count"] == FORMULAS and math["display"] == 1, math
    assert math["laid_out"] and math["visible"] and math["pending"] == 0, math

    # the answer uses the cell's width: the code block spans the message list (no
    # bubble sized to its first lines), its longest line fits without scrolling...
    inner = m["list_inner_width"]
    assert inner > 700, m  # the viewport leaves a wide output area
    assert code["width"] >= 0.9 * inner, (code["width"], inner)
    assert code["overflow"] <= 1, code
    # ...and prose keeps a readable measure, narrower than the code block
    prose = m["prose"]
    assert 40 <= prose["measure_em"] <= 60, prose
    assert all(w <= prose["measure_px"] + 1 for w in prose["widths"]), prose
    assert max(prose["widths"]) < code["width"], (prose, code)

    shot = Path(r["screenshot_widget"])
    assert shot == ARTIFACT, shot
    # a picture of a few tens of KB: a README's first screen should load at once
    assert 10_000 < shot.stat().st_size < 150_000, shot.stat().st_size
