"""Browser tests of the front end: untrusted output, themes, and a short Markdown benchmark.

* The XSS corpus (tests/browser/xss_payloads.json, shared with the JS unit
  tests) streams through the real path, kernel -> comm -> view, in headless
  Chromium: no payload runs (a canary they all try to set stays unset, no
  dialog opens), no dangerous tag or attribute ever enters the DOM (checked at
  every mutation, the streaming tail included), and no image loads until the
  user clicks its placeholder.
* The attachment payloads of the corpus (hostile file names, an SVG with script and
  onload, a data: URL as a name...) are dropped onto the chat and sent: shown as
  text and as ``<img>`` of ``data:`` URLs only, nothing runs or loads.
* Screenshots in the light and the dark theme, in JupyterLab and in Notebook 7
  (test-artifacts/test_themes_<theme>_-*.png), with checks that the widget
  rendered, follows the theme, and gives the answer the cell's width (its code
  block spans the message list; prose keeps a readable measure).
* A short run of the Markdown benchmark (benchmarks/browser_markdown.py runs
  the full one): it produces its figures, and renders at most once per frame.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, THEME_NAMES, JupyterLab, RunScenario

pytestmark = pytest.mark.browser

PAYLOADS = json.loads((REPO / "tests" / "browser" / "xss_payloads.json").read_text())


def test_xss_corpus_streamed_through_a_widget(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str
) -> None:
    texts = [p["text"] for p in PAYLOADS]
    assert len(texts) >= 40
    path = jupyterlab.write_notebook(
        notebook_name,
        [
            "import json, random, time\n"
            "from nbstream import ChatWidget\n"
            "from nbstream.sources import IteratorSource\n"
            f"PAYLOADS = json.loads({json.dumps(texts)!r})\n"
            "def answer(msgs):\n"
            "    # the answer to prompt 'i' is payload i, in pieces of 1 to 6 characters\n"
            "    # (cut anywhere: inside tags, attributes, entities), ~8 ms apart\n"
            "    i = int(msgs[-1]['content'])\n"
            "    text, rng, at = PAYLOADS[i], random.Random(i), 0\n"
            "    while at < len(text):\n"
            "        n = rng.randint(1, 6)\n"
            "        yield text[at:at + n]\n"
            "        at += n\n"
            "        time.sleep(0.008)\n"  # the scenario: a source that streams slowly
            "chat = ChatWidget(IteratorSource(answer))\n"
            "chat",
            "for i in range(len(PAYLOADS)):\n    chat.send(str(i))",
        ],
    )
    attachments = [p["attachment"] for p in PAYLOADS if "attachment" in p]
    assert len(attachments) >= 4
    r = run_scenario("xss", timeout=240, notebook=path, count=len(texts), timeout_ms=120_000,
                     attachments=attachments)
    names = [p["name"] for p in PAYLOADS]
    assert r["statuses"] == ["done"] * len(texts), r["statuses"]
    after = r["after_stream"]
    assert after["violations"] == [], after["violations"][:20]
    assert after["checked"] > len(texts)  # the watcher saw the replies grow
    assert after["empty_replies"] == 0, names
    assert after["canary"] is None and not after["canary_in_window"], after
    # the remote image and the image inside a link wait for a click (markdown-it
    # itself refuses the javascript: and SVG data: images: they stay text)
    assert after["placeholders"] >= 2, after
    assert r["canary_requests_before_click"] == [], "an image loaded by itself"
    clicks = r["after_clicks"]
    assert clicks["canary"] is None and not clicks["canary_in_window"], clicks
    assert clicks["bad_images"] == [], clicks["bad_images"]
    assert clicks["no_referrer"], clicks
    assert r["dialogs"] == [] and r["popups"] == [], r
    assert r["theme_after"] == r["theme_before"]  # no command ran (data-commandlinker)
    # attachments (#21): hostile names and contents, dropped onto the chat and sent
    att = r["attached"]
    assert att["violations"] == [], att["violations"]
    assert att["canary"] is None and not att["canary_in_window"], att
    assert r["canary_requests_attachments"] == [], "an attachment loaded something"
    assert att["commandlinkers"] == 0 and att["clicked"] >= len(attachments)
    # the SVG is shown as an image (its preview, a data: URL), never as markup
    assert {"loaded": True, "src": "data:image/svg+xml;base64,"} in att["images"], att
    shown = " ".join(att["names"] + att["alts"])
    assert '<img src=x onerror="window.__nbsCanary=1"><svg onload=' in shown  # a name is text
    assert "\u202e" not in shown and "invoicegnp.js" in shown  # no direction override
    assert any("<script>window.__nbsCanary=1</script>" in e for e in att["excerpts"])
    assert r["counters"]["deltas"] > len(texts), "the payloads did not stream in pieces"


def _rgb(css: str | None) -> tuple[float, float, float]:
    m = re.match(r"rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)", css or "")
    assert m, f"not a color: {css!r}"
    r, g, b = (float(x) for x in m.groups())
    return r, g, b


def _luminance(css: str | None) -> float:
    def lin(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = _rgb(css)
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


def _contrast(a: str | None, b: str | None) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


THEME_ANSWER = """## Streaming, explained

