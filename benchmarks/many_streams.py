"""Many streams at once through one kernel: 32 answers from one server, 8 widgets.

8 ``Compare`` widgets of 4 panes each, every pane an ``OpenAISource`` on one
server (the project's fake OpenAI-compatible server, tests/_servers.py, which
streams a model-shaped Markdown answer: a heading, a list, a table, code, math,
CJK and emoji, at ``--rate`` pieces/s per stream; the lane lets all 32 run at
once), in real JupyterLab + headless Chromium (tests/browser/many_streams.mjs).
All 32 start with one cell. Printed:

* whether every answer is complete: the kernel's text is the server's, piece for
  piece (so in order), and the page shows all of it (the characters the view holds
  per widget, its counters, equal the kernel's; the rendered Markdown starts with
  the stream's own tag and ends with the answer's last words);
* each answer's **end lag**: from the kernel's end of the reply to its final
  status on the page (both on the wall clock), per answer and its spread: the
  pump shares one budget (180 deltas/s for the kernel) among all streams, fairly
  if the lags are alike;
* the kernel's probe cell while they stream against idle (target: within 2x), run
  ``--probes`` times each way (medians), in parts on the wall clock (the cell prints the
  kernel's ``time.time()``; :data:`PROBE_FIGURES`): from Playwright's click to the output
  shown, from the page's mousedown (a person's click), from the keydown to the cell
  running, and of that, from the request leaving the page to the cell running (the
  server and the kernel: the kernel's own responsiveness). And the page's long tasks;
* the machine's load average.

Not a timed test; tests/test_browser_faults.py runs it on shorter answers and checks
that every text is complete.

    .venv/bin/python benchmarks/many_streams.py [--widgets 8] [--panes 4] [--rate 100]
        [--rounds 3] [--probes 3]

Needs what the browser tests need: node, tests/browser/node_modules, /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak import ANSWER  # noqa: E402  (model-shaped Markdown)


def pieces_of(text: str, tag: str) -> list[str]:
    """``text`` as a model would stream it: a word (with what follows it) per piece,
    after a first piece naming the stream (so that a text in the wrong pane shows)."""
    words = text.split(" ")
    return [f"[{tag}] "] + [w + " " for w in words[:-1]] + [words[-1]]


def cells(base_url: str, widgets: int, panes: int, rate: float, repeat: int) -> list[str]:
    setup = (
        "import json, time\n"
        "from nbstream import Compare\n"
        "from nbstream.sources import OpenAISource\n"
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'benchmarks')!r})\n"
        "from many_streams import pieces_of\n"
        f"URL, W, P, DELAY = {base_url!r}, {widgets}, {panes}, {1.0 / rate!r}\n"
        f"ANSWER = {ANSWER!r} * {repeat}\n"
        "def _source(w, p):\n"
        "    return OpenAISource('fake', URL, concurrency=W * P, label=f'pane {p}',\n"
        "                        x_pieces=pieces_of(ANSWER, f's{w}.{p}'), x_delay=DELAY)\n"
        "widgets = [Compare([_source(w, p) for p in range(P)]) for w in range(W)]\n"
        "def REPORT():\n"
        "    wall = time.time() - time.monotonic()\n"
        "    return [[{'text': r.text, 'status': r.status, 'reason': r.reason,\n"
        "              'end_wall_ms': (wall + r.stream.ended_at) * 1000\n"
        "                             if r.stream.ended_at is not None else None,\n"
        "              'view_acks': c._channel.acks, 'ignored': c._ignored.count}\n"
        "             for r in c.last_round] for c in widgets]\n"
        "for c in widgets:\n"
        "    display(c)"
    )
    return [setup, 'print("probe-ok", repr(time.time()))',
            f"for c in widgets:\n    c.send({PROMPT!r})"]


def expected_text(w: int, p: int, repeat: int) -> str:
    return "".join(pieces_of(ANSWER * repeat, f"s{w}.{p}"))


def utf16(text: str) -> int:
    """``text.length`` in JavaScript."""
    return len(text.encode("utf-16-le")) // 2


#: the question every pane answers
PROMPT = "go"
#: how the rendered answer ends (its last words, as the page shows them)
LAST_WORDS = "🐍"


def check(r: dict[str, Any], widgets: int, panes: int, repeat: int) -> dict[str, Any]:
    """Completeness and end lags of one run."""
    kernel = r["kernel"]
    lags: list[float] = []
    wrong: list[str] = []
    for a in r["answers"]:
        w, p = a["root"], a["pane"]
        k = kernel[w][p]
        if k["text"] != expected_text(w, p, repeat):
            wrong.append(f"{w}.{p}: kernel text ({k['status']}: {k['reason']})")
        shown = a["text"].strip()
        if not (shown.startswith(f"[s{w}.{p}]") and shown.endswith(LAST_WORDS)):
            wrong.append(f"{w}.{p}: page text")
        if a["status"] != "done" or k["status"] != "done":
            wrong.append(f"{w}.{p}: status {a['status']} (kernel: {k['status']}, {k['reason']})")
        if a["end_wall_ms"] is not None and k["end_wall_ms"] is not None:
            lags.append(a["end_wall_ms"] - k["end_wall_ms"])
    for w, shown in enumerate(r["chars"]):  # each widget's text, all of it: its counter
        # (in JavaScript's characters: UTF-16 code units, as the view counts them)
        want = shown["questions"] * utf16(PROMPT) + sum(utf16(k["text"]) for k in kernel[w])
        if shown["chars"] != want:
            wrong.append(f"widget {w}: the page holds {shown['chars']} characters, "
                         f"the kernel {want}")
    # a probe counts as "while streaming" if its keydown came before the last answer ended
    # in the kernel
    last_end = max((k["end_wall_ms"] or 0) for row in kernel for k in row)
    busy = [p for p in r["probes_busy"] if p["at_wall_ms"] < last_end]
    return {"answers": len(r["answers"]), "wrong": wrong, "lags_ms": lags,
            "probes_idle": r["probes_idle"], "probes_busy": busy,
            **{f"{name}_{when}_ms": median_of(probes, key)
               for name, key, _ in PROBE_FIGURES
               for when, probes in (("idle", r["probes_idle"]), ("during", busy))},
            "long_tasks": r["long_tasks"], "long_max_ms": r["long_max_ms"]}


#: the parts of a probe (tests/browser/many_streams.mjs probe()): the name of its medians
#: in check()'s result (``<name>_idle_ms``, ``<name>_during_ms``), its key in a probe,
#: and what it is
PROBE_FIGURES = (
    ("probe", "ms", "the whole probe (Playwright's click to output shown)"),
    ("click", "from_click_ms", "from the page's mousedown to output shown"),
    ("to_kernel", "to_kernel_ms", "to the kernel (keydown to the cell running)"),
    ("kernel", "sent_to_ran_ms",
     "the server and the kernel (the request leaving the page to the cell running)"),
)


def median_of(probes: list[dict[str, Any]], key: str) -> float | None:
    """The median of one figure of some probes (None for none)."""
    xs = [p[key] for p in probes if p.get(key) is not None]
    return statistics.median(xs) if xs else None


def fmt(x: float | None, spec: str = ".0f") -> str:
    return "-" if x is None else format(x, spec)


def ratio(busy: float | None, idle: float | None) -> float | None:
    return None if busy is None or not idle else busy / idle


def run(lab: Any, base_url: str, widgets: int, panes: int, rate: float, repeat: int,
        name: str, probes: int = 3, trace: Path | None = None) -> dict[str, Any]:
    from browser_markdown import run_node

    path = lab.write_notebook(f"{name}.ipynb", cells(base_url, widgets, panes, rate, repeat))
    try:
        r = run_node(lab, "many_streams", {"notebook": path, "widgets": widgets,
                                           "probes": probes,
                                           "report": "print(_nbs_json.dumps(REPORT()))",
                                           **({"trace": str(trace)} if trace else {})},
                     timeout=600)
    finally:
        lab.shutdown_kernels()
    out = check(r, widgets, panes, repeat)
    # per widget: the acks its view sent and the messages that carried them (page), the
    # acks the kernel took and the view messages it ignored
    out["views"] = [{"acks": shown.get("acks"), "ack_msgs": shown.get("ack_msgs"),
                     "kernel_acks": k[0]["view_acks"], "ignored": k[0]["ignored"]}
                    for shown, k in zip(r["chars"], r["kernel"], strict=True)]
    out["loop"] = r.get("loop")
    out["ws_frames"] = r.get("ws_frames")
    out["stream_s"] = ((r["end_wall_ms"] - r["start_wall_ms"]) / 1000
                       if r.get("end_wall_ms") else None)
    if "trace" in r:
        out["trace"] = r["trace"]
    return out


def trace_figures(t: dict[str, Any] | None) -> dict[str, Any]:
    """What a round's trace says per second of the stream: the page's main thread busy
    (ms/s), its self time by class (ms/s), the frames it painted, long tasks in it."""
    if not t or not t.get("stream_ms"):
        return {}
    s = t["stream_ms"] / 1000
    return {"busy_pct": t["main_thread_busy_in_stream"],
            "busy_ms_per_s": round(t["main_thread_busy_in_stream"] * 10, 0),
            "by_class_ms_per_s": {k: round(v / s, 1)
                                  for k, v in t["busy_ms_in_stream_by_class"].items()},
            "by_event_ms_per_s": {k: round(v / s, 1)
                                  for k, v in t["busy_ms_in_stream_by_event"].items()},
            "painted_per_s": round(t["frames_in_stream"]["painted"] / s, 1),
            # the tasks handling the kernel's websocket messages (JupyterLab's _onWSMessage)
            "ws_tasks_per_s": round(t.get("websocket_tasks_in_stream", {}).get("tasks", 0) / s, 1),
            "ws_ms_per_s": round(t.get("websocket_tasks_in_stream", {}).get("ms", 0) / s, 1),
            "long_in_stream": t["long_tasks_in_stream"], "stream_s": round(s, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--widgets", type=int, default=8)
    ap.add_argument("--panes", type=int, default=4)
    ap.add_argument("--rate", type=float, default=100.0, help="pieces per second per stream")
    ap.add_argument("--repeat", type=int, default=3, help="the answer, this many times over")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--probes", type=int, default=3,
                    help="probe runs idle, and while the answers stream, per round")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--trace", type=Path, metavar="DIR",
                    help="write a Chrome trace (with a CPU profile) of each round's streaming "
                         "into DIR; its long tasks explained go to --json, and the page's "
                         "main thread per second of the stream is printed")
    ap.add_argument("--against", type=Path, metavar="TREE",
                    help="another checkout of nbstream (its front end built): each round runs "
                         "it too, in alternating order, from a JupyterLab of its own whose "
                         "kernels import it (the build before, side by side)")
    args = ap.parse_args(argv)
    if args.trace is not None:
        args.trace.mkdir(parents=True, exist_ok=True)

    sys.path.insert(0, str(REPO / "tests"))
    from _servers import start_fake_server
    from conftest import start_jupyterlab

    ways = ["this"] + (["before"] if args.against else [])
    loads: list[float] = []
    rows: dict[str, list[dict[str, Any]]] = {w: [] for w in ways}
    server = start_fake_server()
    try:
        with tempfile.TemporaryDirectory(prefix="nbs-many-") as tmp, ExitStack() as stack:
            labs: dict[str, Any] = {}
            for way in ways:
                root = Path(tmp) / way / "root"
                root.mkdir(parents=True)
                env = None
                if way == "before":
                    env = {**os.environ, "PYTHONPATH": str(args.against.resolve())}
                labs[way] = stack.enter_context(
                    start_jupyterlab(root, Path(tmp) / way / "home", env=env,
                                     log_name=f"jupyterlab-many-{way}.log"))
            for i in range(args.rounds):
                order = ways if i % 2 == 0 else ways[::-1]
                for way in order:
                    loads.append(os.getloadavg()[0])
                    row = run(labs[way], server.base_url, args.widgets, args.panes, args.rate,
                              args.repeat, f"many-{i}", probes=args.probes,
                              trace=None if args.trace is None
                              else args.trace / f"many-{way}-{i}.json")
                    row["load"] = loads[-1]
                    row["traced"] = trace_figures(row.get("trace"))
                    rows[way].append(row)
                    lags = sorted(row["lags_ms"])
                    print(f"[round {i + 1}, {way}] load {row['load']:.1f}; {row['answers']} "
                          f"answers, wrong: {row['wrong']}; end lag median "
                          f"{statistics.median(lags):.0f} ms, max {lags[-1]:.0f} ms; probes "
                          f"{row['probes_busy']} (idle {row['probes_idle']}); long tasks "
                          f"{row['long_tasks']}; page loop {row.get('loop')}; websocket "
                          f"frames {row.get('ws_frames')}; traced "
                          f"{row['traced']}", file=sys.stderr)
    finally:
        server.stop()
    words = len(pieces_of(ANSWER * args.repeat, "x"))
    n = args.widgets * args.panes
    print(f"\n{n} answers at once ({args.widgets} Compare widgets x {args.panes} panes), "
          f"{words} pieces each at {args.rate:.0f}/s from one server, real JupyterLab + "
          f"headless Chromium; {args.rounds} round(s)"
          + (f" of each way (this tree, and {args.against} before)" if args.against else "")
          + f"; load average median {statistics.median(loads):.1f} "
          f"({min(loads):.1f}-{max(loads):.1f}) on {os.cpu_count()} CPUs\n")
    for way in ways:
        report(way, rows[way], len(ways) > 1)
    if len(ways) > 1:
        print("\n| way | probe from the mousedown x idle | kernel's part x idle | long tasks | "
              "page loop: frames that changed the DOM / s | view runs / s | frame cost p50 / "
              "p95 | main thread busy (traced) | load |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|")
        for way in ways:
            print(summary_row(way, rows[way]))
    if args.json:
        args.json.write_text(json.dumps(rows if len(ways) > 1 else rows["this"], indent=1))
    return 0


def med(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None]
    return statistics.median(ys) if ys else None


def summary_row(way: str, rows: list[dict[str, Any]]) -> str:
    """One way's medians over its rounds."""
    def r(name: str) -> float | None:
        return med([ratio(x[f"{name}_during_ms"], x[f"{name}_idle_ms"]) for x in rows])

    def per_s(key: str) -> float | None:
        return med([x["loop"][key] / (x["stream_s"]) if x.get("loop") and x.get("stream_s")
                    else None for x in rows])

    def loop(key: str) -> float | None:
        return med([x["loop"][key] if x.get("loop") else None for x in rows])

    busy = med([x["traced"].get("busy_pct") for x in rows])
    return (f"| {way} | {fmt(r('click'), '.1f')}x | {fmt(r('kernel'), '.1f')}x | "
            f"{fmt(med([x['long_tasks'] for x in rows]))} | {fmt(per_s('render_frames'), '.1f')} | "
            f"{fmt(per_s('runs'), '.1f')} | {fmt(loop('cost_ms_p50'))} / "
            f"{fmt(loop('cost_ms_p95'))} ms | {fmt(busy, '.0f')} % | "
            f"{fmt(med([x['load'] for x in rows]), '.1f')} |")


