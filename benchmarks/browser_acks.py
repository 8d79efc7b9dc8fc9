"""Browser benchmark: what the view's acks cost, sparse acks against an ack per frame.

Every comm message from the browser makes the kernel publish a ``busy`` and an
``idle`` status to every client, so acks cost three messages each. This runs N
ChatWidgets streaming at once in real JupyterLab + headless Chromium, twice per
round, interleaved: once with today's sparse acks (js/src/frame.ts: at most one
round per 500 ms; the pump's window 16, ack timeout 0.8 s) and once the
previous way (an ack per rendered frame; window 4, ack timeout 0.3 s, set on
each widget's channel in the setup cell). The page counts every websocket
frame of the kernel connection by msg_type (tests/browser/acks_bench.mjs).
Prints medians per mode and the machine's load average; not a timed test.

    .venv/bin/python benchmarks/browser_acks.py   # 8 widgets, 1,500 tokens at 250/s, 3 rounds
    .venv/bin/python benchmarks/browser_acks.py --widgets 1 --pieces 3000 --rate 1000

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

from browser_markdown import interval_arg, run_node  # noqa: E402

MODES = ("sparse", "every-frame")


def notebook_cells(
    n: int, pieces: int, rate: float, mode: str, interval: float | None = None,
    ack_gap_ms: float | None = None,
) -> list[str]:
    setup = (
        "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        f"N, PIECES, RATE = {n}, {pieces}, {rate}\n"
        "TEXTS = [' '.join(f'w{i}_{k}' for k in range(PIECES)) for i in range(N)]\n"
        f"chats = [ChatWidget(ScriptedSource(t, rate=RATE){interval_arg(interval)})\n"
        "         for t in TEXTS]\n"
    )
    # the views' debugging switches (ViewDebug in nbstream/widgets/protocol.py)
    debug: dict[str, Any] = {"acks": "every-frame"} if mode == "every-frame" else {}
    if ack_gap_ms is not None and mode != "every-frame":
        debug["ack_gap_ms"] = ack_gap_ms
    if debug:
        setup += f"for c in chats:\n    c.debug = {debug!r}\n"
    if mode == "every-frame":
        # the previous kernel side, for the previous view: window 4, ack timeout 0.3 s
        # (a benchmark reaching into the channel; no module does this)
        setup += "for c in chats:\n    c._channel.window, c._channel.ack_timeout = 4, 0.3\n"
    setup += "for c in chats:\n    display(c)"
    return [setup, 'print("probe-ok")', "for c in chats:\n    c.send('go')"]


#: (column, key in a result, format)
COLUMNS: list[tuple[str, str, str]] = [
    ("k→b msgs", "received_total", "{:.0f}"),
    ("status", "received_status", "{:.0f}"),
    ("comm", "received_comm", "{:.0f}"),
    ("k→b msgs/s", "received_per_s", "{:.0f}"),
    ("acks", "acks_sent", "{:.0f}"),
    ("KB", "received_kb", "{:.0f}"),
    ("long tasks", "long_tasks", "{:.0f}"),
    ("longest ms", "long_max_ms", "{:.0f}"),
    ("gaps>50ms", "frame_gaps_over_50ms", "{:.0f}"),
    ("probe idle ms", "probe_idle_ms", "{:.0f}"),
    ("probe busy ms", "probe_during_ms", "{:.0f}"),
    ("end lag ms", "end_lag_ms", "{:.0f}"),
    ("stream s", "stream_s", "{:.1f}"),
]


def table(results: dict[str, list[dict[str, Any]]]) -> str:
    rows = [["acks", *[c[0] for c in COLUMNS]]]
    for mode, runs in results.items():
        row = [mode]
        for _title, key, fmt in COLUMNS:
            values = [float(r[key]) for r in runs if isinstance(r.get(key), (int, float))]
            spread = f" ({min(values):.0f}–{max(values):.0f})" if len(values) > 1 else ""
            row.append(fmt.format(statistics.median(values)) + spread if values else "-")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--widgets", type=int, default=8)
    ap.add_argument("--pieces", type=int, default=1500, help="pieces per widget")
    ap.add_argument("--rate", type=float, default=250.0, help="pieces per second per widget")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each running both modes")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--interval", type=float, default=None,
                    help="each widget's flush interval, s (default: pump.DEFAULT_INTERVAL)")
    ap.add_argument("--ack-gap", type=float, default=None,
                    help="ms between ack rounds, sparse mode (default: frame.ts ACK_GAP_MS)")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import start_jupyterlab

    modes = [m for m in args.modes.split(",") if m in MODES]
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nbs-acks-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with start_jupyterlab(root, Path(tmp) / "home") as lab:
            for rnd in range(args.rounds):
                order = modes if rnd % 2 == 0 else modes[::-1]  # neither always goes first
                for mode in order:
                    path = lab.write_notebook(
                        f"acks-{mode}-{rnd}.ipynb",
                        notebook_cells(args.widgets, args.pieces, args.rate, mode, args.interval,
                                       args.ack_gap),
                    )
                    loads.append(os.getloadavg()[0])
                    try:
                        r = run_node(lab, "acks_bench", {
                            "notebook": path, "widgets": args.widgets, "acks": mode,
                            "produce_ms": round(args.pieces / args.rate * 1000),
                        }, timeout=300)
                    finally:
                        lab.shutdown_kernels()
                    r["stream_s"] = r["stream_ms"] / 1000
                    r["received_kb"] = r["received_bytes"] / 1024
                    r["received_per_s"] = r["received_total"] / max(0.001, r["stream_s"])
                    results[mode].append(r)
                    print(f"[{mode} #{rnd + 1}] " + json.dumps(
                        {k: r[k] for k in ("received_total", "received_status", "received_comm",
                                           "acks_sent", "long_tasks", "frame_gaps_over_50ms",
                                           "probe_during_ms", "end_lag_ms", "statuses")}),
                          file=sys.stderr)
    print(
        f"\n{args.widgets} widget(s) × {args.pieces:,} pieces at {args.rate:,.0f}/s each, real "
        f"JupyterLab + headless Chromium; medians (min–max) of {args.rounds} interleaved round(s); "
        f"1-min load average during the runs: median {statistics.median(loads):.1f} "
        f"(min {min(loads):.1f}, max {max(loads):.1f}) on {os.cpu_count()} CPUs\n"
    )
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
