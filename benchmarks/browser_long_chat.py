"""Browser benchmark: a chat opened with a long history, lazily rendered against the
previous way (every message rendered when the chat is shown), in real JupyterLab +
headless Chromium (issue 19, item 3).

The history is model-shaped (``benchmarks/_history.py``: headings, lists, tables,
code, math, CJK, emoji; 1,000 messages are ~0.6 MB of Markdown), given as
``ChatWidget(source, messages=...)``. Two parts, each in interleaved rounds:

* **Open** (tests/browser/long_chat_bench.mjs), for 1 message (what opening any chat
  costs in this page: JupyterLab running the cell, the widget's script, the first
  render: the baseline), 100, 1,000 and 5,000 messages:
  from running the cell to the end of the chat first shown (rendered), the long
  tasks until then (and whose code ran longest in each, from the browser's long
  animation frames: nbstream's modules or the page's, JupyterLab running the cell
  being one) and until the chat settled, the DOM nodes and JS heap the chat
  added (CDP ``Performance.getMetrics`` after a forced GC), and a reader scrolling
  back with the wheel (100 px every 50 ms for ``--wheel`` seconds): frame gaps over
  50 ms and long tasks.
* **Stream at its end** (tests/browser/markdown_bench.mjs, as browser_markdown.py):
  a long Markdown answer streamed at the end of the 1,000-message chat, against the
  same answer in a fresh chat: token-to-DOM lag, long tasks, frame gaps.

Prints tables of medians (min-max) and the load average; not a timed test.

    .venv/bin/python benchmarks/browser_long_chat.py                     # everything, 3 rounds
    .venv/bin/python benchmarks/browser_long_chat.py --sizes 1000 --rounds 1 --parts open
    .venv/bin/python benchmarks/browser_long_chat.py --sizes 1,1000 --parts open \
        --modes lazy --trace /tmp/traces --json /tmp/open.json   # long tasks explained

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

from browser_markdown import debug_line, notebook_cells, run_node  # noqa: E402

MODES = ("lazy", "at-once")
HISTORY = (
    "import sys\n"
    f"sys.path.insert(0, {str(REPO / 'benchmarks')!r})\n"
    "from _history import history\n"
)


def mode_debug(mode: str) -> dict[str, Any]:
    """The widget's ``debug`` switches for ``mode``: "lazy" as shipped, "at-once" the
    previous way (ViewDebug.lazy in nbstream/widgets/protocol.py)."""
    return {"lazy": "off"} if mode == "at-once" else {}


def open_cell(n: int, mode: str) -> str:
    return (
        HISTORY + "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        f"chat = ChatWidget(ScriptedSource('ok'), messages=history({n}))\n"
        f"{debug_line('chat', mode_debug(mode))}"
        "chat"
    )


def stream_cells(n: int, mode: str, pieces: int, rate: float, timeline: str) -> list[str]:
    """browser_markdown's notebook (the same answer, the same timeline cell), with a history."""
    cells = notebook_cells(pieces, rate, timeline, debug=mode_debug(mode))
    plain = f"chat = ChatWidget(ScriptedSource(TEXT, rate={rate}))"
    assert plain in cells[0], "browser_markdown.notebook_cells changed: update this benchmark"
    if n > 0:
        cells[0] = HISTORY + cells[0].replace(
            plain, f"chat = ChatWidget(ScriptedSource(TEXT, rate={rate}), messages=history({n}))")
    return cells


def _get(r: dict[str, Any], path: tuple[str, ...]) -> Any:
    for k in path:
        r = r.get(k, {}) if isinstance(r, dict) else {}
    return r


