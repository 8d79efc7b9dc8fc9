"""A day in one kernel: thousands of replies with a view attached, memory and threads flat.

One ChatWidget in real JupyterLab + headless Chromium answers ``--batches`` times
``--per-batch`` questions, one after the other, from a thread in the kernel (a
scripted source writing a model-shaped Markdown answer: a heading, a list, a
table, code, math, CJK and emoji, ~700 characters, at 2,000 pieces/s), and is
cleared after each batch. At each batch's end, after a garbage collection:

* the kernel records its resident memory, its threads, the Python objects alive
  and the nbstream streams still alive (``gc``; once the pump published the
  cleared replies' removal, it keeps only the last ``KEEP_ENDED``), and the
  pump's channels;
* the page (tests/browser/soak.mjs, told by the widget's title) forces a garbage
  collection and reads Chromium's ``Performance.getMetrics``: JS heap used, DOM
  nodes and event listeners (the page's, and the widget's own).

Printed: each figure per batch, and its slope after the warm-up (a least-squares
line over the batches after the first ``--warmup``), per 1,000 replies: what
would grow without bound shows as a slope that is not ~0. Not a timed test; the
suite runs a few hundred replies (tests/test_soak.py) and fails on growth.

    .venv/bin/python benchmarks/soak.py                      # 20 batches of 100: 2,000 replies
    .venv/bin/python benchmarks/soak.py --batches 40 --per-batch 100

Needs what the browser tests need: node, tests/browser/node_modules, /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: what the model "writes" each time: model-shaped Markdown, not a run of words
ANSWER = """## Sorting a list in Python

There are two ways, and the difference matters:

1. `sorted(xs)` returns a **new** list;
2. `xs.sort()` sorts *in place* and returns `None`.

| call | returns | copies |
|---|---|---|
| `sorted(xs)` | a list | yes |
| `xs.sort()` | `None` | no |

```python
words = ["banana", "Apple", "cherry"]
print(sorted(words, key=str.lower))  # ['Apple', 'banana', 'cherry']
```

Both are stable and run in $O(n \\log n)$; the sum of the first $n$ squares is
$$\\sum_{k=1}^{n} k^2 = \\frac{n(n+1)(2n+1)}{6}.$$