def report(way: str, rows: list[dict[str, Any]], named: bool) -> None:
    """One way's rounds, as a table."""
    if named:
        print(f"\n{way}:")
    all_wrong = [w for r in rows for w in r["wrong"]]
    print(f"complete and in order: {sum(r['answers'] for r in rows) - len(all_wrong)} of "
          f"{sum(r['answers'] for r in rows)}" + (f" (wrong: {all_wrong})" if all_wrong else ""))
    print("\n| round | end lag per answer: min / median / p90 / max (stdev) | "
          + " | ".join(f"{label}: streaming / idle" for _, _, label in PROBE_FIGURES)
          + " | long tasks (longest) | load |\n|--:|--:|" + "--:|" * len(PROBE_FIGURES)
          + "--:|--:|")
    for i, r in enumerate(rows):
        lags = sorted(r["lags_ms"])
        cells = [f"{fmt(r[f'{n}_during_ms'])} / {fmt(r[f'{n}_idle_ms'])} ms = "
                 f"{fmt(ratio(r[f'{n}_during_ms'], r[f'{n}_idle_ms']), '.1f')}x"
                 for n, _, _ in PROBE_FIGURES]
        cells[0] += f" ({len(r['probes_busy'])} while streaming)"
        print(f"| {i + 1} | {lags[0]:.0f} / {statistics.median(lags):.0f} / "
              f"{lags[int(0.9 * (len(lags) - 1))]:.0f} / {lags[-1]:.0f} ms "
              f"({statistics.pstdev(lags):.0f}) | " + " | ".join(cells)
              + f" | {r['long_tasks']} ({r['long_max_ms']} ms) | {r['load']:.1f} |")
    for name, _, label in PROBE_FIGURES:
        ratios = [x for x in (ratio(r[f"{name}_during_ms"], r[f"{name}_idle_ms"]) for r in rows)
                  if x is not None]
        print(f"{label}, while streaming / idle: median over rounds "
              f"{fmt(statistics.median(ratios) if ratios else None, '.1f')}x (target <= 2x)")
    traced = [r["traced"] for r in rows if r.get("traced")]
    if traced:
        print("\nthe page's main thread per second of the stream (traced), by round:")
        for i, t in enumerate(traced):
            print(f"  {i + 1}: busy {t['busy_ms_per_s']:.0f} ms/s, painted frames "
                  f"{t['painted_per_s']}/s, long tasks {t['long_in_stream']}; the kernel's "
                  f"websocket messages {t['ws_ms_per_s']:.0f} ms/s in {t['ws_tasks_per_s']} "
                  f"tasks/s; by class "
                  f"{t['by_class_ms_per_s']}; by event {t['by_event_ms_per_s']}")


if __name__ == "__main__":
    raise SystemExit(main())
