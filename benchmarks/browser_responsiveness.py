"""Browser benchmark: is the page responsive while a long answer streams?

In real JupyterLab and Notebook 7 (headless Chromium), a ChatWidget on a
ScriptedSource streams a long model-shaped Markdown answer (20,000 pieces of
the corpus, ``benchmarks/corpus``, at 2,000 pieces/s) while a probe cell
(``print("probe-ok")``) is run from the keyboard again and again; before the
stream, the same probe is timed on the idle page. For each run it records
(tests/browser/responsiveness.mjs):

* the probe's round trip, key press to output in the DOM, p50 / p95 while
  streaming against idle (target: within twice idle);
* long tasks (> 50 ms) from a PerformanceObserver, and from a Chromium
  performance trace of the same span (CDP ``Tracing``), each one explained:
  what started it (animation frame, timer, websocket message event, ...) and
  where its time went (the widget's script, JupyterLab's, style, layout —
  forced by script or not —, paint, GC), with the sampling profiler's busiest
  functions;
* the main thread's busy share during the stream, by the same classes.

Variants (``--variants``) are the widget as shipped (``shipped``) and the ways
it can be switched to for comparison in the same run, through the widget's
``debug`` trait (``ViewDebug`` in nbstream/widgets/protocol.py, set in the
notebook's cell): ``full`` re-renders the whole
answer each frame, ``every-frame-acks`` acks every frame, ``sized-at-once``
lets a block skip layout in the frame it was first laid out (the previous
way: a second style and layout pass in nearly every frame, see js/src/sized.ts);
``per-view`` gives the view its own animation-frame loop instead of the page's
one loop with its budget (the previous way, js/src/scheduler.ts);
``fixed-list`` is an experiment, a style sheet that makes the message list a
relayout boundary (a fixed height, ``contain: strict``). Runs are
interleaved (for each repetition, every front end and variant in turn).
Prints a table of medians; not a timed test.

    .venv/bin/python benchmarks/browser_responsiveness.py      # lab + notebook7, 1 run each
    .venv/bin/python benchmarks/browser_responsiveness.py --repeat 3 \
        --variants shipped,sized-at-once,fixed-list --json out.json
    .venv/bin/python benchmarks/browser_responsiveness.py --pieces 5000 --frontends lab

The trace costs the page a little (``--no-trace`` to leave it out; long tasks
then come from the PerformanceObserver only). Needs what the browser tests
need: node, tests/browser/node_modules, /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from _corpus import kernel_source  # noqa: E402
from browser_markdown import debug_line, run_node  # noqa: E402

#: variant -> the widget's debug switches (its views read them when they render),
#: and an extra style sheet for experiments
VARIANTS: dict[str, dict[str, Any]] = {
    "shipped": {"debug": {}},
    "full": {"debug": {"markdown": "full"}},
    "every-frame-acks": {"debug": {"acks": "every-frame"}},
    "sized-at-once": {"debug": {"sized": "at-once"}},
    "per-view": {"debug": {"frames": "per-view"}},
    # experiment: the message list as a relayout boundary (a fixed height and
    # `contain: strict`), so that a streaming frame lays out the list, not the page
    "fixed-list": {"debug": {}, "css": ".nbs-messages { height: 420px; contain: strict; }"},
}

FRONTENDS = ("lab", "notebook7")


def notebook_cells(pieces: int, rate: float, debug: dict[str, Any] | None = None) -> list[str]:
    """Cell 0: the widget (with ``debug`` switches); cell 1: the probe; cell 2: a place
    for Shift+Enter to land."""
    widget = (
        kernel_source()
        + "from nbstream import ChatWidget\n"
        "from nbstream.sources import ScriptedSource\n"
        f"TEXT = corpus_pieces({pieces})\n"
        f"chat = ChatWidget(ScriptedSource(TEXT, rate={rate}))\n"
        f"{debug_line('chat', debug)}"
        "chat"
    )
    return [widget, 'print("probe-ok")', "pass"]


def run_once(lab: Any, frontend: str, variant: str, pieces: int, rate: float, tag: str,
             trace: bool = True, idle_probes: int = 12, timeout: float = 420,
             trace_dir: Path | None = None) -> dict[str, Any]:
    """One run of tests/browser/responsiveness.mjs against ``lab``; its JSON result."""
    path = lab.write_notebook(f"resp-{tag}.ipynb",
                              notebook_cells(pieces, rate, VARIANTS[variant]["debug"]))
    try:
        r = run_node(
            lab,
            "responsiveness",
            {
                "notebook": path,
                "frontend": frontend,
                "css": VARIANTS[variant].get("css", ""),
                "trace": trace,
                "idle_probes": idle_probes,
                "timeout_ms": int((timeout - 60) * 1000),
                "mode": f"resp-{tag}",
                **({"trace_file": str(trace_dir / f"resp-{tag}.trace.json.gz")}
                   if trace and trace_dir is not None else {}),
            },
            timeout=timeout,
        )
    finally:
        lab.shutdown_kernels()
    r["variant"] = variant
    r["load1"] = os.getloadavg()[0]
    return r


def _get(result: dict[str, Any], path: tuple[str, ...]) -> float | None:
    x: Any = result
    for key in path:
        x = x.get(key) if isinstance(x, dict) else None
    return float(x) if isinstance(x, (int, float)) else None


#: (column title, path into a result, format)
COLUMNS: list[tuple[str, tuple[str, ...], str]] = [
    ("idle p50", ("probe_idle_ms", "p50"), "{:.0f}"),
    ("idle p95", ("probe_idle_ms", "p95"), "{:.0f}"),
    ("stream p50", ("probe_stream_ms", "p50"), "{:.0f}"),
    ("stream p95", ("probe_stream_ms", "p95"), "{:.0f}"),
    ("× p50", ("probe_ratio", "p50"), "{:.1f}"),
    ("× p95", ("probe_ratio", "p95"), "{:.1f}"),
    ("probes", ("probe_stream_ms", "n"), "{:.0f}"),
    ("long tasks", ("long_tasks", "count"), "{:.0f}"),
    ("longest ms", ("long_tasks", "max_ms"), "{:.0f}"),
    ("traced long", ("trace", "long_tasks_in_stream"), "{:.0f}"),
    ("busy %", ("trace", "main_thread_busy_in_stream"), "{:.0f}"),
    ("frames", ("trace", "frames_in_stream", "painted"), "{:.0f}"),
    ("laid out 2×", ("trace", "frames_in_stream", "laid_out_twice"), "{:.0f}"),
    ("layout ms", ("trace", "busy_ms_in_stream_by_class", "layout"), "{:.0f}"),
    ("paint ms", ("trace", "busy_ms_in_stream_by_class", "paint, layers, commit"), "{:.0f}"),
    ("gaps>50", ("frames", "gaps_over_50"), "{:.0f}"),
    ("widget ms/render", ("widget", "render_ms"), "{:.2f}"),
    ("load", ("load1",), "{:.1f}"),
]


def table(results: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    """Medians per (front end, variant), one row each, as a Markdown table."""
    rows = [["front end", "variant", *[c[0] for c in COLUMNS]]]
    for (frontend, variant), runs in results.items():
        row = [frontend, variant]
        for title, path, fmt in COLUMNS:
            values = []
            for r in runs:
                v = _get(r, path)
                if v is not None and title == "widget ms/render":
                    n = _get(r, ("widget", "renders")) or 0
                    v = v / n if n else None
                if v is not None:
                    values.append(v)
            row.append(fmt.format(statistics.median(values)) if values else "-")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
           for r in rows]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def explain(results: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    """What the traced long tasks were, per (front end, variant), over all runs."""
    lines: list[str] = []
    for (frontend, variant), runs in results.items():
        traces = [r["trace"] for r in runs
                  if isinstance(r.get("trace"), dict) and "tasks" in r["trace"]]
        if not traces:
            continue
        triggers: Counter[str] = Counter()
        self_ms: Counter[str] = Counter()
        busy: Counter[str] = Counter()
        samples: Counter[str] = Counter()
        widget_samples = total_samples = 0
        for t in traces:
            for task in t["tasks_explained"]:
                if task["phase"] != "stream":
                    continue
                triggers[task["trigger"]] += 1
                widget_samples += task["samples_in_widget_code"]
                total_samples += task["samples"]
                for s in task["top_samples"]:
                    name, _, n = s.rpartition(" ×")
                    samples[name] += int(n)
            for c, ms in t["self_ms_in_long_tasks"].items():
                self_ms[c] += ms
            for c, ms in t["busy_ms_in_stream_by_class"].items():
                busy[c] += ms
        n = len(traces)
        lines.append(f"\n{frontend}, {variant} ({n} traced run(s)):")
        lines.append("  long tasks in the stream, by what started them: "
                     + (", ".join(f"{k} {v}" for k, v in triggers.most_common()) or "none"))
        if self_ms:
            lines.append("  their time, by class (ms per run): "
                         + ", ".join(f"{k} {v / n:.0f}" for k, v in self_ms.most_common()))
        if total_samples:
            lines.append(f"  profiler samples in them: {widget_samples} of {total_samples} with the"
                         " widget's code on the stack; busiest leaf functions: "
                         + ", ".join(f"{k} ×{v}" for k, v in samples.most_common(6)))
        lines.append("  main thread during the stream, by class (ms per run): "
                     + ", ".join(f"{k} {v / n:.0f}" for k, v in busy.most_common(8)))
    return "\n".join(lines)


def run_all(lab: Any, frontends: list[str], variants: list[str], pieces: int, rate: float,
            repeat: int, trace: bool = True, idle_probes: int = 12,
            trace_dir: Path | None = None, json_path: Path | None = None,
            ) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Interleaved runs: for each repetition, every front end and variant in turn.

    A run that fails (a page that did not open in time on a loaded machine) is
    tried once more, then left out and reported; ``json_path`` is rewritten
    after every run, so that a long session keeps what it measured.
    """
    results: dict[tuple[str, str], list[dict[str, Any]]] = {
        (f, v): [] for f in frontends for v in variants
    }
    for rep in range(repeat):
        for frontend in frontends:
            for variant in variants:
                r: dict[str, Any] | None = None
                for attempt in (1, 2):
                    try:
                        r = run_once(lab, frontend, variant, pieces, rate,
                                     f"{frontend}-{variant}-{rep}-{attempt}", trace=trace,
                                     idle_probes=idle_probes, trace_dir=trace_dir)
                        break
                    except RuntimeError as exc:
                        print(f"[{frontend} {variant} #{rep + 1}] attempt {attempt} failed:"
                              f" {str(exc)[:300]}", file=sys.stderr)
                if r is None:
                    continue
                results[(frontend, variant)].append(r)
                if json_path is not None:
                    write_json(json_path, results)
                print(
                    f"[{frontend} {variant} #{rep + 1}] status {r['status']}, {r['chars']} chars,"
                    f" probe idle {r['probe_idle_ms']} stream {r['probe_stream_ms']},"
                    f" long tasks {r['long_tasks']}, load {r['load1']:.1f}",
                    file=sys.stderr,
                )
    return results