排序是稳定的 — 相等的元素保持原来的顺序 ✅ 🐍
"""

#: kernel figures recorded per batch (printed in this order)
KERNEL = ("rss_mb", "threads", "objects", "streams_alive", "channels")
#: page figures recorded per batch (nodes, listeners: the whole page's, JupyterLab's
#: included; chat_nodes, chat_listeners: the widget's element and what is under it)
PAGE = ("js_heap_mb", "nodes", "chat_nodes", "listeners", "chat_listeners")


def soak_cell(batches: int, per_batch: int, pause: float = 2.0) -> str:
    """The notebook cell: a chat, and a thread asking ``batches`` times ``per_batch`` questions."""
    return (
        "import gc, json, threading, time, psutil\n"
        "from nbstream import ChatWidget\n"
        "from nbstream.core.stream import Stream\n"
        "from nbstream.core.pump import KEEP_ENDED, get_pump\n"
        "from nbstream.sources import ScriptedSource\n"
        f"ANSWER = {ANSWER!r}\n"
        f"BATCHES, PER_BATCH, PAUSE = {batches}, {per_batch}, {pause}\n"
        "chat = ChatWidget(ScriptedSource(ANSWER, rate=2000), title='soak 0/' + str(BATCHES))\n"
        "SOAK = []\n"
        "SOAK_ERRORS = []\n"
        "def _streams():\n"
        "    gc.collect()\n"
        "    objects = gc.get_objects()\n"
        "    return objects, sum(1 for o in objects if isinstance(o, Stream))\n"
        "def _figures(batch):\n"
        "    # the cleared replies go once the pump published their removal (it keeps\n"
        "    # the last KEEP_ENDED for late acks): measure after that, 10 s at most\n"
        "    deadline = time.monotonic() + 10\n"
        "    objects, streams = _streams()\n"
        "    while streams > KEEP_ENDED and time.monotonic() < deadline:\n"
        "        del objects\n"
        "        time.sleep(0.1)\n"
        "        objects, streams = _streams()\n"
        "    return {'batch': batch, 't': time.time(),\n"
        "            'rss_mb': psutil.Process().memory_info().rss / 2**20,\n"
        "            'threads': threading.active_count(), 'objects': len(objects),\n"
        "            'streams_alive': streams,\n"
        "            'channels': len(get_pump()._channels)}\n"
        "def _soak():\n"
        "    try:\n"
        "        for b in range(1, BATCHES + 1):\n"
        "            for i in range(PER_BATCH):\n"
        "                r = chat.send(f'question {b}.{i}')\n"
        "                r.wait(120)\n"
        "                assert r.text == ANSWER, (b, i, r.status, len(r.text))\n"
        "            chat.clear()\n"
        "            SOAK.append(_figures(b))\n"
        "            chat.title = f'soak {b}/{BATCHES}'  # the page measures now\n"
        "            time.sleep(PAUSE)  # the scenario: a pause while the page measures\n"
        "    except BaseException as exc:\n"
        "        SOAK_ERRORS.append(repr(exc))\n"
        "        chat.title = 'soak failed'\n"
        "threading.Thread(target=_soak, name='soak', daemon=True).start()\n"
        "chat"
    )


def slope(ys: list[float]) -> float:
    """Least-squares slope of ``ys`` against 0, 1, 2, ... (per step)."""
    n = len(ys)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, statistics.fmean(ys)
    num = sum((i - mx) * (y - my) for i, y in enumerate(ys))
    den = sum((i - mx) ** 2 for i in range(n))
    return num / den


def analyse(kernel: list[dict[str, Any]], page: list[dict[str, Any]], per_batch: int,
            warmup: int) -> dict[str, dict[str, float]]:
    """Per figure: first and last after the warm-up, growth, and slope per 1,000 replies."""
    out: dict[str, dict[str, float]] = {}
    for rows, keys in ((kernel, KERNEL), (page, PAGE)):
        after = rows[warmup:]
        for key in keys:
            ys = [float(r[key]) for r in after]
            if not ys:
                continue
            out[key] = {"first": ys[0], "last": ys[-1], "growth": ys[-1] - ys[0],
                        "per_1000_replies": slope(ys) * 1000 / per_batch}
    return out


def run_soak(lab: Any, batches: int, per_batch: int, timeout: float) -> dict[str, Any]:
    """One soak in ``lab``: the kernel's and the page's figures per batch."""
    from browser_markdown import run_node

    path = lab.write_notebook(f"soak-{int(time.time())}.ipynb", [soak_cell(batches, per_batch)])
    try:
        return run_node(lab, "soak", {"notebook": path, "batches": batches,
                                      "timeout_ms": int(timeout * 1000)}, timeout=timeout + 60)
    finally:
        lab.shutdown_kernels()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--per-batch", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=2, help="batches left out of the slope")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import start_jupyterlab

    load0 = os.getloadavg()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nbs-soak-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        with start_jupyterlab(root, Path(tmp) / "home") as lab:
            r = run_soak(lab, args.batches, args.per_batch,
                         timeout=max(600.0, args.batches * args.per_batch * 1.0))
    wall = time.monotonic() - t0
    kernel, page = r["kernel"], r["page"]
    figures = analyse(kernel, page, args.per_batch, args.warmup)
    n = args.batches * args.per_batch
    print(f"\n{n:,} replies ({args.batches} batches of {args.per_batch}, cleared after each) "
          f"in one kernel, real JupyterLab + headless Chromium, {wall:.0f} s; load average "
          f"{load0[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end, {os.cpu_count()} CPUs\n")
    head = ["batch", *KERNEL, *PAGE]
    print(" | ".join(head))
    for k, p in zip(kernel, page, strict=False):
        cells = [str(k["batch"])] + [f"{k[x]:.1f}" if isinstance(k[x], float) else str(k[x])
                                     for x in KERNEL] + [f"{p[x]:.1f}" if isinstance(p[x], float)
                                                         else str(p[x]) for x in PAGE]
        print(" | ".join(cells))
    print(f"\nafter {args.warmup} warm-up batch(es): growth, and slope per 1,000 replies")
    for key, f in figures.items():
        print(f"  {key:<14} {f['first']:>10.1f} -> {f['last']:>10.1f}   growth {f['growth']:+9.1f}"
              f"   slope {f['per_1000_replies']:+9.2f} / 1,000 replies")
    if args.json:
        args.json.write_text(json.dumps({"kernel": kernel, "page": page, "figures": figures},
                                        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
