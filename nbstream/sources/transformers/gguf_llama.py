"""Turn a llama-architecture GGUF file into a transformers safetensors folder, fast.

Owns the first-run conversion of the embedded model (called by
:mod:`nbstream.sources.transformers.default_model`, on whichever thread loads it; no state).

Why not ``from_pretrained(gguf_file=...)``: transformers reads the GGUF
metadata with ``gguf.GGUFReader``, which builds a numpy memmap view for every
string of the 49,152-token vocabulary and merge table (several seconds, and it
does so once for the config, again for the tokenizer and again for the
weights), then dequantizes tensor by tensor into a full fp32 model that
``save_pretrained`` writes as 517 MB. Here the metadata is read once with
``struct`` (the GGUF header is a flat list of typed values), each tensor is
dequantized with the ``gguf`` package's vectorized numpy routines
(``gguf.quants.dequantize``), and the weights are written in ``float16``
(norms stay ``float32``): about half the disk, and ``from_pretrained`` casts
them back to the dtype the model runs in. The tokenizer is still built by
transformers from the GGUF (its own converter), which is correct for every
tokenizer type.

Only the ``llama`` architecture is handled (tensor names and the Q/K row
permutation llama.cpp applies); :class:`Unsupported` tells the caller to fall
back to transformers' general path.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: what the converted folder's weights are stored as (see benchmarks/first_answer.py)
WEIGHTS_DTYPE = "float16"

# GGUF metadata value types (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_F32, _F16 = 0, 1

_LAYER = re.compile(r"blk\.(\d+)\.(\w+)\.weight")
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


class Unsupported(ValueError):
    """This file is not one the fast path converts; use transformers' GGUF loader."""


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of the file: its GGUF name, torch-order shape, ggml type and data offset."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int


@dataclass(frozen=True)
class GgufFile:
    """A GGUF file's metadata and tensor table (the tensor data stays on disk)."""

    path: Path
    metadata: dict[str, Any]
    tensors: tuple[TensorEntry, ...]
    data_start: int


def read(path: Path) -> GgufFile:
    """Parse the header of the GGUF file at ``path`` (versions 2 and 3)."""
    try:
        return _read(path)
    except (struct.error, IndexError, OverflowError, MemoryError, ValueError) as exc:
        if isinstance(exc, Unsupported):
            raise
        raise Unsupported(f"{path}: not a GGUF file this reader understands ({exc})") from exc


def _read(path: Path) -> GgufFile:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as blob:
        if blob[:4] != b"GGUF":
            raise Unsupported(f"{path} is not a GGUF file")
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", blob, 4)
        if version not in (2, 3):
            raise Unsupported(f"{path} is GGUF version {version}")
        pos = 24

        def string() -> str:
            nonlocal pos
            (length,) = struct.unpack_from("<Q", blob, pos)
            text = blob[pos + 8:pos + 8 + length].decode("utf-8", errors="replace")
            pos += 8 + length
            return text

        def value(kind: int) -> Any:
            nonlocal pos
            if kind in _SCALARS:
                fmt = _SCALARS[kind]
                (v,) = struct.unpack_from(fmt, blob, pos)
                pos += struct.calcsize(fmt)
                return v
            if kind == _STRING:
                return string()
            if kind == _ARRAY:
                item, count = struct.unpack_from("<IQ", blob, pos)
                pos += 12
                if item in _SCALARS:
                    fmt = _SCALARS[item]
                    values = list(struct.unpack_from(f"<{count}{fmt[1]}", blob, pos))
                    pos += count * struct.calcsize(fmt)
                    return values
                return [value(item) for _ in range(count)]
            raise Unsupported(f"{path}: unknown GGUF value type {kind}")

        metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = string()
            (kind,) = struct.unpack_from("<I", blob, pos)
            pos += 4
            metadata[key] = value(kind)
        tensors = []
        for _ in range(n_tensors):
            name = string()
            (n_dims,) = struct.unpack_from("<I", blob, pos)
            dims = struct.unpack_from(f"<{n_dims}Q", blob, pos + 4)
            ggml_type, offset = struct.unpack_from("<IQ", blob, pos + 4 + 8 * n_dims)
            pos += 4 + 8 * n_dims + 12
            # ggml lists the fastest-moving dimension first, torch last
            tensors.append(TensorEntry(name, tuple(int(d) for d in reversed(dims)),
                                       int(ggml_type), int(offset)))
    alignment = int(metadata.get("general.alignment", 32))
    data_start = (pos + alignment - 1) // alignment * alignment
    return GgufFile(Path(path), metadata, tuple(tensors), data_start)