A **long answer** with `inline code`, a [link](https://example.com) and a list:

- the kernel stays free
- the view renders once per frame
  - nested item

| stage | owner | rate |
|:------|:-----:|-----:|
| source | worker thread | any |
| pump | kernel | ≤ 30/s |

```python
def stream(pieces, rate=2000):
    # one delta per flush, never per token
    return [p.upper() for p in pieces if p]
```

> Model output is untrusted: it is sanitized before it reaches the page.
"""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_themes(
    jupyterlab: JupyterLab,
    run_scenario: RunScenario,
    notebook_name: str,
    theme_setting: Any,
    theme: str,
) -> None:
    theme_setting(THEME_NAMES[theme])
    cell = (
        "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        f"chat = ChatWidget(ScriptedSource({THEME_ANSWER!r}, rate=2000), title='nbstream',\n"
        "                  system_prompt=None)\n"
        "chat.send('Explain streaming, with code and a table')\n"
        "chat"
    )
    stem = notebook_name.removesuffix(".ipynb")
    lab_nb = jupyterlab.write_notebook(f"{stem}-lab.ipynb", [cell])
    nb7 = jupyterlab.write_notebook(f"{stem}-nb7.ipynb", [cell])
    r = run_scenario("themes", timeout=240, lab_notebook=lab_nb, nb7_notebook=nb7, label=theme)

    for app in ("lab", "notebook"):
        m = r[app]
        where = f"{app} ({theme})"
        assert m["theme_name"] == THEME_NAMES[theme], where
        # rendered: a real box with the whole answer in it, every kind of block
        assert m["width"] > 200 and m["height"] > 150, (where, m)
        assert m["text_length"] > 300, (where, m)
        blocks = m["blocks"]
        assert blocks["headings"] >= 1 and blocks["tables"] == 1, (where, blocks)
        assert blocks["code_blocks"] == 1 and blocks["list_items"] >= 3, (where, blocks)
        assert blocks["highlighted_spans"] >= 3, (where, blocks)
        # styled, and in the theme's colors
        c = m["colors"]
        assert c["chat_bg"] == c["theme_bg"], (where, c)
        assert c["chat_fg"] == c["theme_fg"], (where, c)
        dark = _luminance(c["chat_bg"]) < 0.2
        assert dark == (theme == "dark"), (where, c)
        assert _contrast(c["chat_fg"], c["chat_bg"]) >= 4.5, (where, c)
        assert _contrast(c["code_fg"], c["code_bg"]) >= 4.5, (where, c)
        assert c["keyword"] != c["code_fg"], (where, c)  # highlighting shows
        assert m["styled"]["border_radius"] == "6px", (where, m["styled"])
        assert "mono" in m["styled"]["code_font"].lower(), (where, m["styled"])
        assert m["styled"]["send_visible"], where
        # the answer uses the cell's width (no bubble sized to its first lines): the
        # code block spans the message list; prose keeps its measure
        lay = m["layout"]
        assert lay["code_width"] >= 0.9 * lay["list_width"], (where, lay)
        assert lay["list_width"] > lay["measure_px"], (where, lay)
        assert abs(lay["paragraph_width"] - lay["measure_px"]) <= 1, (where, lay)
        for shot in m["screenshots"].values():
            assert Path(shot).is_file() and Path(shot).stat().st_size > 5_000, shot
    narrow = r["lab"]["narrow"]
    assert narrow["overflow"] <= 1 and narrow["buttons_inside"], narrow


def _bench_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "browser_markdown", REPO / "benchmarks" / "browser_markdown.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_markdown_bench_short_run(
    jupyterlab: JupyterLab, run_scenario: RunScenario, notebook_name: str
) -> None:
    """2,000 pieces at 2,000/s through the benchmark scenario: figures, one render per frame."""
    bench = _bench_module()
    pieces = 2_000
    timeline = notebook_name.replace(".ipynb", ".timeline.json")
    path = jupyterlab.write_notebook(notebook_name, bench.notebook_cells(pieces, 2000.0, timeline))
    r = run_scenario(
        "markdown_bench", timeout=180, notebook=path, timeline=timeline, mode="incremental"
    )
    # a late wake-up of the source may emit several words as one piece
    assert r["status"] == "done" and 0.9 * pieces <= r["pieces"] <= pieces, r
    assert r["renders_per_frame"] <= 1.0, r
    assert r["dom_updates"]["count"] > 5, r["dom_updates"]
    assert r["lag_ms"]["measured"] == r["pieces"], r["lag_ms"]  # every piece was seen
    assert r["frames"]["count"] > 10, r["frames"]
    # the per-stage breakdown found each delta on the wire (it parses the update's keys)
    stages = r["stages_ms"]
    assert stages["deltas_received"] > 5 and stages["measured"] >= 0.9 * r["pieces"], stages
    print(json.dumps({k: r[k] for k in ("long_tasks", "frames", "dom_updates", "lag_ms")}))
