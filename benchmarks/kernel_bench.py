"""nbstream against the naive ways, kernel and wire side, side by side in one run.

Streams the same synthetic text (ScriptedSource: word pieces at a set rate,
with jitter) through each way, into a real IPython kernel behind a real
``jupyter server`` on 127.0.0.1, read back through the server's websocket as
JupyterLab reads it, and prints Markdown tables: what went over the wire, how
a trivial cell run meanwhile was answered, each naive way against nbstream,
and nbstream against its targets. See README.md in this folder for what each
column means.

It measures the kernel and the wire alone (no browser renders anything), so
its text is numbered plain words (" w0 w1 w2 …": the client tells from them
which pieces each message carried), not the model-shaped corpus that the
browser benchmarks stream (``benchmarks/corpus``).

    .venv/bin/python benchmarks/kernel_bench.py            # default, ~4.5 minutes on 2 cores
    .venv/bin/python benchmarks/kernel_bench.py --quick    # ~2 minutes, 0.5 s streams
    .venv/bin/python benchmarks/kernel_bench.py --full     # 3 repetitions, 3 s streams
    .venv/bin/python benchmarks/kernel_bench.py --ways nbstream,display --rates 2000 --streams 1

The ``panel`` way needs Panel, kept out of the venv:
``.venv/bin/pip install --target ~/.cache/nbstream-bench/panel-site panel``
(or ``--panel-site DIR``); without it the way is skipped and the reason printed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # after the sys.path line above

PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"duration": 0.5, "max_pieces": 2000, "budget": 2.0, "reps": 1, "drain_quiet": 0.3},
    "default": {},
    "full": {"duration": 3.0, "max_pieces": 10000, "budget": 10.0, "reps": 3},
}
WAY_LABELS = {
    "nbstream": "nbstream",
    "display": "display+update",
    "html": "HTML.value",
    "html_thread": "HTML.value, thread",
    "panel": "Panel ChatFeed",
    "source": "source only (control)",
}


def _csv(kind: type, text: str) -> tuple[Any, ...]:
    return tuple(kind(x) for x in text.split(",") if x.strip())


def parse_args(argv: list[str] | None = None) -> tuple[H.Config, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="shorter streams, smaller budget")
    g.add_argument("--full", action="store_true", help="3 repetitions, longer streams")
    p.add_argument("--ways", help=f"comma-separated, from {','.join(H.WAYS)}")
    p.add_argument("--rates", help="pieces per second, comma-separated (200,2000,10000)")
    p.add_argument("--streams", help="concurrent streams, comma-separated (1,8)")
    p.add_argument("--reps", type=int, help="repetitions (medians are reported)")
    p.add_argument("--duration", type=float, help="seconds each stream lasts at its rate")
    p.add_argument("--max-pieces", type=int, help="cap on pieces per stream")
    p.add_argument("--budget", type=float, help="seconds after which a naive way gives up")
    p.add_argument("--jitter", type=float, help="0..1, variation of the gaps between pieces")
    p.add_argument("--probe-interval", type=float, help="seconds between probe cells")
    p.add_argument("--separate-passes", action="store_true",
                   help="probe every way in a pass of its own (default: only the free ways)")
    p.add_argument("--zmq", action="store_true",
                   help="also read the kernel's IOPub socket directly (costs CPU)")
    p.add_argument("--panel-site", help="folder where Panel was pip-installed with --target")
    p.add_argument("--json", type=Path, help="also write every run's figures to this file")
    args = p.parse_args(argv)
    preset = PRESETS["quick" if args.quick else "full" if args.full else "default"]
    cfg = H.Config(**preset)
    if args.ways:
        cfg.ways = _csv(str, args.ways)
        unknown = set(cfg.ways) - set(H.WAYS)
        if unknown:
            p.error(f"unknown ways {sorted(unknown)}; choose from {H.WAYS}")
    if args.rates:
        cfg.rates = _csv(float, args.rates)
    if args.streams:
        cfg.streams = _csv(int, args.streams)
    for name in ("reps", "duration", "max_pieces", "budget", "jitter", "probe_interval",
                 "panel_site"):
        value = getattr(args, name)
        if value is not None:
            setattr(cfg, name, value)
    cfg.separate_passes = args.separate_passes
    cfg.zmq_reader = args.zmq
    return cfg, args


# ------------------------------------------------------------------------ format
def _n(v: Any, digits: int = 0) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:,.{digits}f}"


def _ms(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:,.0f}" if v >= 10 else f"{v:.1f}"


def _shown(r: dict[str, Any]) -> str:
    shown = r.get("shown")
    if shown is None:
        return "–"
    s = f"{shown * 100:.0f}%" if shown < 0.995 else "100%"
    if r.get("gave_up"):
        s += " (gave up)"
    elif shown < 0.995:
        s += " ⚠"
    return s


def _lost(r: dict[str, Any]) -> str:
    lost = r.get("lost")
    if lost is None:
        return "–"
    if not lost:
        return "0"
    q, lim = r.get("lost_queue"), r.get("lost_limit")
    detail = f" ({_n(q)} queue / {_n(lim)} limit)" if q is not None else ""
    return f"**{_n(lost)}**{detail}"


def _rate(v: float) -> str:
    return f"{v:,.0f}"


def wire_table(rows: list[dict[str, Any]]) -> str:
    out = ["| way | pieces/s | streams | text shown | msgs sent | msgs/s peak (mean) "
           "| MB sent (× text) | msgs received | lost | rate warnings | lag p50 / p95 ms "
           "| end seen s |",
           "|---|--:|--:|---|--:|--:|--:|--:|---|--:|--:|--:|"]
    for r in rows:
        if r["way"] == H.CONTROL:
            continue
        if "sent" not in r:
            out.append(f"| {WAY_LABELS.get(r['way'], r['way'])} | {_rate(r['rate'])} "
                       f"| {r['streams']} | error: {'; '.join(r.get('errors', []))} |"
                       + " |" * 8)
            continue
        mb = r["sent_bytes"] / 1e6
        out.append(
            f"| {WAY_LABELS.get(r['way'], r['way'])} | {_rate(r['rate'])} | {r['streams']} "
            f"| {_shown(r)} | {_n(r['sent'])} "
            f"| {_n(r.get('rate_peak'))} ({_n(r.get('rate_mean'))}) "
            f"| {mb:,.{2 if mb < 10 else 0}f} ({_n(r.get('bytes_x_text'), 1)}×) "
            f"| {_n(r.get('recv'))} | {_lost(r)} | {_n(r.get('warnings'))} "
            f"| {_ms(r.get('lag_p50'))} / {_ms(r.get('lag_p95'))} "
            f"| {_n(r.get('end_s'), 1)} (of {_n(r.get('stream_s'), 1)}) |")
    return "\n".join(out)


def probe_table(rows: list[dict[str, Any]]) -> str:
    out = ["| way | pieces/s | streams | idle p50 ms | probe p50 / p95 / max ms "
           "| p50 × idle | p95 × idle | probes |",
           "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        if "probe_p50" not in r:
            continue
        x50, x95 = r.get("probe_p50_x_idle"), r.get("probe_p95_x_idle")
        mark = " ✓" if x95 is not None and x95 <= 2 else ""
        out.append(
            f"| {WAY_LABELS.get(r['way'], r['way'])} | {_rate(r['rate'])} | {r['streams']} "
            f"| {_ms(r.get('idle_p50'))} "
            f"| {_ms(r['probe_p50'])} / {_ms(r['probe_p95'])} / {_ms(r['probe_max'])} "
            f"| {_n(x50, 1)} | {_n(x95, 1)}{mark} | {r.get('probe_n', 0)} |")
    return "\n".join(out)


def ratio_table(rows: list[dict[str, Any]]) -> str:
    """Each naive way against nbstream at the same rate and stream count."""
    by = {(r["way"], r["rate"], r["streams"]): r for r in rows}
    out = ["| pieces/s | streams | way | msgs ÷ nbstream | bytes ÷ nbstream "
           "| probe p50 ÷ nbstream | lost (nbstream) | lag p95 ÷ nbstream |",
           "|--:|--:|---|--:|--:|--:|---|--:|"]
    for (way, rate, streams), r in by.items():
        nb = by.get(("nbstream", rate, streams))
        if way == "nbstream" or nb is None or "sent" not in r or "sent" not in nb:
            continue

        def ratio(key: str, a: dict[str, Any] = r, b: dict[str, Any] = nb) -> str:
            x, y = a.get(key), b.get(key)
            if x is None or y is None or not y or math.isnan(x) or math.isnan(y):
                return "–"
            return f"{x / y:,.0f}×" if x / y >= 10 else f"{x / y:.1f}×"

        out.append(f"| {_rate(rate)} | {streams} | {WAY_LABELS.get(way, way)} "
                   f"| {ratio('sent')} | {ratio('sent_bytes')} | {ratio('probe_p50')} "
                   f"| {_n(r.get('lost'))} ({_n(nb.get('lost'))}) | {ratio('lag_p95')} |")
    return "\n".join(out)


def target_table(rows: list[dict[str, Any]]) -> str:
    """nbstream against the figures DESIGN.md sets for it."""
    by = {(r["way"], r["rate"], r["streams"]): r for r in rows}
    out = ["| pieces/s | streams | msgs/s peak (≤ 30 per widget, ≤ 200 in all) "
           "| delta bytes × text (≤ 1.2) | lost / warnings (0 / 0) "
           "| first / last piece → client ms | probe p50 × idle | probe p95 × idle (≤ 2) "
           "| control p50 / p95 × idle |",
           "|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for (way, rate, streams), r in by.items():
        if way != "nbstream" or "sent" not in r:
            continue
        bound = min(30 * streams, 200)
        peak = r.get("rate_peak", math.nan)
        ok = "✓" if peak <= bound else "✗"
        c = by.get((H.CONTROL, rate, streams), {})
        out.append(
            f"| {_rate(rate)} | {streams} | {_n(peak)} {ok} | {_n(r.get('delta_x_text'), 2)} "
            f"| {_n(r.get('lost'))} / {_n(r.get('warnings'))} "
            f"| {_ms(r.get('first_lag_max'))} / {_ms(r.get('last_lag_max'))} "
            f"| {_n(r.get('probe_p50_x_idle'), 1)} | {_n(r.get('probe_p95_x_idle'), 1)} "
            f"| {_n(c.get('probe_p50_x_idle'), 1)} / {_n(c.get('probe_p95_x_idle'), 1)} |")
    return "\n".join(out)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "–"


def header(cfg: H.Config, skipped: dict[str, str], panel_version: str | None) -> str:
    lim = H.rate_limit_defaults()
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), "?")
    except OSError:
        pass
    versions = ", ".join(f"{d} {_version(d)}" for d in (
        "nbstream", "ipykernel", "ipywidgets", "anywidget", "jupyter_server", "pyzmq"))
    if panel_version:
        versions += f", panel {panel_version}"
    lines = [
        f"nbstream kernel benchmark, {datetime.date.today().isoformat()}: "
        f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, {versions}",
        f"jupyter_server {lim['jupyter_server']} IOPub limits (defaults): "
        f"iopub_msg_rate_limit={lim['iopub_msg_rate_limit']:g} msgs/s, "
        f"iopub_data_rate_limit={lim['iopub_data_rate_limit']:g} B/s (stream output only), "
        f"rate_limit_window={lim['rate_limit_window']:g} s; counters reset on every idle status",
        f"streams of min({cfg.max_pieces}, rate × {cfg.duration:g} s) pieces ' w<i>', "
        f"jitter {cfg.jitter:g}, seed {cfg.seed}; naive ways give up after {cfg.budget:g} s; "
        f"probe every {cfg.probe_interval * 1000:.0f} ms; {cfg.reps} repetition(s), medians",
    ]
    for way, why in skipped.items():
        lines.append(f"skipped {way}: {why}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cfg, args = parse_args(argv)
    started = time.monotonic()
    rows, skipped = H.run_matrix(cfg, progress=lambda line: print(line, file=sys.stderr,
                                                                  flush=True))
    agg = H.aggregate(rows)
    panel_version = (H.panel_version(cfg.panel_site)[0]
                     if "panel" in cfg.ways and "panel" not in skipped else None)
    print(header(cfg, skipped, panel_version))
    print()
    print("### Wire: kernel → jupyter server → websocket client (wire pass)")
    print()
    print(wire_table(agg))
    print()
    print("### Kernel: a trivial cell (`1`) sent while the stream runs")
    print()
    print(probe_table(agg))
    print()
    print("### Each naive way against nbstream (same rate, same streams)")
    print()
    print(ratio_table(agg))
    print()
    if any(r["way"] == "nbstream" and "sent" in r for r in agg):
        print("### nbstream against its targets (DESIGN.md, \"Numbers that matter\")")
        print()
        print(target_table(agg))
        print()
        nb = [r for r in agg if r["way"] == "nbstream" and "sent" in r]
        print("nbstream's final text in the kernel equals the source's text: "
              f"{all(r['final_text_ok'] for r in nb)}; every stream's text complete at the "
              f"client: {all(r.get('complete') == r['streams'] for r in nb)}.")
    errors = sorted({e for r in agg for e in r.get("errors", [])})
    for e in errors:
        print(f"error: {e}")
    print(f"\n({len(rows)} runs in {time.monotonic() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"config": H.config_dict(cfg), "skipped": skipped,
                                         "aggregate": agg, "runs": rows}, indent=1,
                                        default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
