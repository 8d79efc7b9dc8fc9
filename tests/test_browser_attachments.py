"""Attachments in the view (#21), in real JupyterLab and headless Chromium, in the light
and the dark theme: pick (the Attach button, by keyboard, through the file chooser),
paste and drop; thumbnails with remove buttons; what Send carries to the kernel and how
the question shows it; the view's refusals (type, size) and the kernel's (the view is
not trusted: the draft comes back). Screenshots: test-artifacts/test_attachments_in_
the_view_<theme>_-{tray,question,notice}-<theme>.png."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import THEME_NAMES, JupyterLab, RunScenario
from PIL import Image

pytestmark = pytest.mark.browser

NOTEBOOK = [
    "import threading\n"
    "from nbstream import AttachmentLimits, ChatWidget\n"
    "from nbstream.sources import IteratorSource, Source\n"
    "SEEN = []\n"
    "def echo(msgs):\n"
    "    got = msgs[-1].get('attachments', ())\n"
    "    SEEN.append([(a.name, a.mime, a.width, a.height) for a in got])\n"
    "    yield 'Received: ' + '; '.join(a.describe() for a in got)\n"
    "class TextOnly(Source):\n"
    "    def generate(self, messages, emit, cancel):\n"
    "        emit('text only')\n"
    "chat = ChatWidget(IteratorSource(echo), title='takes anything')\n"
    "chat",
    "small = ChatWidget(TextOnly(), title='text only, 40 KB',\n"
    "                   attachment_limits=AttachmentLimits(max_bytes=40_000))\n"
    "small",
    "stale = ChatWidget(IteratorSource(echo), title='stale policy')\n"
    "stale",
    "stale.source = TextOnly()  # the view still thinks it takes images",
]


def _png(size: tuple[int, int]) -> str:
    # a gradient: compresses well, so the 3000-px one stays a small file
    im = Image.linear_gradient("L").resize(size).convert("RGB")
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _rgb(css: str | None) -> tuple[float, ...]:
    m = re.match(r"rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)", css or "")
    assert m, f"not a color: {css!r}"
    return tuple(float(x) / 255 for x in m.groups())


def _contrast(a: str | None, b: str | None) -> float:
    def lum(c: str | None) -> float:
        def ch(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        r, g, bl = _rgb(c)
        return 0.2126 * ch(r) + 0.7152 * ch(g) + 0.0722 * ch(bl)

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_attachments_in_the_view(jupyterlab: JupyterLab, run_scenario: RunScenario,
                                 notebook_name: str, theme_setting: Any, theme: str) -> None:
    theme_setting(THEME_NAMES[theme])
    path = jupyterlab.write_notebook(notebook_name, NOTEBOOK)
    r = run_scenario("attach", timeout=300, notebook=path, label=theme,
                     png_b64=_png((3000, 2000)), small_png_b64=_png((64, 48)),
                     csv="region,units\nnorth,3\nsouth,4\n")
    assert r["theme"] == THEME_NAMES[theme]

    # pick (keyboard -> file chooser), paste, drop; one removed by keyboard
    assert r["chooser_multiple"] and r["paste_taken"]
    assert r["drop"] == {"over_accepted": True, "dropping": True, "dropped": True}
    tray = r["tray"]
    assert not tray["hidden"]
    # the 3000 x 2000 image was downscaled in the view before sending
    assert tray["labels"][1] == "data.csv (29 B)" and tray["labels"][2].startswith("pasted.png (")
    assert tray["labels"][0].startswith("photo.png (")
    assert [t is not None and t["loaded"] and t["src"] == "data:image/png;base64," for t in
            tray["thumbs"]] == [True, False, True]  # a CSV has an icon, not a picture
    assert tray["removes"] == ["Remove photo.png", "Remove data.csv", "Remove pasted.png"]
    assert "nbs-attach-remove" in r["focus_after_remove"]  # the keyboard stays in the tray
    c = tray["colors"]
    assert _contrast(c["label_fg"], c["item_bg"]) >= 4.5, c
    assert _contrast(c["attach_fg"], c["attach_bg"]) >= 4.5, c
    dark = sum(_rgb(c["chat_bg"])) / 3 < 0.3
    assert dark == (theme == "dark"), c

    # sent: the question shows thumbnails and a chip; the source got them all
    q = r["question"]
    assert q["text"] == "What is in these?" and q["before_text"]
    assert [(t["alt"], t["loaded"], t["src"]) for t in q["thumbs"]] == [
        ("photo.png", True, "data:image/png;base64,"), ("pasted.png", True,
                                                         "data:image/png;base64,")]
    assert all(0 < t["width"] <= 160 for t in q["thumbs"])
    assert q["chips"] == ["data.csv (text/csv, 29 B)"]
    assert q["tags"] == ["BUTTON", "DETAILS", "IMG", "PRE", "SUMMARY"]
    assert _contrast(q["chip_fg"], q["chip_bg"]) >= 4.5, q
    assert re.fullmatch(r"Received: photo\.png \(image/png, 2048×1365 px, [\d.]+ KB\); "
                        r"data\.csv \(text/csv, 29 B\); "
                        r"pasted\.png \(image/png, 64×48 px, \d+ B\)", r["reply"].strip()), r["reply"]
    assert r["tray_after_send"]["hidden"] and r["tray_after_send"]["input"] == ""
    assert r["expanded"]["expanded"] == "true" and r["expanded"]["width"] > 160

    # refused in the view: a type the source does not take, a size over its limit
    assert r["refused_type"] == "Not attached: TextOnly takes no images (photo.png)."
    assert re.fullmatch(r"Not attached: big\.csv is 58\.6 KB; the limit is 39\.1 KB\.",
                        r["refused_size"]), r["refused_size"]
    assert r["tray_refused"]["hidden"] and r["tray_refused"]["labels"] == []
    assert "image/png" not in r["picker_accept"] and "text/*" in r["picker_accept"]
    assert _contrast(r["tray_refused"]["colors"]["notice_fg"],
                     r["tray_refused"]["colors"]["chat_bg"]) >= 4.5

    # refused by the kernel (the view's policy was stale): question and file come back
    k = r["kernel_refusal"]
    assert k["input"] == "See this?" and k["labels"][0].startswith("photo.png (")
    assert k["notice"].startswith("Not sent: send(attachments=...): TextOnly takes no images")
    assert k["messages"] == 0
    assert r["dialogs"] == []
    for shot in ("tray_shot", "question_shot", "notice_shot"):
        assert Path(r[shot]).is_file() and Path(r[shot]).stat().st_size > 3_000, shot
