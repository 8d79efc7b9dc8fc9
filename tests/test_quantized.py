"""Loading options for real on the CPU: 4-bit bitsandbytes (it runs NF4 here), and what a
stop leaves behind."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from _model_fixtures import tiny_model, tiny_tokenizer

from nbstream import StreamView
from nbstream.sources import TransformersSource

needs_bnb = pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None,
                               reason="bitsandbytes is not installed")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("tiny-llama")
    tiny_model().save_pretrained(where)
    tiny_tokenizer().save_pretrained(where)
    return where


@needs_bnb
def test_load_in_4bit_quantizes_the_linear_layers_and_streams(folder: Path) -> None:
    import bitsandbytes as bnb

    src = TransformersSource(str(folder), device="cpu", load_in_4bit=True, max_new_tokens=8,
                             min_new_tokens=8)
    view = StreamView(src, "Hello")
    view.wait(120)
    assert view.status == "done", view.reply.reason
    model = src.model
    linears = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert linears, "no layer was quantized"
    assert model.config.quantization_config.load_in_4bit
    assert view.stats["tokens"] == 8
    # the pieces are exactly the decoded generated ids (an incomplete last character of
    # random weights' output is dropped, not shown as U+FFFD: see nbstream.detok)
    tok = src.tokenizer
    assert view.text == tok.decode(src.last_token_ids, skip_special_tokens=True).rstrip("\ufffd")


@needs_bnb
def test_4bit_and_unquantized_sources_do_not_share_a_model(folder: Path) -> None:
    plain = TransformersSource(str(folder), device="cpu")
    quant = TransformersSource(str(folder), device="cpu", load_in_4bit=True)
    assert plain.lane_key() != quant.lane_key()


def test_a_stopped_generation_leaves_no_cache_or_tensors_behind(folder: Path) -> None:
    """Stop releases the model's working memory (KV cache) back to the allocator."""
    import gc
    import time

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
        while not view.text and not view.reply.done:
            time.sleep(0.01)
        view.stop()
        view.wait(30)
        assert view.status == "stopped"
        view.close()
    time.sleep(0.2)  # the worker unwinds generate() after the stop
    assert caches() == before
