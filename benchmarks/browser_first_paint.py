"""Browser benchmark: the first chat in a fresh page, with the heavy renderers as chunks
against the previous way (one bundle holding them).

Each run opens a notebook in a fresh Chromium (real JupyterLab, a fresh kernel) and
runs the cell that makes a ``ChatWidget`` and shows it, with one short plain answer
(tests/browser/first_paint.mjs). Printed per way, medians (min-max) of interleaved
rounds: the time from running the cell to the chat's first paint, the script the
page parsed for it (the blob: modules: loader, bundle, any chunk), the websocket
bytes the kernel sent until then, and the chunks imported. The ways:

* **chunks**: as shipped: the runtime widget's bundle (``static/widget.js``) holds
  no Temml, no highlight.js and no table of character references; they come as
  chunks when a message needs them;
* **one bundle (previous)**: the runtime carries ``static/standalone.js`` (every
  chunk inside, what every view parsed before), set in the cell before the first
  widget.

    .venv/bin/python benchmarks/browser_first_paint.py [--rounds 3] [--json out.json]

Needs what the browser tests need: node, tests/browser/node_modules, /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser_markdown import run_node  # noqa: E402

ANSWER = "Paris is the capital of France. It is known for the **Louvre** and the Seine."
WAYS = {
    "chunks": "",
    "one bundle (previous)": (
        "import nbstream.widgets.runtime as _rt\n_rt._bundle_file = 'standalone.js'\n"),
}


def cell(way: str) -> str:
    return (
        WAYS[way] + "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        f"chat = ChatWidget(ScriptedSource({ANSWER!r}, rate=2000))\n"
        "chat.send('What is the capital of France?')\n"
        "chat"
    )


COLUMNS = [("first paint ms", "first_paint_ms"), ("script parsed KB", "script_kb"),
           ("kernel→page KB", "ws_kb")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import start_jupyterlab

    results: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nbs-paint-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with start_jupyterlab(root, Path(tmp) / "home") as lab:
            for rnd in range(args.rounds):
                order = list(WAYS) if rnd % 2 == 0 else list(WAYS)[::-1]
                for way in order:
                    path = lab.write_notebook(f"paint-{rnd}-{len(results[way])}-"
                                              f"{'prev' if WAYS[way] else 'chunks'}.ipynb",
                                              [cell(way)])
                    loads.append(os.getloadavg()[0])
                    try:
                        r = run_node(lab, "first_paint", {"notebook": path}, timeout=240)
                    finally:
                        lab.shutdown_kernels()
                    results[way].append(r)
                    print(f"[{way} #{rnd + 1}] " + json.dumps(
                        {k: r[k] for k in ("first_paint_ms", "script_kb", "scripts", "ws_kb",
                                           "chunk_loads")}), file=sys.stderr)
    print(f"\nThe first chat in a fresh page (real JupyterLab + headless Chromium, a fresh "
          f"kernel each), medians (min–max) of {args.rounds} interleaved round(s); 1-min load "
          f"average during the runs: median {statistics.median(loads):.1f} (min {min(loads):.1f}, "
          f"max {max(loads):.1f}) on {os.cpu_count()} CPUs\n")
    print("| way | " + " | ".join(t for t, _ in COLUMNS) + " | chunks imported |")
    print("|---|" + "---:|" * len(COLUMNS) + "---|")
    for way, runs in results.items():
        cells = []
        for _, key in COLUMNS:
            v = [float(r[key]) for r in runs]
            spread = f" ({min(v):.0f}–{max(v):.0f})" if len(v) > 1 else ""
            cells.append(f"{statistics.median(v):.0f}{spread}")
        loads_seen = sorted({",".join(r["chunk_loads"]) or "none" for r in runs})
        print(f"| {way} | " + " | ".join(cells) + f" | {'; '.join(loads_seen)} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
