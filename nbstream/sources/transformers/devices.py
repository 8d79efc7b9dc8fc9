"""Where and how a local model runs: device, dtype, quantization, attention.

Pure selection logic, run once per source in ``prepare()`` on its worker
thread. Everything it asks of the machine (is CUDA there, which compute
capability, does the GPU do bf16, is a package installed) goes through a
:class:`Probes` object, so tests cover every branch on a machine without a
GPU by passing fakes.

Rules (each overridable by an explicit argument):

* device: ``cuda`` when CUDA is available, else ``cpu``;
* dtype: ``bfloat16`` on a GPU that supports it, ``float16`` on other GPUs,
  ``float32`` on the CPU (half precision on a CPU is slower, not faster);
* quantization: ``load_in_4bit`` / ``load_in_8bit`` build a
  ``transformers.BitsAndBytesConfig`` (NF4 with the chosen compute dtype for
  4 bit); bitsandbytes must be installed;
* attention: ``"auto"`` picks ``flash_attention_2`` on a CUDA GPU of compute
  capability 8.0 or newer in half precision with ``flash_attn`` installed, and
  ``sdpa`` otherwise. Asking for ``flash_attention_2`` explicitly where it
  cannot run is an error naming what is missing, never a silent switch.
  (transformers 5 can fetch a flash-attention kernel from the Hub when
  ``flash_attn`` is absent; nbstream never asks it to.)

Batching (:func:`select_batching`): several replies of one model run together
in transformers' continuous batching (:mod:`nbstream.sources.transformers.batching`)
on ``cpu`` and ``cuda`` devices, with ``sdpa`` or flash attention, unquantized;
elsewhere replies take turns. The paged cache is sized per device: on a CPU,
small pages, a budget of 1,024 tokens per reply and prefill in chunks of 256
tokens (a long prompt then delays the others' next token by one chunk, not by
the whole prompt); on a GPU, 256-token pages, 8,192 tokens per reply, 2,048
tokens per step.

After a 4-bit load on the CPU, :func:`check_packable` looks at the loaded
model before its first forward pass: on a CPU with AVX-512-BF16,
bitsandbytes repacks each 4-bit layer for its fused kernel at that first pass
and cannot do so for a layer whose input width is not a whole number of
quantization blocks (64 by default) or whose output width is not a multiple
of 32. Such a layer is named in a clear error here, instead of a reshape
error from inside bitsandbytes at the first token.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FLASH_ATTENTION = "flash_attention_2"

_DTYPE_NAMES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _capability(device: str) -> tuple[int, int]:
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    return int(major), int(minor)


def _bf16_supported(device: str) -> bool:
    import torch

    with torch.cuda.device(device):
        return bool(torch.cuda.is_bf16_supported())


@dataclass(frozen=True)
class Probes:
    """What selection asks of the machine; replace any of them in tests."""

    cuda_available: Callable[[], bool] = _cuda_available
    capability: Callable[[str], tuple[int, int]] = _capability
    bf16_supported: Callable[[str], bool] = _bf16_supported
    has_module: Callable[[str], bool] = _has_module


@dataclass(frozen=True)
class Plan:
    """The chosen settings; :meth:`from_pretrained_kwargs` turns them into arguments."""

    device: str
    dtype: str  # "float32" | "float16" | "bfloat16"
    attn_implementation: str
    quantization: str | None = None  # None | "4bit" | "8bit"
    reasons: tuple[str, ...] = field(default=(), compare=False)

    def torch_dtype(self) -> Any:
        import torch

        return getattr(torch, self.dtype)

    def quantization_config(self) -> Any:
        """A ``BitsAndBytesConfig`` for the chosen quantization, or None."""
        if self.quantization is None:
            return None
        from transformers import BitsAndBytesConfig as _BitsAndBytesConfig

        BitsAndBytesConfig: Any = _BitsAndBytesConfig  # untyped upstream
        if self.quantization == "4bit":
            return BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_compute_dtype=self.torch_dtype(),
            )
        return BitsAndBytesConfig(load_in_8bit=True)

    def from_pretrained_kwargs(self) -> dict[str, Any]:
        """Arguments for ``AutoModelForCausalLM.from_pretrained``."""
        kwargs: dict[str, Any] = {
            "dtype": self.torch_dtype(),
            "attn_implementation": self.attn_implementation,
            "local_files_only": True,
        }
        if self.quantization is not None:
            kwargs["quantization_config"] = self.quantization_config()
        if self.device != "cpu":
            # Place the weights on the device while loading (quantized models
            # must be; the others load faster than cpu-then-copy).
            kwargs["device_map"] = {"": self.device}
        return kwargs


#: bitsandbytes packs the output rows of a 4-bit layer in tiles of this many
#: for its AVX-512-BF16 CPU kernel (``_convert_weight_packed_for_cpu``)
CPU_PACK_ROWS = 32


def check_packable(model: Any, chosen: Plan) -> None:
    """Raise ``ValueError`` naming the first 4-bit layer bitsandbytes cannot pack.

    Only a 4-bit model on the CPU is looked at, and only its layers that
    bitsandbytes will repack: ``Linear4bit`` modules whose
    ``support_avx512bf16_for_cpu`` is set (bitsandbytes sets it when the CPU
    has AVX-512-BF16). Packing reshapes the per-block scales to
    ``(out_features, in_features // blocksize)`` and the weights to tiles of
    :data:`CPU_PACK_ROWS` rows, so ``in_features`` must be a multiple of the
    block size and ``out_features`` of 32. Without that CPU feature nothing is
    packed and every width works.
    """
    if chosen.quantization != "4bit" or chosen.device != "cpu":
        return
    from bitsandbytes.nn.modules import Linear4bit

    for name, module in model.named_modules():
        if not isinstance(module, Linear4bit):
            continue
        if not getattr(module, "support_avx512bf16_for_cpu", False):
            continue
        state = getattr(module.weight, "quant_state", None)
        if state is None or getattr(state, "packing_format_for_cpu", False):
            continue
        rows, inputs = (int(n) for n in state.shape)
        block = int(state.blocksize)
        if inputs % block == 0 and rows % CPU_PACK_ROWS == 0:
            continue
        raise ValueError(
            f"load_in_4bit on this CPU: layer {name!r} ({inputs} inputs, {rows} outputs) "
            f"cannot be packed for bitsandbytes' AVX-512-BF16 kernel, which needs the "
            f"inputs in whole blocks of {block} and the outputs in multiples of "
            f"{CPU_PACK_ROWS}; load this model without load_in_4bit, or on a GPU"
        )


def _normalize_dtype(dtype: Any) -> str | None:
    if dtype is None or dtype == "auto":
        return None
    name = str(dtype).removeprefix("torch.")
    try:
        return _DTYPE_NAMES[name.lower()]
    except KeyError:
        raise ValueError(
            f"dtype {dtype!r} is not one of float32, float16, bfloat16 (or 'auto')"
        ) from None


def select_device(device: Any = None, *, probes: Probes | None = None) -> str:
    """``device`` as a string when given; else ``"cuda"`` if available, else ``"cpu"``."""
    probes = probes or Probes()
    if device is not None and str(device) != "auto":
        chosen = str(device)
        if chosen.startswith("cuda") and not probes.cuda_available():
            raise ValueError(
                f"device={chosen!r}, but CUDA is not available here "
                "(no GPU, or a CPU-only build of torch)"
            )
        return chosen
    return "cuda" if probes.cuda_available() else "cpu"


def select_dtype(device: str, dtype: Any = None, *, probes: Probes | None = None) -> str:
    """The dtype name for ``device``: an explicit one, else by the rules above."""
    probes = probes or Probes()
    explicit = _normalize_dtype(dtype)
    if explicit is not None:
        return explicit
    if device.startswith("cuda"):
        return "bfloat16" if probes.bf16_supported(device) else "float16"
    return "float32"


def select_quantization(
    load_in_4bit: bool = False, load_in_8bit: bool = False, *, probes: Probes | None = None
) -> str | None:
    """``"4bit"``, ``"8bit"`` or None; checks that bitsandbytes is installed."""
    probes = probes or Probes()
    if load_in_4bit and load_in_8bit:
        raise ValueError("choose one of load_in_4bit and load_in_8bit, not both")
    if not (load_in_4bit or load_in_8bit):
        return None
    if not probes.has_module("bitsandbytes"):
        flag = "load_in_4bit" if load_in_4bit else "load_in_8bit"
        raise ImportError(
            f"{flag}=True needs the bitsandbytes package: pip install bitsandbytes",
            name="bitsandbytes",
        )
    return "4bit" if load_in_4bit else "8bit"


def select_attention(
    device: str,
    dtype: str,
    requested: str | None = "auto",
    *,
    probes: Probes | None = None,
) -> tuple[str, str]:
    """The attention implementation and a one-line reason for it."""
    probes = probes or Probes()
    if requested not in (None, "auto", FLASH_ATTENTION):
        return requested, "as requested"
    explicit = requested == FLASH_ATTENTION
    problem: str | None = None
    if not device.startswith("cuda"):
        problem = f"flash-attention needs a CUDA GPU (device is {device})"
    elif not probes.has_module("flash_attn"):
        problem = "flash-attention needs the flash-attn package: pip install flash-attn"
    else:
        major, minor = probes.capability(device)
        if major < 8:
            problem = (
                f"flash-attention needs a GPU of compute capability 8.0 or newer "
                f"(this one is {major}.{minor})"
            )
        elif dtype not in ("float16", "bfloat16"):
            problem = f"flash-attention needs float16 or bfloat16 (dtype is {dtype})"
    if problem is None:
        return FLASH_ATTENTION, "flash_attn installed, compute capability >= 8.0"
    if explicit:
        if "package" in problem:
            raise ImportError(
                f"attn_implementation={FLASH_ATTENTION!r}: {problem}", name="flash_attn"
            )
        raise ValueError(f"attn_implementation={FLASH_ATTENTION!r}: {problem}")
    return "sdpa", problem


def plan(
    *,
    device: Any = None,
    dtype: Any = None,
    load_in_4bit: bool = False,
    load_in_8bit: bool = False,
    attn_implementation: str | None = "auto",
    probes: Probes | None = None,
) -> Plan:
    """Choose device, dtype, quantization and attention together."""
    probes = probes or Probes()
    chosen_device = select_device(device, probes=probes)
    chosen_dtype = select_dtype(chosen_device, dtype, probes=probes)
    quantization = select_quantization(load_in_4bit, load_in_8bit, probes=probes)
    attention, why = select_attention(
        chosen_device, chosen_dtype, attn_implementation, probes=probes
    )
    return Plan(
        device=chosen_device,
        dtype=chosen_dtype,
        attn_implementation=attention,
        quantization=quantization,
        reasons=(f"attention: {why}",),
    )


#: attention implementations continuous batching runs without switching the model's
#: own (it would switch an ``eager`` model to ``paged|eager`` for as long as it runs,
#: under any other generation sharing the model)
BATCHING_ATTENTION = ("sdpa", "flash_attention_2", "flash_attention_3")


@dataclass(frozen=True)
class Batching:
    """Whether replies of one model are batched, why, and the engine's sizes.

    ``tokens_per_reply``: the paged cache holds ``concurrency`` times this many
    tokens (prompt and answer); one reply alone may use all of it. A reply whose
    prompt and ``max_new_tokens`` exceed the whole cache runs on its own instead.
    ``step_tokens``: the most tokens one step computes (prefill goes in chunks of it).
    """

    enabled: bool
    reason: str
    page_size: int = 0
    tokens_per_reply: int = 0
    step_tokens: int = 0

    def cache_tokens(self, concurrency: int) -> int:
        """Tokens the paged cache holds for ``concurrency`` replies."""
        return self.tokens_per_reply * concurrency


def _torch_version() -> tuple[int, int]:
    import torch

    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    return major, minor


def select_batching(
    device: str,
    attention: str,
    quantization: str | None,
    concurrency: int,
    *,
    max_positions: int | None = None,
    torch_version: Callable[[], tuple[int, int]] = _torch_version,
) -> Batching:
    """Whether a model on ``device`` with ``attention`` and ``quantization`` runs
    ``concurrency`` replies together, and with which sizes; pure (tests pass any
    device without having it)."""
    if concurrency <= 1:
        return Batching(False, "concurrency=1: one reply at a time")
    if quantization is not None:
        return Batching(False, f"{quantization} bitsandbytes-quantized models take turns "
                               "(transformers' continuous batching is not run on bitsandbytes "
                               "layers)")
    if attention not in BATCHING_ATTENTION:
        return Batching(False, f"{attention} attention takes turns (continuous batching runs "
                               f"{', '.join(BATCHING_ATTENTION)}; it would switch the shared "
                               f"model's attention while it runs)")
    kind = device.split(":")[0]
    if kind == "cuda":
        page, per_reply, step = 256, 8192, 2048
    elif kind == "cpu":
        page, per_reply, step = 64, 1024, 256
    elif kind == "mps" and torch_version() >= (2, 14):
        page, per_reply, step = 128, 4096, 512
    else:
        why = ("continuous batching on MPS needs torch 2.14 or newer (slow and memory-hungry "
               "before)") if kind == "mps" else f"continuous batching is not run on {kind}"
        return Batching(False, f"{device}: replies take turns ({why})")
    if max_positions:
        per_reply = min(per_reply, max(page, max_positions))
    return Batching(True, f"up to {concurrency} replies together on {device} "
                          f"(continuous batching, {attention})",
                    page_size=page, tokens_per_reply=per_reply, step_tokens=step)
