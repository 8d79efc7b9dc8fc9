"""Attachments in a real kernel (#21): an image sent at turn 3 travels once, as its preview
in a binary buffer, and no later turn carries it (turn bytes measured on IOPub, buffers
counted); a notebook saved by nbclient (``store_widget_state=True``) keeps the question's
attachments and the preview, within the documented bound."""

from __future__ import annotations

import base64
import io
import json
import statistics
import sys
from pathlib import Path

import nbformat
import pytest
from _wire import conversation_of
from nbclient import NotebookClient
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import turn_bytes  # noqa: E402

pytestmark = pytest.mark.kernel


def test_an_image_sent_at_turn_3_is_sent_once_and_the_turn_cost_stays_flat() -> None:
    got = turn_bytes.measure(str(ROOT), turns=20, chars=2000, rate=4000.0, attach_at=3)
    assert got["origin"].startswith(str(ROOT)) and got["texts_ok"]
    binary = got["buffer_bytes"]
    # turn 3 carries the preview (a JPEG of a photo-like image, far smaller than the image)
    assert binary[2] == got["preview_bytes"] > 1000
    assert got["preview_bytes"] < got["image_bytes"] / 20
    # and no other turn carries a byte of it
    assert [b for k, b in enumerate(binary, start=1) if k != 3] == [0] * 19
    sizes = [b for b, _ in got["turns"]]
    assert sizes[2] > sizes[3] + got["preview_bytes"]
    # after the image, a turn costs what it cost before (means: +-6 % from flush timing)
    before = statistics.mean(sizes[:2] + sizes[3:8])
    after = statistics.mean(sizes[-7:])
    assert 0.9 * before <= after <= 1.1 * before, (before, after, sizes)


SAVED = '''
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from nbstream import ChatWidget
from nbstream.sources import ScriptedSource

fig, ax = plt.subplots(figsize=(8, 6), dpi=150)
ax.plot(range(100), [i * i for i in range(100)])
chat = ChatWidget(ScriptedSource(lambda msgs: f"{len(msgs[-1].get('attachments', ()))} files"))
chat.send("What does this show?", attachments=[fig, pd.DataFrame({"x": [1, 2]})]).wait()
chat.send("Thanks").wait()
chat
'''


def test_nbclient_saves_the_attachments_previews_within_the_bound(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SAVED)])
    client = NotebookClient(nb, timeout=180, kernel_name="python3", store_widget_state=True)
    client.execute()
    models = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    (model,) = [m for m in models.values() if "last_id" in m["state"]]
    state = model["state"]
    shown = conversation_of(state)
    assert [(e["role"], e["text"]) for e in shown] == [
        ("user", "What does this show?"), ("assistant", "2 files"),
        ("user", "Thanks"), ("assistant", "0 files")]
    fig_meta, table_meta = shown[0]["attachments"]
    assert (fig_meta["name"], fig_meta["mime"], fig_meta["kind"]) == (
        "figure.png", "image/png", "image")
    assert table_meta["excerpt"] == "x\n1\n2\n" and "preview" not in table_meta
    # the preview is a binary buffer of the model, at its key's path (base64 in the file)
    (buf,) = model["buffers"]
    assert buf["path"] == ["m1.a1"] and buf["encoding"] == "base64"
    preview = Image.open(io.BytesIO(base64.b64decode(buf["data"])))
    assert max(preview.size) == 384 == max(fig_meta["preview"]["width"],
                                           fig_meta["preview"]["height"])
    # the documented bound: an image costs the saved notebook its preview (<= 96 KB, here
    # a PNG under 64 KB), never the image (a 1,200 x 900 figure) itself
    assert len(buf["data"]) * 3 / 4 <= 96 * 1024
    assert fig_meta["size"] > len(base64.b64decode(buf["data"]))
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    assert len(json.dumps(model)) < 100_000