def llama_config(gguf: GgufFile) -> Any:
    """The ``LlamaConfig`` this file's metadata describes."""
    from transformers import LlamaConfig

    md = gguf.metadata
    if md.get("general.architecture") != "llama":
        raise Unsupported(f"architecture {md.get('general.architecture')!r} is not llama")
    names = {t.name for t in gguf.tensors}
    heads = int(md["llama.attention.head_count"])
    hidden = int(md["llama.embedding_length"])
    vocab = md.get("llama.vocab_size") or len(md["tokenizer.ggml.tokens"])
    ids: dict[str, Any] = {
        f"{role}_token_id": md.get(f"tokenizer.ggml.{key}_token_id")
        for role, key in (("bos", "bos"), ("eos", "eos"), ("pad", "padding"))
    }
    kwargs: dict[str, Any] = dict(
        vocab_size=int(vocab),
        hidden_size=hidden,
        intermediate_size=int(md["llama.feed_forward_length"]),
        num_hidden_layers=int(md["llama.block_count"]),
        num_attention_heads=heads,
        num_key_value_heads=int(md.get("llama.attention.head_count_kv", heads)),
        head_dim=int(md.get("llama.rope.dimension_count", hidden // heads)),
        max_position_embeddings=int(md.get("llama.context_length", 2048)),
        rms_norm_eps=float(md["llama.attention.layer_norm_rms_epsilon"]),
        rope_theta=float(md.get("llama.rope.freq_base", 10000.0)),
        tie_word_embeddings="output.weight" not in names,
        architectures=["LlamaForCausalLM"],
        **{k: int(v) for k, v in ids.items() if v is not None},
    )
    config = LlamaConfig(**kwargs)
    if "llama.rope.scaling.type" in md:
        raise Unsupported("rope scaling is not handled by the fast path")
    return config


def _hf_name(name: str) -> str:
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    match = _LAYER.fullmatch(name)
    if match is None or match.group(2) not in _LAYER_NAMES:
        raise Unsupported(f"tensor {name!r} has no known llama name")
    return f"model.layers.{match.group(1)}.{_LAYER_NAMES[match.group(2)]}.weight"


def _unpermute(weights: Any, heads: int) -> Any:
    """Undo llama.cpp's interleaving of the rotary halves in the Q and K rows."""
    half = weights.shape[0] // heads // 2
    return weights.reshape(heads, half, 2, *weights.shape[1:]).swapaxes(1, 2).reshape(
        weights.shape)


def state_dict(gguf: GgufFile, config: Any,
               progress: Callable[[int, int], None] | None = None, *,
               keep_float32: bool = False) -> dict[str, Any]:
    """Every tensor dequantized to a torch tensor under its transformers name.

    Matrices are narrowed to :data:`WEIGHTS_DTYPE` unless ``keep_float32``.
    """
    import numpy as np
    import torch
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import dequantize

    half = getattr(torch, WEIGHTS_DTYPE)
    blob = np.memmap(gguf.path, mode="r", dtype=np.uint8)

    def one(entry: TensorEntry) -> Any:
        qtype = GGMLQuantizationType(entry.ggml_type)
        block, block_bytes = GGML_QUANT_SIZES[qtype]
        rows = int(np.prod(entry.shape[:-1], dtype=np.int64))
        row_bytes = entry.shape[-1] // block * block_bytes
        begin = gguf.data_start + entry.offset
        raw = np.asarray(blob[begin:begin + rows * row_bytes])
        raw = raw.reshape(rows, row_bytes)
        values = dequantize(raw, qtype).reshape(entry.shape).astype(np.float32, copy=False)
        if entry.name.endswith(".attn_q.weight"):
            values = _unpermute(values, config.num_attention_heads)
        elif entry.name.endswith(".attn_k.weight"):
            values = _unpermute(values, config.num_key_value_heads)
        if not values.flags.writeable or not values.flags.c_contiguous:
            values = np.array(values, dtype=np.float32)  # a view of the read-only map
        tensor = torch.from_numpy(values)
        # the large matrices in half precision; the small norms as the file has them
        if not keep_float32 and entry.ggml_type != _F32 and tensor.ndim >= 2:
            narrow = tensor.to(half)
            if bool(torch.isfinite(narrow).all()):
                tensor = narrow
        return tensor

    out: dict[str, Any] = {}
    # progress counts elements, so the 28M-element embedding weighs what it costs
    sizes = [int(np.prod(e.shape, dtype=np.int64)) for e in gguf.tensors]
    total, done = sum(sizes), 0
    # numpy releases the GIL in the heavy loops: one thread per core
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)),
                            thread_name_prefix="nbstream-convert") as pool:
        for size, entry, tensor in zip(sizes, gguf.tensors, pool.map(one, gguf.tensors),
                                       strict=True):
            out[_hf_name(entry.name)] = tensor
            done += size
            if progress is not None:
                progress(done, total)  # on the caller's thread, in order
    return out


