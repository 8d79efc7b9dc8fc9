"""What streaming costs: bare ``model.generate`` vs ``TransformersSource.generate``.

Two measurements on the embedded SmolLM2-135M-Instruct (or ``--model PATH``):

1. End to end. Greedy runs of a fixed number of new tokens
   (``min_new_tokens`` = ``max_new_tokens``, so both sides produce exactly as
   many), alternating bare ``model.generate`` and ``source.generate`` so that
   drift in machine load hits both alike; median tokens/s of each. The
   streamed side is timed around the whole call: chat template, streamer,
   incremental detokenization, the cancel criterion and an ``emit`` that
   collects the pieces. Target (DESIGN.md): streamed >= 97% of bare.
2. The added work alone. The same token ids replayed through the streamer's
   ``put()`` and the cancel criterion, and the chat template applied, without
   the model (best of many repeats, so other processes hardly matter); as a
   share of the time per token of the fastest bare run. On a busy machine the
   end-to-end figures swing with the other processes; this one does not.

    .venv/bin/python benchmarks/generation_overhead.py [--tokens 64] [--runs 5] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import timeit
from typing import Any

from nbstream.detok import IncrementalDecoder
from nbstream.sources.base import ChatMessage
from nbstream.sources.transformers import TransformersSource, _stopping_criterion, _streamer

PROMPT: list[ChatMessage] = [
    {"role": "user", "content": "Write a short story about a robot who learns to paint."}
]


def added_work_seconds(source: TransformersSource, ids: list[int], repeats: int) -> float:
    """Best time of the per-reply work streaming adds, without the model."""
    import torch

    tokenizer = source.tokenizer
    cancel = threading.Event()
    prompt = torch.tensor([[1, 2, 3]])
    steps = [torch.tensor([i]) for i in ids]
    sink: list[str] = []

    def one_reply() -> None:
        tokenizer.apply_chat_template(
            PROMPT, add_generation_prompt=True, return_dict=True, return_tensors="pt"
        )
        streamer = _streamer(IncrementalDecoder(tokenizer), sink.append, cancel)
        criterion = _stopping_criterion(cancel)
        streamer.put(prompt)
        for step in steps:
            criterion(prompt, None)
            streamer.put(step)
        streamer.end()

    one_reply()
    return min(timeit.repeat(one_reply, number=1, repeat=repeats))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder or .gguf (default: embedded)")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per run")
    parser.add_argument("--runs", type=int, default=5, help="runs per side (median taken)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    fixed = {"max_new_tokens": args.tokens, "min_new_tokens": args.tokens, "do_sample": False}
    source = TransformersSource(args.model, **fixed)
    source.prepare()
    print(f"loaded {source.label} in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    model, tokenizer = source.model, source.tokenizer
    inputs: Any = tokenizer.apply_chat_template(
        PROMPT, add_generation_prompt=True, return_dict=True, return_tensors="pt"
    ).to(model.device)
    pad = {"pad_token_id": tokenizer.pad_token_id or tokenizer.eos_token_id}

    def bare() -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(**inputs, **fixed, **pad)
        elapsed = time.perf_counter() - t0
        assert out.shape[-1] - inputs["input_ids"].shape[-1] == args.tokens
        return float(args.tokens / elapsed)

    def streamed() -> float:
        pieces: list[str] = []
        t0 = time.perf_counter()
        source.generate(PROMPT, pieces.append, threading.Event())
        elapsed = time.perf_counter() - t0
        assert len(source.last_token_ids) == args.tokens
        assert "".join(pieces) == tokenizer.decode(source.last_token_ids, skip_special_tokens=True)
        return float(args.tokens / elapsed)

    bare()  # warm-up: first-call allocations, kernels
    streamed()
    rates: dict[str, list[float]] = {"bare": [], "streamed": []}
    for _ in range(args.runs):
        rates["bare"].append(bare())
        rates["streamed"].append(streamed())

    threads = torch.get_num_threads()
    print(f"{args.tokens} new tokens, {args.runs} runs each, torch threads {threads}")
    print("end to end:")
    for name, values in rates.items():
        spread = ", ".join(f"{v:.1f}" for v in values)
        print(f"  {name:9s} median {statistics.median(values):6.2f} tokens/s  ({spread})")
    ratio = statistics.median(rates["streamed"]) / statistics.median(rates["bare"])
    verdict = "ok" if ratio >= 0.97 else "BELOW TARGET"
    print(f"  streamed / bare = {ratio:.1%}  (target >= 97%: {verdict})")
    best = max(rates["streamed"]) / max(rates["bare"])
    print(f"  best streamed / best bare = {best:.1%}  (the least disturbed runs)")

    added = added_work_seconds(source, list(source.last_token_ids), repeats=50)
    per_token = 1 / max(rates["bare"])
    share = added / (args.tokens * per_token)
    print("added work alone (template + put + criterion, no model):")
    print(
        f"  {added * 1e3:.2f} ms per reply, {added / args.tokens * 1e6:.0f} us per token = "
        f"{share:.2%} of the fastest bare run's {per_token * 1e3:.1f} ms per token "
        f"-> streamed ~ {1 / (1 + share):.1%} of bare"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
