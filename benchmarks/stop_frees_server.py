"""How soon a Stop frees the model: the server stops generating, the local worker returns.

A Stop that only hides the text while the server keeps generating wastes the
server (vercel/ai#10719). This measures, per round, from the moment ``chat.stop()``
(or ``chat.close()``) is called:

* **a server**: llama-cpp-python's on the embedded GGUF (``OpenAISource``), and
  ``transformers serve`` on its converted folder (``OpenAISource`` and
  ``ResponsesSource``), each with one thread: until the server's process stops
  using the CPU, read from its CPU time sampled every 10 ms (psutil): the last
  sample in which it still grew marks the end of generation. A request for
  2,000 tokens is stopped after its first 20 characters, so a server that
  ignored the stop would stay busy for minutes.
* **TransformersSource** (the embedded model, in this process): until the worker
  thread's ``generate()`` returned, seen as the next reply queued on the model's
  lane starting (its status leaves ``queued``): the lane is free.

Printed: each way's median, p95 and max over the rounds (target, issue #22: under
0.5 s), with the machine's load average. Nothing is asserted here; the tests
(tests/test_server_faults.py) check that the server goes idle at all.

    .venv/bin/python benchmarks/stop_frees_server.py [--rounds 10] [--skip-llama]
        [--skip-serve] [--skip-transformers]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

STORY = "Write a long story about a robot who learns to paint."
SAMPLE = 0.01  # seconds between two CPU samples
QUIET = 1.0  # this long with no CPU growth: the server is idle


def wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.005)


def server_stop_latency(server: object, stop: Callable[[], object]) -> float:
    """Seconds from ``stop()`` to the server's last CPU growth (see the docstring)."""
    cpu = server.cpu_seconds  # type: ignore[attr-defined]
    last = cpu()
    t_stop = time.monotonic()
    stop()
    last_growth = t_stop
    while time.monotonic() - last_growth < QUIET:
        time.sleep(SAMPLE)
        now = cpu()
        if now - last > 0.005:  # more than one clock tick of work since the last sample
            last_growth = time.monotonic()
        last = now
    return last_growth - t_stop


def server_rounds(server: object, make_source: Callable[[], object], rounds: int,
                  how: str) -> list[float]:
    """``rounds`` stops (``how``: chat.stop() or chat.close()) of a long answer."""
    from nbstream import ChatWidget

    out: list[float] = []
    for _ in range(rounds):
        chat = ChatWidget(make_source())  # type: ignore[arg-type]
        reply = chat.send(STORY)
        wait(lambda r=reply: len(r.text) >= 20, 120, "the answer to start")
        time.sleep(0.3)  # well inside the answer: the server is busy generating
        out.append(server_stop_latency(server, chat.stop if how == "stop" else chat.close))
        chat.close()
    return out


def llama(rounds: int) -> None:
    from _servers import start_llama_cpp_server

    from nbstream.sources import OpenAISource
    from nbstream.sources.transformers.default_model import gguf_path

    with tempfile.TemporaryDirectory() as tmp:
        server = start_llama_cpp_server(gguf_path(), Path(tmp) / "server.log", n_ctx=1024)
        try:
            def make() -> object:
                return OpenAISource("smollm2", server.base_url, temperature=0, seed=1,
                                    max_tokens=2000)

            show("llama.cpp, OpenAISource, stop()", server_rounds(server, make, rounds, "stop"))
            show("llama.cpp, OpenAISource, close()", server_rounds(server, make, rounds, "close"))
        finally:
            server.stop()


def serve(rounds: int) -> None:
    from _servers import start_transformers_serve

    from nbstream.sources import OpenAISource, ResponsesSource
    from nbstream.sources.transformers.default_model import default_model_path

    folder = default_model_path()
    with tempfile.TemporaryDirectory() as tmp:
        server = start_transformers_serve(folder, Path(tmp) / "serve.log")
        try:
            def chat() -> object:
                return OpenAISource(str(folder), server.base_url, temperature=0, max_tokens=2000)

            def responses() -> object:
                return ResponsesSource(str(folder), server.base_url, temperature=0,
                                       max_output_tokens=2000)

            show("transformers serve, OpenAISource", server_rounds(server, chat, rounds, "stop"))
            show("transformers serve, ResponsesSource",
                 server_rounds(server, responses, rounds, "stop"))
        finally:
            server.stop()


def transformers_rounds(rounds: int) -> list[float]:
    from nbstream import ChatWidget
    from nbstream.sources import TransformersSource

    source = TransformersSource(None, max_new_tokens=2000, min_new_tokens=2000)
    out: list[float] = []
    for _ in range(rounds):
        chat = ChatWidget(source)
        reply = chat.send(STORY)
        other = ChatWidget(source)
        queued = other.send("Hi")  # waits for the model's lane
        wait(lambda r=reply: len(r.text) >= 20, 300, "the answer to start")
        time.sleep(0.3)
        assert queued.status == "queued", queued.status
        t_stop = time.monotonic()
        chat.stop()
        wait(lambda q=queued: q.status != "queued", 60, "the queued reply to start")
        out.append(time.monotonic() - t_stop)
        queued.cancel()
        queued.wait(60)
        chat.close()
        other.close()
    return out


def show(name: str, values: list[float]) -> None:
    ms = sorted(v * 1000 for v in values)
    p95 = ms[min(len(ms) - 1, max(0, round(0.95 * len(ms)) - 1))]
    print(f"{name:<38} median {statistics.median(ms):7.0f} ms   p95 {p95:7.0f} ms   "
          f"max {ms[-1]:7.0f} ms   ({len(ms)} rounds)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--skip-llama", action="store_true")
    ap.add_argument("--skip-serve", action="store_true")
    ap.add_argument("--skip-transformers", action="store_true")
    args = ap.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.skip_llama:
        llama(args.rounds)
    if not args.skip_serve:
        serve(args.rounds)
    if not args.skip_transformers:
        show("TransformersSource, lane free", transformers_rounds(args.rounds))
    print(f"load average at end:   {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
