"""GPU check: bare generate() vs the nbstream pipeline, per loading option.

On a CUDA machine this builds a Llama-style model from a config (random
weights: throughput does not depend on their values, and the GPU machine
reaches no model hub), saves it to a temporary folder, and for each variant
(bf16 with sdpa, 4-bit bitsandbytes, flash-attention 2 where installed)
loads it through :class:`nbstream.sources.TransformersSource`, then measures

* bare ``model.generate`` tokens/s (greedy, a fixed number of new tokens),
* the same generation streamed through the widget pipeline (worker thread,
  incremental detokenizer, coalescing stream, pump; no browser attached),
  with its time to first token,

and prints one table. A variant that cannot run (no bitsandbytes, no
flash_attn, a GPU too old) is reported with the reason instead.

Then, per variant, several replies asked at once (``--batched-counts``, 1/2/4/8
on CUDA): the aggregate tokens/s and the median time to first token of
``TransformersSource(concurrency=8)`` (replies computed together by transformers'
continuous batching, ``nbstream.sources.transformers.batching``) against
``concurrency=1`` (they take turns), with the source's ``batching`` line (why a
variant is not batched, e.g. 4-bit).

Without CUDA it runs the same steps on the CPU with a tiny config, so the
script is exercised by the test suite and cannot rot:

    python scripts/gpu_check.py                     # CUDA if present, else a CPU smoke run
    python scripts/gpu_check.py --size 0.5b --new-tokens 256 --tokenizer PATH

``--tokenizer`` is a local tokenizer folder (the converted embedded model's
folder works: ``nbstream.sources.transformers.default_model.default_model_path()``); the model's
vocabulary is sized to match it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SIZES: dict[str, dict[str, int]] = {
    # Llama-style shapes; "0.5b" is about 0.5 billion parameters with a 49k vocabulary
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2},
    "0.5b": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
             "num_attention_heads": 16, "num_key_value_heads": 4},
    "1b": {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 16,
           "num_attention_heads": 32, "num_key_value_heads": 8},
}


def build_model(folder: Path, size: str, tokenizer: Any) -> None:
    """Save a random-weight Llama of ``size`` (and the tokenizer) to ``folder``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), max_position_embeddings=4096,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=True, **SIZES[size])
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def load_tokenizer(path: str | None) -> Any:
    from transformers import AutoTokenizer

    if path is None:
        from nbstream.sources.transformers.default_model import default_model_path

        path = str(default_model_path())
    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def bare_tokens_per_s(model: Any, tokenizer: Any, new_tokens: int, runs: int) -> float:
    import torch

    inputs = tokenizer("Tell me about lighthouses.", return_tensors="pt").to(model.device)
    kwargs = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False,
              "pad_token_id": tokenizer.eos_token_id}
    with torch.inference_mode():  # as TransformersSource runs it
        model.generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                       pad_token_id=tokenizer.eos_token_id)  # warm up
    rates = []
    for _ in range(runs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(**inputs, **kwargs)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        n = out.shape[-1] - inputs["input_ids"].shape[-1]
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates)


def streamed(source: Any, new_tokens: int, runs: int) -> tuple[float, float]:
    """(tokens/s, time to first token in ms) through the widget pipeline, medians."""
    from nbstream import StreamView

    rates, ttfts = [], []
    for _ in range(runs):
        view = StreamView(source, "Tell me about lighthouses.")
        view.wait(600)
        if view.status != "done":
            raise RuntimeError(f"streamed run ended {view.status}: {view.reply.error}")
        stats = view.stats
        tokens = stats.get("tokens", stats["pieces"])
        rates.append(tokens / (stats["duration_ms"] / 1000))
        ttfts.append(stats["ttft_ms"])
        view.close()
    return statistics.median(rates), statistics.median(ttfts)


def variant(name: str, folder: Path, options: dict[str, Any], args: argparse.Namespace
            ) -> dict[str, Any]:
    from nbstream.sources import TransformersSource

    row: dict[str, Any] = {"variant": name}
    try:
        source = TransformersSource(str(folder), max_new_tokens=args.new_tokens,
                                    min_new_tokens=args.new_tokens, do_sample=False, **options)
        t0 = time.perf_counter()
        source.prepare()
        row["load_s"] = round(time.perf_counter() - t0, 2)
        # on a thread of its own, like the pipeline's worker: on a busy CPU, torch's
        # OpenMP team on the main thread can be far slower than on a fresh thread
        out: list[float] = []
        t = threading.Thread(target=lambda: out.append(bare_tokens_per_s(
            source.model, source.tokenizer, args.new_tokens, args.runs)))
        t.start()
        t.join()
        row["bare_tok_s"] = round(out[0], 1)
        rate, ttft = streamed(source, args.new_tokens, args.runs)
        row["streamed_tok_s"] = round(rate, 1)
        row["ratio"] = round(rate / row["bare_tok_s"], 3)
        row["ttft_ms"] = round(ttft, 1)
        model = source.model
        row["device"] = str(model.device)
        row["dtype"] = str(model.dtype).replace("torch.", "")
        row["attention"] = getattr(model.config, "_attn_implementation", "?")
    except Exception as exc:  # report and go on with the next variant
        row["skipped"] = f"{type(exc).__name__}: {exc}"[:200]
    return row


