"""Several replies of one local model at once: batched against taking turns.

For 1, 2, 4 and 8 replies asked at the same moment of the embedded model (or
``--model PATH``), greedy, ``--tokens`` new tokens at most each, two ways in
one run:

* **lane** (the previous way): ``TransformersSource(concurrency=1)``: the model's
  lane runs one reply at a time; the others wait their turn (``model.generate``);
* **batched**: ``TransformersSource(concurrency=8)``: the lane runs every reply's
  worker at once and the model's batching engine (transformers' continuous
  batching, ``nbstream.sources.transformers.batching``) computes one step for
  all of them at a time. (A reply alone runs ``model.generate`` there too, and
  moves into the batch when the next one asks: the first reply of each count
  starts alone for a moment.)

Replies are handed to the model's lane as the widget does
(``lanes.submit(source.lane_key(), source.concurrency, job)``); each job runs
``source.generate_with`` with an ``emit`` that notes when each piece came. Per
way and count: the aggregate tokens/s (all tokens over the time from the ask to
the last reply's end), each reply's time to first token from the ask and its
own tokens/s (after its first token). Also, per round, a bare ``model.generate``
on a worker thread (the reference of ``benchmarks/generation_in_kernel.py``),
to see a single batched reply against it. Each round runs the two ways in
alternating order; printed are medians over ``--rounds`` rounds, per-round
ratios, the token ids of the two ways compared (greedy decoding: they should
be the same text), and the machine's load average.

    .venv/bin/python benchmarks/batched_generation.py [--tokens 64] [--rounds 3]
        [--counts 1,2,4,8] [--model PATH] [--threads N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from typing import Any

PROMPTS = [
    "Write a long story about a robot who learns to paint.",
    "Write a long story about a cat who sails across the sea.",
    "Write a long story about a girl who builds a kite.",
    "Write a long story about an old man and his garden.",
    "Write a long story about a dragon who is afraid of fire.",
    "Write a long story about two friends lost in a big city.",
    "Write a long story about a baker who bakes bread for the moon.",
    "Write a long story about a train that never stops.",
]


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_way(model: Any, concurrency: int, count: int, tokens: int) -> dict[str, Any]:
    """Ask ``count`` replies at once through the model's lane; per-reply figures."""
    from nbstream.core import lanes
    from nbstream.sources import TransformersSource

    sources = [TransformersSource(model, max_new_tokens=tokens, concurrency=concurrency)
               for _ in range(count)]
    key = sources[0].lane_key()
    while lanes.get(key) is not None:  # the previous way's lane has retired
        time.sleep(0.01)
    firsts: list[float | None] = [None] * count
    ends: list[float] = [0.0] * count
    outcomes: list[Any] = [None] * count
    errors: list[BaseException] = []
    done = threading.Semaphore(0)

    def job(i: int) -> None:
        def emit(piece: str) -> None:
            if firsts[i] is None:
                firsts[i] = time.perf_counter()

        try:
            outcomes[i] = sources[i].generate_with(
                [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}], emit,
                threading.Event(), {})
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            ends[i] = time.perf_counter()
            done.release()

    asked = time.perf_counter()
    for i in range(count):
        lanes.submit(key, sources[i].concurrency, lambda i=i: job(i))
    for _ in range(count):
        done.acquire()
    if errors:
        raise errors[0]
    counts = [int(o.figures["tokens"]) for o in outcomes]
    span = max(ends) - asked
    return {
        "aggregate": sum(counts) / span,
        "ttft": [(f - asked) if f is not None else None for f in firsts],
        "rates": [o.figures.get("tokens_per_second") for o in outcomes],
        "tokens": counts,
        "ids": [list(s.last_token_ids) for s in sources],
        "batched": sources[0].batching,
    }