def _table(title: str, rows: list[tuple[str, list[dict[str, Any]]]],
           columns: list[tuple[str, tuple[str, ...]]]) -> str:
    lines = [f"| {title} | " + " | ".join(c for c, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for name, runs in rows:
        cells = []
        for _, path in columns:
            v = [float(x) for x in (_get(r, path) for r in runs) if isinstance(x, (int, float))]
            if not v:
                cells.append("-")
                continue
            med = statistics.median(v)
            fmt = "{:.1f}" if abs(med) < 10 and med != int(med) else "{:,.0f}"
            spread = f" ({fmt.format(min(v))}–{fmt.format(max(v))})" if len(v) > 1 else ""
            cells.append(fmt.format(med) + spread)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


OPEN_COLUMNS = [
    ("end shown ms", ("end_shown_ms",)),
    ("in DOM then", ("in_dom_when_shown",)),
    ("long tasks until shown", ("long_tasks_until_shown", "count")),
    ("of them nbstream's", ("long_tasks_until_shown_by_code", "nbstream")),
    ("the page's", ("long_tasks_until_shown_by_code", "page")),
    ("longest ms", ("long_tasks_until_settled", "max_ms")),
    ("long tasks until settled", ("long_tasks_until_settled", "count")),
    ("their total ms", ("long_tasks_until_settled", "total_ms")),
    ("DOM nodes added", ("nodes_added",)),
    ("JS heap added MB", ("heap_added_mb",)),
    ("wheel: gaps>50ms", ("wheel", "gaps_over_50ms")),
    ("wheel: gap p95 ms", ("wheel", "gap_p95_ms")),
    ("wheel: long tasks", ("wheel", "long_tasks")),
    ("wheel: longest ms", ("wheel", "long_max_ms")),
    ("wheel: px scrolled", ("wheel", "scrolled_px")),
]
STREAM_COLUMNS = [
    ("lag p50 ms", ("lag_ms", "p50")),
    ("lag p95 ms", ("lag_ms", "p95")),
    ("to DOM p50 ms", ("stages_ms", "to_dom", "p50")),
    ("long tasks", ("long_tasks", "count")),
    ("longest ms", ("long_tasks", "max_ms")),
    ("frame gap p95 ms", ("frames", "gap_p95_ms")),
    ("gap max ms", ("frames", "gap_max_ms")),
    ("stream s", ("stream_ms",)),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="1,100,1000,5000",
                    help="histories to open (1: what opening any chat costs, the baseline)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds for 1,000 messages and the stream")
    ap.add_argument("--parts", default="open,stream")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--wheel", type=float, default=8.0, help="seconds of wheel scrolling")
    ap.add_argument("--pieces", type=int, default=4000, help="pieces of the streamed answer")
    ap.add_argument("--rate", type=float, default=1000.0, help="pieces per second")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--trace", type=Path,
                    help="a folder for Chrome traces of each opening (their long tasks explained "
                         "in the JSON under 'trace'), of its wheel (-wheel.json, under "
                         "'wheel_trace') and of each stream; NBS_TRACE_CATEGORIES=a,b adds "
                         "trace categories (e.g. disabled-by-default-fonts)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import start_jupyterlab

    sizes = [int(x) for x in args.sizes.split(",")]
    modes = [m for m in args.modes.split(",") if m in MODES]
    parts = set(args.parts.split(","))
    opened: dict[tuple[int, str], list[dict[str, Any]]] = {}
    streamed: dict[str, list[dict[str, Any]]] = {}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nbs-long-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with start_jupyterlab(root, Path(tmp) / "home") as lab:
            k = 0
            for rnd in range(args.rounds):
                if "open" in parts:
                    for n in sizes:
                        if n > 1000 and rnd > 0:
                            continue  # 5,000: one round (DOM and heap; slow at once)
                        for mode in (modes if rnd % 2 == 0 else modes[::-1]):
                            k += 1
                            path = lab.write_notebook(f"open-{k}.ipynb", [open_cell(n, mode)])
                            loads.append(os.getloadavg()[0])
                            try:
                                params: dict[str, Any] = {"notebook": path, "count": n,
                                                          "mode": mode, "wheel_s": args.wheel}
                                if args.trace:
                                    args.trace.mkdir(parents=True, exist_ok=True)
                                    params["trace"] = str(
                                        (args.trace / f"open-{n}-{mode}-{rnd + 1}.json").resolve())
                                r = run_node(lab, "long_chat_bench", params, timeout=900)
                            finally:
                                lab.shutdown_kernels()
                            opened.setdefault((n, mode), []).append(r)
                            print(f"[open {n} {mode} #{rnd + 1}] " + json.dumps(
                                {x: r[x] for x in ("end_shown_ms", "long_tasks_until_shown",
                                                   "long_tasks_until_shown_by_code",
                                                   "long_tasks_until_settled", "nodes_added",
                                                   "heap_added_mb", "wheel")}), file=sys.stderr)
                if "stream" in parts:
                    ways = [("fresh chat", 0, "lazy"), ("end of 1,000 messages", 1000, "lazy"),
                            ("end of 1,000 messages, rendered at once (previous)", 1000,
                             "at-once")]
                    for name, n, mode in (ways if rnd % 2 == 0 else ways[::-1]):
                        if mode not in modes:
                            continue
                        k += 1
                        timeline = f"stream-{k}.timeline.json"
                        path = lab.write_notebook(
                            f"stream-{k}.ipynb",
                            stream_cells(n, mode, args.pieces, args.rate, timeline))
                        loads.append(os.getloadavg()[0])
                        params = {"notebook": path, "timeline": timeline,
                                  "mode": "incremental", "timeout_ms": 300_000}
                        if n:
                            params.update(settle_count=n, settle_ms=3000)
                        if args.trace:
                            args.trace.mkdir(parents=True, exist_ok=True)
                            params["trace"] = str(
                                (args.trace / f"stream-{n}-{mode}-{rnd + 1}.json").resolve())
                        try:
                            r = run_node(lab, "markdown_bench", params, timeout=600)
                        finally:
                            lab.shutdown_kernels()
                        streamed.setdefault(name, []).append(r)
                        print(f"[stream {name} #{rnd + 1}] " + json.dumps(
                            {x: r.get(x) for x in ("lag_ms", "long_tasks", "frames")}),
                            file=sys.stderr)
    print(f"\nA chat opened with a model-shaped history (real JupyterLab + headless Chromium); "
          f"medians (min–max) of {args.rounds} interleaved round(s) for 1,000 messages and the "
          f"stream, one for the other sizes; 1-min load average during the runs: median "
          f"{statistics.median(loads):.1f} (min {min(loads):.1f}, max {max(loads):.1f}) on "
          f"{os.cpu_count()} CPUs\n")
    if opened:
        rows = [(f"{n:,} messages, {mode}", opened[(n, mode)]) for n in sizes for mode in modes
                if (n, mode) in opened]
        print(_table("open", rows, OPEN_COLUMNS))
        print()
    if streamed:
        print(f"A {args.pieces:,}-piece Markdown answer at {args.rate:,.0f} pieces/s:\n")
        print(_table("stream", list(streamed.items()), STREAM_COLUMNS))
    if args.json:
        args.json.write_text(json.dumps({"open": {f"{n}-{m}": v for (n, m), v in opened.items()},
                                         "stream": streamed}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