def together(folder: Path, options: dict[str, Any], concurrency: int, count: int,
             new_tokens: int) -> tuple[float, float, str]:
    """``count`` replies asked at once of one model through its lane, as the widgets
    ask: (aggregate tokens/s, median seconds to first token, the source's batching)."""
    from nbstream.core import lanes
    from nbstream.sources import TransformersSource

    sources = [TransformersSource(str(folder), max_new_tokens=new_tokens,
                                  concurrency=concurrency, **options) for _ in range(count)]
    for s in sources:
        s.prepare()
    key = sources[0].lane_key()
    while lanes.get(key) is not None:  # the previous run's lane has retired
        time.sleep(0.01)
    firsts: list[float] = []
    outcomes: list[Any] = []
    errors: list[BaseException] = []
    done = threading.Semaphore(0)
    lock = threading.Lock()

    def job(i: int) -> None:
        first: list[float] = []

        def emit(piece: str) -> None:
            if not first:
                first.append(time.perf_counter())

        try:
            outcome = sources[i].generate_with(
                [{"role": "user", "content": f"Tell me about lighthouses, part {i}."}], emit,
                threading.Event(), {})
            with lock:
                outcomes.append(outcome)
                firsts.extend(first)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            done.release()

    t0 = time.perf_counter()
    for i in range(count):
        lanes.submit(key, sources[i].concurrency, lambda i=i: job(i))
    for _ in range(count):
        done.acquire()
    if errors:
        raise errors[0]
    span = time.perf_counter() - t0
    tokens = sum(int(o.figures["tokens"]) for o in outcomes)
    return tokens / span, statistics.median(f - t0 for f in firsts), sources[0].batching


def batched_rows(name: str, folder: Path, options: dict[str, Any], args: argparse.Namespace
                 ) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for count in args.batched_counts:
        row: dict[str, Any] = {"variant": f"{name}, {count} at once"}
        try:
            for way, concurrency in (("lane", 1), ("batched", 8)):
                rates, ttfts = [], []
                for _ in range(args.runs):
                    rate, ttft, batching = together(folder, options, concurrency, count,
                                                    args.new_tokens)
                    rates.append(rate)
                    ttfts.append(ttft)
                row[f"{way}_tok_s"] = round(statistics.median(rates), 1)
                row[f"{way}_ttft_ms"] = round(statistics.median(ttfts) * 1000, 1)
                if way == "batched":
                    row["batching"] = batching
            row["ratio"] = round(row["batched_tok_s"] / row["lane_tok_s"], 2)
        except Exception as exc:  # report and go on
            row["skipped"] = f"{type(exc).__name__}: {exc}"[:200]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", choices=sorted(SIZES), default=None,
                   help="model shape (default: 0.5b on CUDA, tiny on CPU)")
    p.add_argument("--new-tokens", type=int, default=None)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tokenizer", default=None, help="local tokenizer folder")
    p.add_argument("--json", action="store_true", help="print rows as JSON lines too")
    p.add_argument("--batched-counts", default=None,
                   help="replies asked at once, comma-separated (default: 1,2,4,8 on CUDA, "
                        "1,2 on CPU; 0: none)")
    args = p.parse_args(argv)

    import torch

    cuda = torch.cuda.is_available()
    args.size = args.size or ("0.5b" if cuda else "tiny")
    args.new_tokens = args.new_tokens or (256 if cuda else 16)
    counts = args.batched_counts or ("1,2,4,8" if cuda else "1,2")
    args.batched_counts = [int(c) for c in counts.split(",") if int(c) > 0]
    device = "cuda" if cuda else "cpu"
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name(0)})" if cuda else "")
          + f", model {args.size}, {args.new_tokens} new tokens, {args.runs} runs (medians)")
    tokenizer = load_tokenizer(args.tokenizer)
    variants: list[tuple[str, dict[str, Any]]] = [
        ("default", {"device": device}),
    ]
    if cuda:
        variants += [
            ("bf16 sdpa", {"device": device, "dtype": "bfloat16", "attn_implementation": "sdpa"}),
            ("4-bit nf4", {"device": device, "load_in_4bit": True}),
            ("flash-attn 2", {"device": device, "dtype": "bfloat16",
                              "attn_implementation": "flash_attention_2"}),
        ]
    rows = []
    together_rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / f"llama-{args.size}"
        build_model(folder, args.size, tokenizer)
        for name, options in variants:
            rows.append(variant(name, folder, options, args))
            if "skipped" not in rows[-1]:
                together_rows += batched_rows(name, folder, options, args)
    cols = ["variant", "device", "dtype", "attention", "load_s", "bare_tok_s",
            "streamed_tok_s", "ratio", "ttft_ms"]
    print(" | ".join(cols))
    for r in rows:
        if "skipped" in r:
            print(f"{r['variant']} | skipped: {r['skipped']}")
        else:
            print(" | ".join(str(r.get(c, "")) for c in cols))
        if args.json:
            print(json.dumps(r))
    if together_rows:
        print()
        cols = ["variant", "lane_tok_s", "batched_tok_s", "ratio", "lane_ttft_ms",
                "batched_ttft_ms", "batching"]
        print(" | ".join(cols))
        for r in together_rows:
            if "skipped" in r:
                print(f"{r['variant']} | skipped: {r['skipped']}")
            else:
                print(" | ".join(str(r.get(c, "")) for c in cols))
            if args.json:
                print(json.dumps(r))
    return 0 if any("skipped" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
