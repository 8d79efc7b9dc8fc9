"""Loading options for real on the CPU: 4-bit bitsandbytes (it runs NF4 here), and what a
stop leaves behind.

bitsandbytes takes one of two paths for a 4-bit layer on the CPU. On a CPU with
AVX-512-BF16 (``bitsandbytes.functional.has_avx512bf16()``, read once per layer
into ``Linear4bit.support_avx512bf16_for_cpu`` when the layer is built), the
first forward pass repacks the weights for a fused kernel; that needs the
layer's input width in whole quantization blocks (64) and its output width in
multiples of 32. Elsewhere the weights stay as quantized and any width works.
No environment variable hides the packing path (the CPU is asked through
cpuid), so the tests choose the path by replacing the feature check that
``bitsandbytes.nn.modules`` imported: ``hidden`` runs on every CPU, ``active``
streams only where the CPU has the feature, and the clear error for a layer
that cannot be packed is checked on every CPU (it is raised before any kernel
runs).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from _model_fixtures import tiny_model, tiny_tokenizer
from _wait import wait_until

from nbstream import ReplyError, StreamView
from nbstream.sources import TransformersSource

# the local transformers source and its helpers (torch, transformers, tokenizers:
# tiny random-weight models): not in `make test-fast`
pytestmark = pytest.mark.transformers

HAS_BNB = importlib.util.find_spec("bitsandbytes") is not None
needs_bnb = pytest.mark.skipif(not HAS_BNB, reason="bitsandbytes is not installed")


def cpu_packs() -> bool:
    """Whether bitsandbytes packs 4-bit weights on this CPU (AVX-512-BF16)."""
    from bitsandbytes.functional import has_avx512bf16

    return bool(has_avx512bf16())


def save_tiny(where: Path, width: int = 64) -> Path:
    tiny_model(width=width).save_pretrained(where)
    tiny_tokenizer().save_pretrained(where)
    return where


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A tiny model of width 64, one folder per test (so no loaded model is shared)."""
    return save_tiny(tmp_path / "tiny-llama")


def choose_packing(monkeypatch: pytest.MonkeyPatch, packs: bool) -> None:
    """Make the 4-bit layers built from now on take (or skip) the CPU packing path."""
    import bitsandbytes.nn.modules as bnb_modules

    monkeypatch.setattr(bnb_modules, "has_avx512bf16", lambda: packs)


def linears_4bit(model: Any) -> list[Any]:
    import bitsandbytes as bnb

    return [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]


@needs_bnb
@pytest.mark.parametrize("path", ["active", "hidden"])
def test_load_in_4bit_quantizes_the_linear_layers_and_streams(
    folder: Path, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path == "active" and not cpu_packs():
        pytest.skip("this CPU has no AVX-512-BF16: bitsandbytes never packs here")
    choose_packing(monkeypatch, path == "active")
    src = TransformersSource(str(folder), device="cpu", load_in_4bit=True, max_new_tokens=8,
                             min_new_tokens=8)
    view = StreamView(src, "Hello")
    view.wait(120)
    assert view.status == "done", view.reply.reason
    model = src.model
    linears = linears_4bit(model)
    assert linears, "no layer was quantized"
    assert model.config.quantization_config.load_in_4bit
    # the path the test chose is the one bitsandbytes took
    packed = [bool(getattr(m.weight.quant_state, "packing_format_for_cpu", False))
              for m in linears]
    assert packed == [path == "active"] * len(linears)
    assert view.stats["tokens"] == 8
    # the pieces are exactly the decoded generated ids (an incomplete last character of
    # random weights' output is dropped, not shown as U+FFFD: see nbstream.sources.transformers.detok)
    tok = src.tokenizer
    assert view.text == tok.decode(src.last_token_ids, skip_special_tokens=True).rstrip("\ufffd")


@needs_bnb
def test_a_layer_that_cannot_be_packed_is_named_in_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # width 32: every attention projection has 32 inputs, half a block of 64
    narrow = save_tiny(tmp_path / "narrow", width=32)
    choose_packing(monkeypatch, True)
    src = TransformersSource(str(narrow), device="cpu", load_in_4bit=True, max_new_tokens=4)
    with pytest.raises(ValueError) as info:
        src.prepare()
    message = str(info.value)
    assert "model.layers.0.self_attn.q_proj" in message
    assert "blocks of 64" in message and "32 inputs" in message
    assert "shape" not in message  # not bitsandbytes' reshape error
    # through a view, the reply fails with the same words instead of a reshape error
    view = StreamView(TransformersSource(str(narrow), device="cpu", load_in_4bit=True,
                                         max_new_tokens=4), "Hello")
    with pytest.raises(ReplyError, match="blocks of 64"):
        view.wait(120)
    assert view.status == "error"


@needs_bnb
def test_a_narrow_layer_streams_where_nothing_is_packed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    narrow = save_tiny(tmp_path / "narrow", width=32)
    choose_packing(monkeypatch, False)
    src = TransformersSource(str(narrow), device="cpu", load_in_4bit=True, max_new_tokens=4,
                             min_new_tokens=4)
    view = StreamView(src, "Hello")
    view.wait(120)
    assert view.status == "done", view.reply.reason
    assert view.stats["tokens"] == 4
    assert linears_4bit(src.model)


@needs_bnb
@pytest.mark.model
def test_the_embedded_model_in_4_bit_answers_on_the_cpu() -> None:
    src = TransformersSource(device="cpu", load_in_4bit=True, max_new_tokens=24)
    view = StreamView(src, "What is the capital of France? Answer in one word.")
    view.wait(300)
    assert view.status == "done", view.reply.reason
    assert linears_4bit(src.model), "no layer was quantized"
    assert "paris" in view.text.lower(), view.text


def test_4bit_without_bitsandbytes_names_the_package(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a None entry in sys.modules is how Python spells "not installed":
    # find_spec() answers None and import raises ImportError
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)
    src = TransformersSource(str(folder), device="cpu", load_in_4bit=True)
    with pytest.raises(ImportError, match="pip install bitsandbytes") as info:
        src.prepare()
    assert info.value.name == "bitsandbytes"
    assert "load_in_4bit" in str(info.value)


@needs_bnb
def test_4bit_and_unquantized_sources_do_not_share_a_model(folder: Path) -> None:
    plain = TransformersSource(str(folder), device="cpu")
    quant = TransformersSource(str(folder), device="cpu", load_in_4bit=True)
    assert plain.lane_key() != quant.lane_key()


def test_a_stopped_generation_leaves_no_cache_or_tensors_behind(folder: Path) -> None:
    """Stop releases the model's working memory (KV cache) back to the allocator."""
    import gc

    from transformers.cache_utils import Cache

    src = TransformersSource(str(folder), device="cpu", max_new_tokens=400, min_new_tokens=400)
    src.prepare()

    def caches() -> int:
        import warnings

        gc.collect()
        with warnings.catch_warnings():  # isinstance() on every object pokes torch's shims
            warnings.simplefilter("ignore", FutureWarning)
            return sum(1 for o in gc.get_objects() if isinstance(o, Cache))

    before = caches()
    for _ in range(3):
        view = StreamView(src, "Hello")
        wait_until(lambda: view.text or view.reply.done, 60, "the first piece")
        view.stop()
        view.wait(30)
        assert view.status == "stopped"
        view.close()
        # the worker unwinds generate() after the stop; then its cache is garbage
        wait_until(lambda: caches() == before, 30, "the stopped reply's KV cache released")
