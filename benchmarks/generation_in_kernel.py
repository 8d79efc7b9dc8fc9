"""The widget's generation against a bare ``generate()``, in real IPython kernels.

``generation_overhead.py`` times the streamed call itself, in a plain process.
This one asks what a notebook user sees: the embedded model (or ``--model PATH``)
answers the same prompt with exactly ``--tokens`` new tokens (greedy;
``min_new_tokens`` = ``max_new_tokens``), timed inside a kernel (jupyter_client,
no browser) from the call to the end of the answer, six ways:

* **bare, main thread**: ``model.generate(...)`` run in a cell, as a user's own
  loop would (the kernel is blocked meanwhile), in a kernel that loaded the model
  in a cell (``source.prepare()``, the main thread);
* **bare, worker thread**: the same on a new thread, joined, in that kernel;
* **widget, same kernel**: ``ChatWidget(source).send(prompt).wait()`` in that kernel:
  the reply's lane thread, streamer, incremental detokenizer, cancel check and pump,
  through the widget's comm (no view: the pump's fallback to the bounded rate);
* **widget, same, pool kept**: the same as it was before ``Source.queued``: the
  main thread's OpenMP threads left as they are (see below);
* **widget, own kernel**: the same in a second kernel where only the widget touches
  the model (it loads it on the reply's worker thread, as in a notebook that uses
  the widget alone);
* **widget, batching source**: the widget in the first kernel with a source that
  batches replies (``concurrency=4``, no ``min_new_tokens``): a reply alone runs
  ``generate()`` there too, with the check that moves it into a batch when another
  reply comes (``nbstream.sources.transformers.batching``).

Why two kernels: torch's CPU build runs its ops on GNU OpenMP, one pool of threads
per thread that calls into torch. What the figures point to (notes of issue 12):
a generate() on the main thread is faster than on a new thread only while its
OpenMP threads spin between the many small parallel regions of a decoding step
(``OMP_WAIT_POLICY=PASSIVE`` takes the difference away, by slowing the main
thread), and a second pool, a worker's, makes libgomp count more threads than
cores and spin less. A kernel whose main thread never ran torch has one pool;
since, ``TransformersSource.queued`` ends the asking thread's pool when a reply
is queued (:mod:`nbstream.sources.transformers.openmp`), so the widget gets one pool
in both kernels.

Each round runs the five in a rotating order (each goes first, second, ... equally
often), each reply on a fresh widget (the same prompt: no history). Printed: tokens/s
per way (median, each round) and per round the ratios to bare on the main thread,
their median and spread (target, DESIGN.md: >= 97%), with the machine's load average.

    .venv/bin/python benchmarks/generation_in_kernel.py [--tokens 32] [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Any

from _cells import shell, value
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

COMMON = """
import threading, time
import torch
from nbstream import ChatWidget
from nbstream.sources import TransformersSource

N = {tokens}
PROMPT = "Write a short story about a robot who learns to paint."
source = TransformersSource({model!r}, max_new_tokens=N, min_new_tokens=N, do_sample=False)
# the same model, through the path that batches replies (min_new_tokens is not batched):
# a reply alone runs generate() there too, with the batch's stop check
batching = TransformersSource({model!r}, max_new_tokens=N, concurrency=4)


def widget(src=None):
    chat = ChatWidget(src or source)
    t0 = time.perf_counter()
    reply = chat.send(PROMPT)
    reply.wait()
    elapsed = time.perf_counter() - t0
    usage = reply.stats["usage"]
    assert reply.status == "done", reply.status
    assert usage["completion_tokens"] == N, usage
    chat.close()
    return N / elapsed, usage["prompt_tokens"]
"""

# the kernel of a user's own loop: the model loaded and run in cells (the main thread)
USER = """
source.prepare()
inputs = source.tokenizer.apply_chat_template(
    [{"role": "user", "content": PROMPT}], add_generation_prompt=True,
    return_dict=True, return_tensors="pt").to(source.model.device)
pad = {"pad_token_id": source.tokenizer.pad_token_id or source.tokenizer.eos_token_id}


def _generate():
    with torch.inference_mode():
        out = source.model.generate(**inputs, max_new_tokens=N, min_new_tokens=N,
                                    do_sample=False, **pad)
    assert out.shape[-1] - inputs["input_ids"].shape[-1] == N


def bare_main():
    t0 = time.perf_counter()
    _generate()
    return N / (time.perf_counter() - t0), inputs["input_ids"].shape[-1]


