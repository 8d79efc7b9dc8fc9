"""Browser benchmark: a long Markdown answer streamed into a real JupyterLab page.

A ScriptedSource types 20,000 pieces of model-shaped Markdown (the corpus,
``benchmarks/corpus``: headings, lists, tables, code blocks, math, CJK, emoji;
tokenizer-sized pieces, ``_corpus.py``) at 2,000 pieces/s into a ChatWidget in
JupyterLab, in headless Chromium; the page records long tasks, frames, every
DOM update of the widget and the token-to-pixel lag (tests/browser/markdown_bench.mjs).
The same text then goes through the naive way, a full re-render of the whole
answer per frame (``full``), and, with ``--modes incremental,per-view``,
through the previous frame loop (a loop per view, the widget's ``debug`` trait
``{"frames": "per-view"}``) for comparison. Prints a table of medians; not a timed test.

    .venv/bin/python benchmarks/browser_markdown.py                 # 20,000 pieces at 2,000/s
    .venv/bin/python benchmarks/browser_markdown.py --pieces 5000 --repeat 3 --json out.json

Needs what the browser tests need: node, tests/browser/node_modules, /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BROWSER_DIR = REPO / "tests" / "browser"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import kernel_source  # noqa: E402


def interval_arg(interval: float | None) -> str:
    """``, interval=X`` for a ChatWidget call, or nothing (the widget's default)."""
    return "" if interval is None else f", interval={interval}"


def debug_line(name: str, debug: dict[str, Any] | None) -> str:
    """``name.debug = {...}`` (the widget's debugging switches: the previous ways its
    views can be switched to, ViewDebug in nbstream/widgets/protocol.py), or nothing."""
    return f"{name}.debug = {debug!r}\n" if debug else ""


def mode_debug(mode: str, ack_gap_ms: float | None = None) -> dict[str, Any]:
    """The ``debug`` switches of a run in ``mode`` (:data:`MODES`), with another least
    gap between ack rounds."""
    debug: dict[str, Any] = dict(MODES[mode])
    if ack_gap_ms is not None:
        debug["ack_gap_ms"] = ack_gap_ms
    return debug


def notebook_cells(
    pieces: int, rate: float, timeline: str, interval: float | None = None,
    debug: dict[str, Any] | None = None,
) -> list[str]:
    """Cell 0: the widget (with ``debug`` switches); cell 1: write the last reply's
    timeline (wall clock) to ``timeline``.

    The timeline counts characters as the page does (UTF-16 code units: an
    emoji is 2), so that a piece is matched with the DOM update that showed it.
    """
    widget = (
        kernel_source()
        + "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        f"TEXT = corpus_pieces({pieces})\n"
        f"chat = ChatWidget(ScriptedSource(TEXT, rate={rate}){interval_arg(interval)})\n"
        f"{debug_line('chat', debug)}"
        "chat"
    )
    dump = (
        "import json, time\n"
        "_r = chat.last\n"
        "_start, _pieces, _flushes = _r._stream.timeline()\n"
        "_off = time.time() - time.monotonic()\n"
        "_t0 = (_pieces[0][0] + _off) * 1000 if _pieces else 0.0\n"
        "_full = ''.join(TEXT)\n"
        "def _units(counts):\n"
        "    # code points -> UTF-16 code units, walking the text in order\n"
        "    pos, out = 0, []\n"
        "    for n in counts:\n"
        "        out.append(len(_full[pos:pos + n].encode('utf-16-le')) // 2)\n"
        "        pos += n\n"
        "    return out\n"
        "_fl = list(_flushes)\n"
        f"with open({timeline!r}, 'w') as f:\n"
        "    json.dump({'t0_ms': _t0,\n"
        "               'offsets_ms': [round((t + _off) * 1000 - _t0, 2) for t, _ in _pieces],\n"
        "               'chars': _units([n for _, n in _pieces]), 'stats': _r.stats,\n"
        "               'flushes': [(f.seq, round((f.first_piece_at + _off) * 1000 - _t0, 2),\n"
        "                            round((f.sent_at + _off) * 1000 - _t0, 2), u)\n"
        "                           for f, u in zip(_fl, _units([f.chars for f in _fl]))],\n"
        "               'status': _r.status}, f)\n"
        "print('timeline written')"
    )
    return [widget, dump]


def run_node(lab: Any, name: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run tests/browser/<name>.mjs against ``lab``; the JSON of its last stdout line."""
    from conftest import ARTIFACTS, CHROMIUM, OFFLINE_ENV

    env = {
        **os.environ,
        **OFFLINE_ENV,
        "NBS_URL": lab.url,
        "NBS_TOKEN": lab.token,
        "NBS_PARAMS": json.dumps(params),
        "NBS_ARTIFACTS": str(ARTIFACTS),
        "NBS_ARTIFACT": f"bench-{params.get('mode', name)}",
        "NBS_CHROMIUM": CHROMIUM,
        "NBS_TIMEOUT_MS": str(int((timeout - 10) * 1000)),
    }
    proc = subprocess.run(
        ["node", str(BROWSER_DIR / f"{name}.mjs")],
        cwd=BROWSER_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    result = json.loads(lines[-1]) if lines else {}
    if proc.returncode != 0 or not result.get("ok"):
        raise RuntimeError(
            f"{name} failed ({proc.returncode}): {result.get('error')}\n{proc.stderr[-3000:]}"
        )
    return dict(result)


def run_mode(
    lab: Any,
    mode: str,
    pieces: int,
    rate: float,
    rep: int,
    interval: float | None = None,
    ack_gap_ms: float | None = None,
) -> dict[str, Any]:
    name = f"bench-{mode}-{rep}.ipynb"
    timeline = f"bench-{mode}-{rep}.timeline.json"
    path = lab.write_notebook(
        name, notebook_cells(pieces, rate, timeline, interval, mode_debug(mode, ack_gap_ms)))
    try:
        return run_node(
            lab,
            "markdown_bench",
            {"notebook": path, "timeline": timeline, "mode": mode, "timeout_ms": 300_000},
            timeout=420,
        )
    finally:
        lab.shutdown_kernels()


#: mode -> the widget's debug switches (ViewDebug in nbstream/widgets/protocol.py): the
#: widget as shipped, a full re-render of the whole answer per frame (the naive way), and
#: the previous frame loop (each view its own animation frames, no page budget)
MODES: dict[str, dict[str, str]] = {
    "incremental": {},
    "full": {"markdown": "full"},
    "per-view": {"frames": "per-view"},
}

#: (column title, path into a result, format)
COLUMNS: list[tuple[str, tuple[str, ...], str]] = [
    ("long tasks", ("long_tasks", "count"), "{:.0f}"),
    ("longest ms", ("long_tasks", "max_ms"), "{:.0f}"),
    ("frames", ("frames", "count"), "{:.0f}"),
    ("gap p95 ms", ("frames", "gap_p95_ms"), "{:.1f}"),
    ("gap max ms", ("frames", "gap_max_ms"), "{:.0f}"),
    ("DOM upd/frame max", ("dom_updates", "per_frame_max"), "{:.0f}"),
    ("records/upd p50", ("dom_updates", "records_p50"), "{:.0f}"),
    ("records/upd max", ("dom_updates", "records_max"), "{:.0f}"),
    ("lag p50 ms", ("lag_ms", "p50"), "{:.0f}"),
    ("lag p95 ms", ("lag_ms", "p95"), "{:.0f}"),
    ("lag max ms", ("lag_ms", "max"), "{:.0f}"),
    ("last lag ms", ("lag_ms", "last"), "{:.0f}"),
    ("stream s", ("stream_ms",), "{:.1f}"),
]

#: the lag by stage, per piece (p50): see tests/browser/markdown_bench.mjs
STAGES: list[tuple[str, tuple[str, ...], str]] = [
    ("kernel p50", ("stages_ms", "kernel", "p50"), "{:.0f}"),
    ("wire p50", ("stages_ms", "wire", "p50"), "{:.0f}"),
    ("to DOM p50", ("stages_ms", "to_dom", "p50"), "{:.0f}"),
    ("to paint p50", ("stages_ms", "to_paint", "p50"), "{:.0f}"),
    ("kernel p95", ("stages_ms", "kernel", "p95"), "{:.0f}"),
    ("wire p95", ("stages_ms", "wire", "p95"), "{:.0f}"),
    ("to DOM p95", ("stages_ms", "to_dom", "p95"), "{:.0f}"),
    ("to paint p95", ("stages_ms", "to_paint", "p95"), "{:.0f}"),
    ("lag p50", ("lag_ms", "p50"), "{:.0f}"),
]


def _get(result: dict[str, Any], path: tuple[str, ...]) -> float | None:
    x: Any = result
    for key in path:
        x = x.get(key) if isinstance(x, dict) else None
    return float(x) if isinstance(x, (int, float)) else None


def table(results: dict[str, list[dict[str, Any]]],
          columns: list[tuple[str, tuple[str, ...], str]] = COLUMNS) -> str:
    rows = [["mode", *[c[0] for c in columns]]]
    for mode, runs in results.items():
        row = [mode]
        for _title, path, fmt in columns:
            values = [v for r in runs if (v := _get(r, path)) is not None]
            if path == ("stream_ms",):
                values = [v / 1000 for v in values]
            row.append(fmt.format(statistics.median(values)) if values else "-")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pieces", type=int, default=20_000, help="pieces of Markdown (the corpus)")
    ap.add_argument("--rate", type=float, default=2_000.0, help="pieces per second")
    ap.add_argument("--modes", default="incremental,full", help=", ".join(MODES))
    ap.add_argument("--repeat", type=int, default=1, help="runs per mode (medians reported)")
    ap.add_argument("--json", type=Path, help="also write every run's figures here")
    ap.add_argument("--interval", type=float, default=None,
                    help="the widget's flush interval, s (default: pump.DEFAULT_INTERVAL)")
    ap.add_argument("--ack-gap", type=float, default=None,
                    help="least ms between the view's ack rounds (default: frame.ts ACK_GAP_MS)")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import start_jupyterlab

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            ap.error(f"--modes: unknown mode {m!r} (known: {', '.join(MODES)})")
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nbs-bench-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with start_jupyterlab(root, Path(tmp) / "home") as lab:
            for rep in range(args.repeat):
                for mode in modes:
                    loads.append(os.getloadavg()[0])
                    r = run_mode(
                        lab, mode, args.pieces, args.rate, rep, args.interval, args.ack_gap
                    )
                    results[mode].append(r)
                    print(
                        f"[{mode} #{rep + 1}] {r['pieces']} pieces, {r['chars']} chars, "
                        f"status {r['status']}, long tasks {r['long_tasks']}, "
                        f"lag {r['lag_ms']}",
                        file=sys.stderr,
                    )
    print(
        f"\n{args.pieces:,} pieces of Markdown at {args.rate:,.0f} pieces/s into JupyterLab "
        f"(headless Chromium); medians of {args.repeat} run(s); 1-min load average "
        f"median {statistics.median(loads):.1f} (min {min(loads):.1f}, max {max(loads):.1f}) "
        f"on {os.cpu_count()} CPUs\n"
    )
    print(table(results))
    print("\nToken-to-pixel lag by stage, ms per piece: kernel (produced -> sent), wire (sent ->"
          " received by the page), to DOM (-> shown), to paint (-> next frame)\n")
    print(table(results, STAGES))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