def bare(model: Any, tokenizer: Any, tokens: int) -> float:
    """Bare ``model.generate`` tokens/s on a new thread (greedy, the first prompt)."""
    import torch

    out: list[float] = []

    def work() -> None:
        inputs = tokenizer.apply_chat_template(
            [{"role": "user", "content": PROMPTS[0]}], add_generation_prompt=True,
            tokenize=True, return_dict=True, return_tensors="pt")
        t0 = time.perf_counter()
        with torch.inference_mode():
            ids = model.generate(**inputs, max_new_tokens=tokens, do_sample=False,
                                 pad_token_id=tokenizer.eos_token_id)
        out.append((ids.shape[-1] - inputs["input_ids"].shape[-1]) / (time.perf_counter() - t0))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    return out[0]


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--counts", default="1,2,4,8")
    p.add_argument("--model", default=None, help="a local model folder (default: embedded)")
    p.add_argument("--json", default=None, help="write the raw figures here")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's own, one per core); on a "
                        "machine shared with other busy processes, 1 avoids OpenMP teams "
                        "waiting for each other")
    args = p.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from nbstream.sources import TransformersSource

    print(f"load average at start: {load()}  (cores: {os.cpu_count()}, torch threads: "
          f"{torch.get_num_threads()})", flush=True)
    holder = TransformersSource(args.model, max_new_tokens=args.tokens, concurrency=max(counts))
    t0 = time.perf_counter()
    holder.prepare()
    model, tokenizer = holder.model, holder.tokenizer
    print(f"model {holder.label} loaded in {time.perf_counter() - t0:.1f} s; "
          f"{holder.batching}", flush=True)
    # warm up both ways (a reply alone runs generate(); two start the batching engine,
    # whose first start allocates its paged cache)
    first = run_way(model, max(counts), 2, 4)
    print(f"first two replies together (the engine's start included): first tokens after "
          f"{first['ttft'][0]:.2f} and {first['ttft'][1]:.2f} s", flush=True)
    run_way(model, 1, 1, 4)
    bare(model, tokenizer, 4)

    raw: dict[str, Any] = {"rounds": [], "tokens": args.tokens, "counts": counts}
    for r in range(args.rounds):
        row: dict[str, Any] = {"load_before": load(), "bare": bare(model, tokenizer, args.tokens)}
        for k in counts:
            ways = [("lane", 1), ("batched", max(counts))]
            if (r + k) % 2:
                ways.reverse()
            for name, concurrency in ways:
                row[(name, k)] = run_way(model, concurrency, k, args.tokens)
            same = sum(a == b for a, b in zip(row[("lane", k)]["ids"], row[("batched", k)]["ids"],
                                              strict=True))
            row[("same", k)] = same
            lane, batched = row[("lane", k)], row[("batched", k)]
            ratio = batched["aggregate"] / lane["aggregate"]
            print(f"round {r + 1} k={k}: lane {lane['aggregate']:.1f} tok/s, batched "
                  f"{batched['aggregate']:.1f} tok/s ({ratio:.2f}x); same ids {same}/{k}; "
                  f"load {load()}", flush=True)
        row["load_after"] = load()
        print(f"round {r + 1}: bare generate() {row['bare']:.1f} tok/s; load {row['load_before']}"
              f" -> {row['load_after']}", flush=True)
        raw["rounds"].append(row)

    rounds = raw["rounds"]
    print()
    print(f"{args.tokens} new tokens at most per reply, greedy, {args.rounds} rounds (medians); "
          f"load average at end: {load()}")
    print("| replies | way | aggregate tok/s | x one reply (same way) | batched / lane "
          "| first token s, median (max) | per-reply tok/s, median | same ids |")
    print("|--:|---|--:|--:|--:|--:|--:|--:|")
    summary: dict[str, Any] = {}
    for k in counts:
        for name in ("lane", "batched"):
            agg = med([rw[(name, k)]["aggregate"] for rw in rounds])
            one = (med([rw[(name, 1)]["aggregate"] for rw in rounds]) if 1 in counts
                   else float("nan"))
            vs = med([rw[("batched", k)]["aggregate"] / rw[("lane", k)]["aggregate"]
                      for rw in rounds])
            ttfts = [t for rw in rounds for t in rw[(name, k)]["ttft"] if t is not None]
            rates = [x for rw in rounds for x in rw[(name, k)]["rates"] if x]
            same = med([rw[("same", k)] for rw in rounds])
            summary[f"{name}_{k}"] = {"aggregate": agg, "ttft_median": med(ttfts),
                                      "ttft_max": max(ttfts, default=float("nan")),
                                      "per_reply": med(rates)}
            print(f"| {k} | {name} | {agg:.1f} | {agg / one:.2f} | "
                  f"{vs:.2f} | {med(ttfts):.2f} ({max(ttfts, default=float('nan')):.2f}) | "
                  f"{med(rates):.1f} | {same:.0f}/{k} |")
    bare_med = med([rw["bare"] for rw in rounds])
    if 1 in counts:
        one_b = [rw[("batched", 1)]["rates"][0] / rw["bare"] for rw in rounds
                 if rw[("batched", 1)]["rates"][0]]
        one_l = [rw[("lane", 1)]["rates"][0] / rw["bare"] for rw in rounds
                 if rw[("lane", 1)]["rates"][0]]
        print(f"\none reply, decoding rate against a bare generate() ({bare_med:.1f} tok/s, "
              f"worker thread): batched {med(one_b):.1%}, lane {med(one_l):.1%} "
              f"(medians of per-round ratios)")
    if 1 in counts and 4 in counts:
        four = med([rw[("batched", 4)]["aggregate"] / rw[("batched", 1)]["aggregate"]
                    for rw in rounds])
        print(f"4 replies batched: {four:.2f}x the aggregate tokens/s of one (target >= 2x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "bare": bare_med,
                       "rounds": [{str(k): v for k, v in rw.items() if k != "ids"}
                                  for rw in rounds]}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