def write_json(path: Path, results: dict[tuple[str, str], list[dict[str, Any]]]) -> None:
    path.write_text(json.dumps(
        [{"frontend": f, "variant": v, "runs": runs} for (f, v), runs in results.items()],
        indent=1,
    ))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pieces", type=int, default=20_000, help="pieces of Markdown (the corpus)")
    ap.add_argument("--rate", type=float, default=2_000.0, help="pieces per second")
    ap.add_argument("--frontends", default=",".join(FRONTENDS), help="lab, notebook7")
    ap.add_argument("--variants", default="shipped", help=", ".join(VARIANTS))
    ap.add_argument("--repeat", type=int, default=1, help="runs per front end and variant")
    ap.add_argument("--idle-probes", type=int, default=12, help="probes before the stream")
    ap.add_argument("--no-trace", action="store_true", help="no Chromium trace")
    ap.add_argument("--trace-dir", type=Path,
                    help="keep each run's raw trace here"
                    " (node tests/browser/trace.mjs FILE explains one)")
    ap.add_argument("--json", type=Path, help="also write every run's figures here")
    args = ap.parse_args(argv)
    frontends = [f.strip() for f in args.frontends.split(",") if f.strip()]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for f in frontends:
        if f not in FRONTENDS:
            ap.error(f"--frontends: unknown front end {f!r} (known: {', '.join(FRONTENDS)})")
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"--variants: unknown variant {v!r} (known: {', '.join(VARIANTS)})")

    from conftest import start_jupyterlab

    with tempfile.TemporaryDirectory(prefix="nbs-resp-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with start_jupyterlab(root, Path(tmp) / "home") as lab:
            results = run_all(lab, frontends, variants, args.pieces, args.rate, args.repeat,
                              trace=not args.no_trace, idle_probes=args.idle_probes,
                              trace_dir=args.trace_dir, json_path=args.json)
    loads = [r["load1"] for runs in results.values() for r in runs] or [float("nan")]
    print(
        f"\n{args.pieces:,} pieces of Markdown at {args.rate:,.0f} pieces/s, a probe cell run"
        f" from the keyboard while it streams (ms, key press to output; × idle); medians of"
        f" {args.repeat} run(s); traced: {not args.no_trace}; 1-min load average median"
        f" {statistics.median(loads):.1f} (min {min(loads):.1f}, max {max(loads):.1f}) on"
        f" {os.cpu_count()} CPUs\n"
    )
    print(table(results))
    print(explain(results))
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
