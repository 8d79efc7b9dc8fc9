"""Browser benchmark: many streams on one page, the page's frames and the wire.

N ChatWidgets stream model-shaped Markdown at once (the corpus,
``benchmarks/corpus``: headings, lists, tables, code, math, CJK, emoji; each
widget starts at another answer) in real JupyterLab + headless Chromium. Each
round runs every variant, in an order that alternates between rounds; the
variants are set through each widget's ``debug`` trait (``ViewDebug`` in
nbstream/widgets/protocol.py), in the notebook cell that makes the widgets:

* ``shared``: the widget as shipped: every view on the page renders from one
  frame loop with one time budget (js/src/scheduler.ts);
* ``per-view``: the previous way, a frame loop per view (``frames: "per-view"``);
* ``every-frame-acks``: an ack per rendered frame (``acks: "every-frame"``; the
  pump's window 4 and ack timeout 0.3 s, set on each widget's channel), the
  way before sparse acks.

The page counts every websocket frame of the kernel connection by msg_type
(status included: each browser→kernel message makes the kernel publish a busy
and an idle status), long tasks, frames the page missed (gaps > 50 ms between
animation frames), the animation-frame callbacks nbstream's code ran per frame,
and a probe cell's round trip (run from the keyboard, key press to output)
again and again while the widgets stream, against the same probe idle
(tests/browser/acks_bench.mjs). Every view must end showing all of its text
(checked). With ``--trace`` each run is traced (CDP) and the main thread's time
while streaming is printed by rendering step (Layerize, Paint, Layout, ...).
Prints medians (min-max) per variant and the machine's load average; not a
timed test.

    .venv/bin/python benchmarks/browser_acks.py   # 8 widgets, 1,500 pieces at 250/s, 3 rounds
    .venv/bin/python benchmarks/browser_acks.py --widgets 16 --pieces 750 --rate 125
    .venv/bin/python benchmarks/browser_acks.py --viewport-height 4500   # all 8 in sight
    .venv/bin/python benchmarks/browser_acks.py --widgets 1 --pieces 3000 --rate 1000 \\
        --text words --modes shared,every-frame-acks       # the wire alone

``--text words`` streams numbered plain words instead of the corpus: for
measuring the wire alone (message counts), never rendering.

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

from _corpus import corpus_text, kernel_source  # noqa: E402
from browser_markdown import interval_arg, run_node  # noqa: E402

#: variant -> the widgets' debugging switches (ViewDebug in nbstream/widgets/protocol.py)
VARIANTS: dict[str, dict[str, Any]] = {
    "shared": {},
    "per-view": {"frames": "per-view"},
    "every-frame-acks": {"acks": "every-frame"},
}
TEXTS = ("corpus", "words")


def notebook_cells(
    n: int, pieces: int, rate: float, mode: str, interval: float | None = None,
    text: str = "corpus", ack_gap_ms: float | None = None,
) -> list[str]:
    """Cell 0: N widgets; cell 1: the probe; cell 2: every widget asked at once."""
    if text == "corpus":
        setup = (
            kernel_source()
            + f"N, PIECES, RATE = {n}, {pieces}, {rate}\n"
            "TEXTS = [corpus_pieces(PIECES, start=i) for i in range(N)]\n"
        )
    else:
        setup = (
            f"N, PIECES, RATE = {n}, {pieces}, {rate}\n"
            "TEXTS = [' '.join(f'w{i}_{k}' for k in range(PIECES)) for i in range(N)]\n"
        )
    setup = (
        "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        + setup
        + f"chats = [ChatWidget(ScriptedSource(t, rate=RATE){interval_arg(interval)})\n"
        "         for t in TEXTS]\n"
    )
    debug = dict(VARIANTS[mode])
    if ack_gap_ms is not None and mode != "every-frame-acks":
        debug["ack_gap_ms"] = ack_gap_ms
    if debug:
        setup += f"for c in chats:\n    c.debug = {debug!r}\n"
    if mode == "every-frame-acks":
        # the previous kernel side, for the previous view: window 4, ack timeout 0.3 s
        # (a benchmark reaching into the channel; no module does this)
        setup += "for c in chats:\n    c._channel.window, c._channel.ack_timeout = 4, 0.3\n"
    setup += "for c in chats:\n    display(c)"
    return [setup, 'print("probe-ok")', f"for c in chats:\n    c.send({PROMPT!r})"]


PROMPT = "go"


def _js_length(s: str) -> int:
    """``s.length`` in JavaScript: UTF-16 code units (an emoji counts 2)."""
    return len(s.encode("utf-16-le")) // 2


def expected_chars(n: int, pieces: int, text: str) -> list[int]:
    """The characters each view must end showing: the prompt and the whole reply."""
    if text == "corpus":
        return [_js_length(PROMPT + corpus_text(pieces, start=i)) for i in range(n)]
    return [_js_length(PROMPT + " ".join(f"w{i}_{k}" for k in range(pieces))) for i in range(n)]


#: (column, key in a result, format)
COLUMNS: list[tuple[str, tuple[str, ...], str]] = [
    ("long tasks", ("long_tasks",), "{:.0f}"),
    ("longest ms", ("long_max_ms",), "{:.0f}"),
    ("gaps>50ms", ("frame_gaps_over_50ms",), "{:.0f}"),
    ("probe idle p50", ("probe_idle_ms", "p50"), "{:.0f}"),
    ("idle p95", ("probe_idle_ms", "p95"), "{:.0f}"),
    ("probe p50", ("probe_stream_ms", "p50"), "{:.0f}"),
    ("probe p95", ("probe_stream_ms", "p95"), "{:.0f}"),
    ("p95 × idle", ("probe_ratio_p95",), "{:.1f}"),
    ("probes", ("probe_stream_ms", "n"), "{:.0f}"),
    ("rAF cb/frame", ("widget_raf_per_frame",), "{:.2f}"),
    ("renders", ("renders",), "{:.0f}"),
    ("k→b msgs", ("received_total",), "{:.0f}"),
    ("k→b/s", ("received_per_s",), "{:.0f}"),
    ("status", ("received_status",), "{:.0f}"),
    ("acks", ("acks_sent",), "{:.0f}"),
    ("end lag ms", ("end_lag_ms",), "{:.0f}"),
    ("stream s", ("stream_s",), "{:.1f}"),
]

#: the page loop's own figures (js/src/scheduler.ts; the shared variant only): its render
#: frames, and per render frame the views' script, their layout reads (settle) and the
#: frame's cost to the page (start to the first task after it), medians and p95
LOOP_COLUMNS: list[tuple[str, tuple[str, ...], str]] = [
    ("render frames", ("page_loop", "render_frames"), "{:.0f}"),
    ("views/frame", ("loop_views_p50",), "{:.0f}"),
    ("script p50", ("loop_script_p50",), "{:.1f}"),
    ("settle p50", ("loop_settle_p50",), "{:.1f}"),
    ("cost p50", ("loop_cost_p50",), "{:.0f}"),
    ("cost p95", ("loop_cost_p95",), "{:.0f}"),
    ("spacing ms", ("page_loop", "spacing_ms"), "{:.0f}"),
    ("deferred", ("page_loop", "deferred"), "{:.0f}"),
    ("urgent", ("page_loop", "urgent_runs"), "{:.0f}"),
    ("long frames", ("page_loop", "long_frames"), "{:.0f}"),
]

#: rendering steps of the trace (self time of the main thread while streaming, ms)
STEPS = ("Layerize", "Paint", "PrePaint", "Layout", "UpdateLayoutTree", "Commit",
         "IntersectionObserverController::computeIntersections", "HitTest", "FunctionCall",
         "RunMicrotasks", "EventDispatch")


def _get(result: dict[str, Any], path: tuple[str, ...]) -> float | None:
    x: Any = result
    for key in path:
        x = x.get(key) if isinstance(x, dict) else None
    return float(x) if isinstance(x, (int, float)) else None


def _median_cell(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    spread = (f" ({fmt.format(min(values))}–{fmt.format(max(values))})"
              if len(values) > 1 and min(values) != max(values) else "")
    return fmt.format(statistics.median(values)) + spread


def table(results: dict[str, list[dict[str, Any]]],
          columns: list[tuple[str, tuple[str, ...], str]] = COLUMNS) -> str:
    """Medians (min-max) per variant, one row each, as a Markdown table."""
    rows = [["variant", *[c[0] for c in columns]]]
    for mode, runs in results.items():
        row = [mode]
        for _title, path, fmt in columns:
            row.append(_median_cell([v for r in runs if (v := _get(r, path)) is not None], fmt))
        if any(cell != "-" for cell in row[1:]):
            rows.append(row)
    return _markdown(rows) if len(rows) > 1 else ""


def steps_table(results: dict[str, list[dict[str, Any]]]) -> str:
    """Where the main thread's time went while streaming (traced runs): ms per run, and per
    frame the page painted."""
    rows = [["variant", "busy %", "painted frames", *[s.split("::")[0] for s in STEPS]]]
    for mode, runs in results.items():
        traces = [r["trace"] for r in runs if isinstance(r.get("trace"), dict)
                  and "busy_ms_in_stream_by_event" in r["trace"]]
        if not traces:
            continue
        row = [mode,
               _median_cell([t["main_thread_busy_in_stream"] for t in traces], "{:.0f}"),
               _median_cell([t["frames_in_stream"]["painted"] for t in traces], "{:.0f}")]
        for step in STEPS:
            per_frame = [t["busy_ms_in_stream_by_event"].get(step, 0.0)
                         / max(1, t["frames_in_stream"]["painted"]) for t in traces]
            total = [t["busy_ms_in_stream_by_event"].get(step, 0.0) for t in traces]
            row.append(f"{statistics.median(total):.0f} ({statistics.median(per_frame):.2f})")
        rows.append(row)
    return _markdown(rows) if len(rows) > 1 else ""


def _markdown(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
           for r in rows]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def run_round(lab: Any, mode: str, rnd: int, args: argparse.Namespace,
              trace_dir: Path | None) -> dict[str, Any]:
    path = lab.write_notebook(
        f"many-{mode}-{rnd}.ipynb",
        notebook_cells(args.widgets, args.pieces, args.rate, mode, args.interval, args.text,
                       args.ack_gap),
    )
    try:
        r = run_node(lab, "acks_bench", {
            "notebook": path, "widgets": args.widgets, "mode_name": mode,
            "produce_ms": round(args.pieces / args.rate * 1000), "mode": f"many-{mode}-{rnd}",
            "idle_probes": args.idle_probes, "trace": args.trace, "profile": args.profile,
            **({"viewport_height": args.viewport_height} if args.viewport_height else {}),
            **({"trace_file": str(trace_dir / f"many-{mode}-{rnd}.trace.json.gz")}
               if args.trace and trace_dir is not None else {}),
        }, timeout=420)
    finally:
        lab.shutdown_kernels()
    want = expected_chars(args.widgets, args.pieces, args.text)
    if r["chars"] != want or r["statuses"] != ["done"] * args.widgets:
        raise RuntimeError(f"[{mode} #{rnd + 1}] a view did not show its whole text: "
                           f"chars {r['chars']} (expected {want}), statuses {r['statuses']}")
    r["stream_s"] = r["stream_ms"] / 1000
    r["received_per_s"] = r["received_total"] / max(0.001, r["stream_s"])
    idle95 = _get(r, ("probe_idle_ms", "p95"))
    busy95 = _get(r, ("probe_stream_ms", "p95"))
    r["probe_ratio_p95"] = busy95 / idle95 if idle95 and busy95 is not None else None
    recent = (r.get("page_loop") or {}).get("recent") or []
    for key, field in (("views", "views"), ("script", "script_ms"), ("settle", "settle_ms"),
                       ("cost", "cost_ms")):
        values = sorted(f[field] for f in recent if f.get(field) is not None)
        if values:
            r[f"loop_{key}_p50"] = values[len(values) // 2]
            r[f"loop_{key}_p95"] = values[min(len(values) - 1, int(0.95 * len(values)))]
    r["load1"] = os.getloadavg()[0]
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--widgets", type=int, default=8)
    ap.add_argument("--pieces", type=int, default=1500, help="pieces per widget")
    ap.add_argument("--rate", type=float, default=250.0, help="pieces per second per widget")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each running every variant")
    ap.add_argument("--modes", default="shared,per-view", help=", ".join(VARIANTS))
    ap.add_argument("--text", choices=TEXTS, default="corpus",
                    help="corpus (model-shaped Markdown) or words (the wire alone)")
    ap.add_argument("--idle-probes", type=int, default=8, help="probes before the streams")
    ap.add_argument("--trace", action="store_true", help="trace each run (CDP); costs the page")
    ap.add_argument("--profile", action="store_true",
                    help="with --trace: the sampling profiler too (which functions ran)")
    ap.add_argument("--trace-dir", type=Path, help="keep each run's raw trace here")
    ap.add_argument("--viewport-height", type=int, default=None,
                    help="the browser window's height, px (default 900: about two of eight "
                    "widgets in sight; 4500 shows all eight)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--interval", type=float, default=None,
                    help="each widget's flush interval, s (default: pump.DEFAULT_INTERVAL)")
    ap.add_argument("--ack-gap", type=float, default=None,
                    help="ms between a view's ack rounds (default: frame.ts ACK_GAP_MS)")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in VARIANTS:
            ap.error(f"--modes: unknown variant {m!r} (known: {', '.join(VARIANTS)})")

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import start_jupyterlab

    results: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nbs-many-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with start_jupyterlab(root, Path(tmp) / "home") as lab:
            for rnd in range(args.rounds):
                order = modes if rnd % 2 == 0 else modes[::-1]  # none always goes first
                for mode in order:
                    loads.append(os.getloadavg()[0])
                    r = run_round(lab, mode, rnd, args, args.trace_dir)
                    results[mode].append(r)
                    print(f"[{mode} #{rnd + 1}] load {r['load1']:.1f} " + json.dumps(
                        {k: r[k] for k in ("long_tasks", "long_max_ms", "frame_gaps_over_50ms",
                                           "probe_idle_ms", "probe_stream_ms", "renders",
                                           "widget_raf_per_frame", "received_total",
                                           "end_lag_ms", "long_list")}),
                          file=sys.stderr)
                    if args.json:
                        args.json.write_text(json.dumps(results, indent=1))
    print(
        f"\n{args.widgets} widget(s) × {args.pieces:,} pieces at {args.rate:,.0f}/s each "
        f"({args.text}), real JupyterLab + headless Chromium"
        f"{f' (window 1280×{args.viewport_height})' if args.viewport_height else ''}; "
        f"medians (min–max) of {args.rounds} interleaved round(s); 1-min load average "
        f"during the runs: median {statistics.median(loads):.1f} (min {min(loads):.1f}, "
        f"max {max(loads):.1f}) on {os.cpu_count()} CPUs\n"
    )
    print(table(results))
    loop = table(results, LOOP_COLUMNS)
    if loop:
        print("\nThe page loop (shared), per frame that changed the DOM (the latest 120): views,"
              " ms of their script and of their layout reads, the frame's cost to the page\n")
        print(loop)
    steps = steps_table(results)
    if steps:
        print("\nMain thread while streaming (traced), self time by step: ms per run "
              "(ms per painted frame)\n")
        print(steps)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
