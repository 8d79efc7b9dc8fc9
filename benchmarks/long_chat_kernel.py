"""Kernel side of a long chat: what a new turn, ``chat.messages`` and ``save`` cost at
10, 1,000 and 5,000 earlier messages (issue 19, item 3).

A ``ChatWidget`` starts from a history of N model-shaped messages
(``benchmarks/_history.py``, ``messages=``), in this process (no kernel, no
browser: the widget's comm is ipywidgets' dummy, and the pump counts the bytes
of every update message it would send). Then, per size, interleaved rounds of:

* **turn**: ``chat.send(q)`` until the reply is ``done`` (a ``ScriptedSource``
  typing a 2,000-character answer at 100,000 pieces/s, so the turn is mostly
  the widget's own work and the pump's 34 ms pacing), and the bytes of the
  update messages the turn sent (what the browser would receive);
* **send()**: the time ``chat.send`` takes to return (the question's keys and
  the reply's launch);
* **prompt**: building what the model sees (``_conversation_before``: the whole
  path, by nature proportional to the conversation);
* **messages**, **to_markdown**, **save**: ``chat.messages``, ``chat.to_markdown()``,
  ``chat.save(path)`` (the file's size too): the whole conversation, by nature.

Medians over ``--rounds``; the load average is printed. Times on a loaded
machine are noisy: the ratio to the 10-message chat is the figure.

    .venv/bin/python benchmarks/long_chat_kernel.py [--sizes 10,1000,5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _history import history, markdown_bytes

REPLY = "".join(f"w{i} " for i in range(2000))[:2000]


def measure(n: int, rounds: int, folder: Path) -> dict[str, list[float]]:
    from nbstream import ChatWidget
    from nbstream.sources import ScriptedSource

    t0 = time.perf_counter()
    chat = ChatWidget(ScriptedSource(REPLY, rate=100_000), messages=history(n))
    build_s = time.perf_counter() - t0
    out: dict[str, list[float]] = {"build_ms": [build_s * 1000]}
    # the pump sends the loaded history once, on its thread: let it finish first
    last, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < 0.5:
        time.sleep(0.05)
        if chat._wire.bytes_sent != last:
            last, quiet_since = chat._wire.bytes_sent, time.monotonic()
    try:
        for k in range(rounds):
            before = chat._wire.bytes_sent  # a benchmark reading the widget's counter
            t = time.perf_counter()
            reply = chat.send(f"one more question {k}")
            sent = time.perf_counter()
            reply.wait(60)
            done = time.perf_counter()
            time.sleep(0.1)  # the pump's last step of the turn
            out.setdefault("send_ms", []).append((sent - t) * 1000)
            out.setdefault("turn_ms", []).append((done - t) * 1000)
            out.setdefault("turn_bytes", []).append(chat._wire.bytes_sent - before)
            t = time.perf_counter()
            chat._conversation_before(reply, None)
            out.setdefault("prompt_ms", []).append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            msgs = chat.messages
            out.setdefault("messages_ms", []).append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            chat.to_markdown()
            out.setdefault("markdown_ms", []).append((time.perf_counter() - t) * 1000)
            path = folder / f"chat-{n}-{k}.json"
            t = time.perf_counter()
            chat.save(path)
            out.setdefault("save_ms", []).append((time.perf_counter() - t) * 1000)
            out.setdefault("save_kb", []).append(path.stat().st_size / 1024)
            assert len(msgs) == n + 2 * (k + 1)
    finally:
        chat.close()
    return out


COLUMNS = [("build_ms", "built (ms)"), ("send_ms", "send() ms"), ("turn_ms", "turn ms"),
           ("turn_bytes", "turn bytes"), ("prompt_ms", "prompt ms"),
           ("messages_ms", "messages ms"), ("markdown_ms", "to_markdown ms"),
           ("save_ms", "save ms"), ("save_kb", "file KB")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10,1000,5000")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    loads = [os.getloadavg()[0]]
    results: dict[int, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="nbs-long-") as tmp:
        for n in sizes:
            results[n] = measure(n, args.rounds, Path(tmp))
            loads.append(os.getloadavg()[0])
            print(f"[{n} messages] done", file=sys.stderr)
    per = markdown_bytes(history(1000)) / 1000
    print(f"\nA chat started from N earlier messages ({per:.0f} B of Markdown each on average), "
          f"medians of {args.rounds} turns; 1-min load average {statistics.median(loads):.1f} "
          f"(min {min(loads):.1f}, max {max(loads):.1f}) on {os.cpu_count()} CPUs\n")
    first = sizes[0]
    print("| earlier messages | " + " | ".join(title for _, title in COLUMNS) + " |")
    print("|---:|" + "---:|" * len(COLUMNS))
    for n in sizes:
        cells: list[str] = []
        for key, _ in COLUMNS:
            v = statistics.median(results[n][key])
            base = statistics.median(results[first][key])
            ratio = f" ({v / base:.1f}×)" if n != first and base > 0 else ""
            cells.append((f"{v:,.0f}" if v >= 100 else f"{v:.2f}") + ratio)
        print(f"| {n:,} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
