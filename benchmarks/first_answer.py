"""First answer of the embedded model on a fresh cache: the old conversion against the new.

Run: ``.venv/bin/python benchmarks/first_answer.py [--skip-dtypes]`` (a few minutes on
2 cores).

Each figure comes from a fresh Python process (imports included, as a user's
first ``ChatWidget()`` pays them) with ``NBSTREAM_CACHE_DIR`` pointed at a new
temporary folder, so the shared cache in ~/.cache/nbstream is never touched:

* ``old``: transformers' GGUF loader + ``save_pretrained`` in fp32 (the way
  before ``nbstream.sources.transformers.gguf_llama``), then load + answer;
* ``new``: ``nbstream.sources.transformers.default_model`` as it is now (fast reader, numpy
  dequantization, float16 on disk), then load + answer;
* ``new, warm``: the same process kind again on the now-filled cache.

Then, in one process, the stored dtype is compared: the same GGUF written as
fp32 / fp16 / bf16 safetensors, each loaded as the CPU runs it (fp32) and, for
the half types, also run in that type: load seconds, tokens/s and whether the
greedy answer equals the fp32 one, token for token.

Prints the machine's load average with the figures: on a shared machine the
seconds are noisy; the sizes and equality are not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
LONGER = [{"role": "user", "content": "Write a short story about a robot who learns to paint."}]
NEW_TOKENS = 48

CHILD = r"""
import json, sys, time, os
t0 = time.perf_counter()
mode = sys.argv[1]
import torch, transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
from nbstream.sources.transformers import default_model as dm
t_import = time.perf_counter()
gguf = dm.gguf_path()
folder = dm.converted_path(gguf)
if mode == "old" and not dm.is_converted(folder):
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir()
    dm._transformers_convert(gguf, folder)
    (folder / dm._MARKER).write_text("{}")
else:
    dm.default_model_path()
t_convert = time.perf_counter()
tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
model.eval()
t_load = time.perf_counter()
ids = tok.apply_chat_template(json.loads(sys.argv[2]), add_generation_prompt=True,
                              return_tensors="pt", return_dict=True)
first = []
class Clock:
    def put(self, value):  # first call: the prompt; second: the first new token
        first.append(time.perf_counter())
    def end(self):
        pass
from transformers.generation.streamers import BaseStreamer
class S(Clock, BaseStreamer):
    pass
with torch.no_grad():
    out = model.generate(**ids, max_new_tokens=int(sys.argv[3]), do_sample=False, streamer=S())
t_answer = time.perf_counter()
size = sum(p.stat().st_size for p in folder.iterdir())
print(json.dumps({
    "import_s": t_import - t0, "convert_s": t_convert - t_import, "load_s": t_load - t_convert,
    "first_token_s": (first[1] if len(first) > 1 else t_answer) - t0,
    "answer_s": t_answer - t0, "cache_mb": size / 1e6,
    "answer": tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True),
}))
"""


def child(mode: str, cache: Path) -> dict[str, object]:
    env = {**os.environ, "NBSTREAM_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD, mode, json.dumps(QUESTION),
                           str(NEW_TOKENS)], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def dtypes() -> list[dict[str, object]]:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from nbstream.sources.transformers import default_model, gguf_llama

    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "fp16"
        base.mkdir()
        gguf_llama.convert(default_model.gguf_path(), base)
        tok = AutoTokenizer.from_pretrained(base, local_files_only=True)
        # the fp32 reference: the GGUF dequantized without rounding
        f = gguf_llama.read(default_model.gguf_path())
        full = gguf_llama.state_dict(f, gguf_llama.llama_config(f), keep_float32=True)
        reference: dict[str, list[int]] = {}
        for stored in ("float32", "float16", "bfloat16"):
            folder = Path(tmp) / stored
            if not folder.exists():
                folder.mkdir()
                for file in base.iterdir():
                    if file.name != "model.safetensors":
                        (folder / file.name).write_bytes(file.read_bytes())
                cast = {k: (v.to(getattr(torch, stored)) if v.ndim >= 2 else v)
                        for k, v in full.items()}
                save_file(cast, str(folder / "model.safetensors"), metadata={"format": "pt"})
            runs = ["float32"] if stored == "float32" else ["float32", stored]
            for run in runs:
                t = time.perf_counter()
                model = AutoModelForCausalLM.from_pretrained(
                    folder, dtype=getattr(torch, run), local_files_only=True).eval()
                load_s = time.perf_counter() - t
                row: dict[str, object] = {
                    "stored": stored, "runs_in": run, "load_s": round(load_s, 2),
                    "disk_mb": round((folder / "model.safetensors").stat().st_size / 1e6),
                }
                for label, messages in (("capital", QUESTION), ("story", LONGER)):
                    ids = tok.apply_chat_template(messages, add_generation_prompt=True,
                                                  return_tensors="pt", return_dict=True)
                    t = time.perf_counter()
                    with torch.no_grad():
                        out = model.generate(**ids, max_new_tokens=96, do_sample=False)
                    new = out[0, ids["input_ids"].shape[1]:].tolist()
                    row[f"{label}_tok_s"] = round(len(new) / (time.perf_counter() - t), 1)
                    if stored == "float32":
                        reference[label] = new
                    ref = reference[label]
                    pairs = enumerate(zip(new, ref, strict=False))
                    same = next((i for i, (a, b) in pairs if a != b), min(len(new), len(ref)))
                    row[f"{label}_same_tokens"] = f"{same}/{len(ref)}"
                rows.append(row)
                del model
    return rows


def main() -> None:
    print(f"load average at start: {os.getloadavg()}  ({os.cpu_count()} CPUs)")
    skip_dtypes = "--skip-dtypes" in sys.argv
    with tempfile.TemporaryDirectory() as old_cache, tempfile.TemporaryDirectory() as new_cache:
        for label, mode, cache in (("old (transformers, fp32)", "old", old_cache),
                                   ("new (gguf_llama, fp16)", "new", new_cache),
                                   ("new, warm cache", "new", new_cache)):
            r = child(mode, Path(cache))
            print(f"{label:28} import {r['import_s']:5.1f} s  convert {r['convert_s']:5.1f} s  "
                  f"load {r['load_s']:4.1f} s  first token {r['first_token_s']:5.1f} s  "
                  f"answer ({NEW_TOKENS} tokens max) {r['answer_s']:5.1f} s  "
                  f"cache {r['cache_mb']:4.0f} MB   load avg {os.getloadavg()[0]:.1f}")
            print(f"{'':28} answer: {r['answer']!r}")
    if skip_dtypes:
        print(f"load average at end: {os.getloadavg()}")
        return
    print()
    print("stored dtype, loaded as ... on this CPU (greedy, 96 new tokens):")
    for row in dtypes():
        print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