#: A first conversion's progress, in units of :data:`UNITS`: rough shares of its
#: time measured on 2 cores (importing transformers' Llama code and reading the
#: header about a third, the tensors half, writing the weights and converting the
#: tokenizer the rest), so that a progress bar moves with the work rather than
#: waiting at 0 % through the imports.
UNITS = 1000
_READ_DONE = 300
_TENSORS_DONE = 850
_WEIGHTS_WRITTEN = 900


def convert(path: Path, dest: Path,
            progress: Callable[[int, int], None] | None = None) -> None:
    """Write the model folder (config, weights, tokenizer) for the GGUF at ``path`` into ``dest``.

    ``dest`` must exist and be empty; the caller makes it atomic. Raises
    :class:`Unsupported` (before writing anything) for a file the fast path
    does not handle. ``progress(done, UNITS)`` is called from 0 (before the
    imports) to :data:`UNITS` (all written), never decreasing.
    """
    def report(done: int) -> None:
        if progress is not None:
            progress(done, UNITS)

    report(0)
    from safetensors.torch import save_file
    from transformers import GenerationConfig, PreTrainedTokenizerFast

    gguf = read(Path(path))
    config = llama_config(gguf)
    for entry in gguf.tensors:
        _hf_name(entry.name)  # every name known, before any work
    report(_READ_DONE)
    share = _TENSORS_DONE - _READ_DONE
    tensors = state_dict(gguf, config, lambda done, total: report(
        _READ_DONE + share * done // max(total, 1)))
    config.save_pretrained(dest)
    GenerationConfig.from_model_config(config).save_pretrained(dest)
    save_file(tensors, str(Path(dest) / "model.safetensors"), metadata={"format": "pt"})
    report(_WEIGHTS_WRITTEN)
    # transformers' own GGUF tokenizer conversion (PreTrainedTokenizerFast, not
    # AutoTokenizer, which would parse the whole file again for the config)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(
        Path(path).parent, gguf_file=Path(path).name, local_files_only=True)
    tokenizer.save_pretrained(dest)
    (Path(dest) / "nbstream-gguf.json").write_text(json.dumps(
        {"tensors": len(tensors), "weights_dtype": WEIGHTS_DTYPE}, indent=2))
    report(UNITS)