def bare_worker():
    t0 = time.perf_counter()
    worker = threading.Thread(target=_generate)
    worker.start()
    worker.join()
    return N / (time.perf_counter() - t0), inputs["input_ids"].shape[-1]


def widget_pool_kept():
    # the previous way: the main thread's OpenMP pool stays (Source.queued does nothing)
    source.queued = lambda: None
    try:
        return widget()
    finally:
        del source.queued


for way in (bare_main, bare_worker, widget, widget_pool_kept):  # warm-up: first calls
    way()
widget(batching)
"""

# the kernel of a notebook that uses the widget alone: the first reply loads the model
WIDGET = """
widget()
"""

#: way -> (kernel, expression that runs it once and gives (tokens/s, prompt tokens))
WAYS = {
    "bare, main thread": ("user", "bare_main()"),
    "bare, worker thread": ("user", "bare_worker()"),
    "widget, same kernel": ("user", "widget()"),
    "widget, same, pool kept": ("user", "widget_pool_kept()"),
    "widget, own kernel": ("widget", "widget()"),
    "widget, batching source": ("user", "widget(batching)"),
}
BASE = "bare, main thread"


def orders(ways: list[str], rounds: int) -> list[list[str]]:
    """Rotations of ``ways``, forward then reversed, so that each way takes each place
    in the order equally often over ``2 * len(ways)`` rounds."""
    n = len(ways)
    out = []
    for r in range(rounds):
        k = r % n
        order = ways[k:] + ways[:k]
        out.append(order[::-1] if (r // n) % 2 else order)
    return out


def run(tokens: int, rounds: int, model: str | None, progress: Any = print) -> dict[str, Any]:
    """Rates (tokens/s) of each way per round, and the 1-min load average per round."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    started: list[tuple[KernelManager, BlockingKernelClient]] = []
    try:
        kernels: dict[str, BlockingKernelClient] = {}
        for name, code in (("user", USER), ("widget", WIDGET)):
            km, kc = start_new_kernel(kernel_name="python3", env=env)
            started.append((km, kc))
            shell(kc, COMMON.format(tokens=tokens, model=model) + code)
            kernels[name] = kc
        ways = list(WAYS)
        rates: dict[str, list[float]] = {w: [] for w in ways}
        loads: list[float] = []
        for r, order in enumerate(orders(ways, rounds)):
            loads.append(os.getloadavg()[0])
            prompts = set()
            for way in order:
                kernel, expr = WAYS[way]
                rate, prompt_tokens = value(kernels[kernel], expr)
                rates[way].append(rate)
                prompts.add(prompt_tokens)
            if len(prompts) != 1:  # every way answers the very same prompt
                raise RuntimeError(f"prompts of different lengths: {prompts}")
            progress(f"round {r + 1} ({' > '.join(order)}): "
                     + ", ".join(f"{w} {rates[w][-1]:.2f}" for w in ways)
                     + f" tokens/s (load {loads[-1]:.1f})")
        threads = value(kernels["user"], "torch.get_num_threads()")
        return {"rates": rates, "loads": loads, "torch_threads": threads}
    finally:
        for km, kc in started:  # ours
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def report(result: dict[str, Any], tokens: int) -> str:
    rates, loads = result["rates"], result["loads"]
    lines = [
        f"{tokens} new tokens, {len(loads)} rounds (order rotating), two kernels, torch threads "
        f"{result['torch_threads']}; 1-min load average median {statistics.median(loads):.1f} "
        f"(min {min(loads):.1f}, max {max(loads):.1f}) on {os.cpu_count()} CPUs",
        "tokens/s, median (each round):",
    ]
    for way, values in rates.items():
        each = ", ".join(f"{v:.1f}" for v in values)
        lines.append(f"  {way:24s} {statistics.median(values):6.2f}  ({each})")
    lines.append(f"per round, against {BASE}:")
    for way, values in rates.items():
        if way == BASE:
            continue
        ratios = [w / b for w, b in zip(values, rates[BASE], strict=True)]
        med = statistics.median(ratios)
        verdict = ("  (target >= 97%: " + ("ok)" if med >= 0.97 else "BELOW TARGET)")
                   if way.startswith("widget") else "")
        lines.append(f"  {way:24s} median {med:.1%} (min {min(ratios):.1%}, "
                     f"max {max(ratios):.1%}){verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder or .gguf (default: embedded)")
    parser.add_argument("--tokens", type=int, default=32, help="new tokens per answer")
    parser.add_argument("--rounds", type=int, default=10, help="rounds (5 ways each)")
    args = parser.parse_args(argv)
    result = run(args.tokens, args.rounds, args.model,
                 progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(report(result, args.tokens))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
