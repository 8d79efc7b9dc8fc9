"""4-bit loading through bitsandbytes, for real, on this CPU (bitsandbytes runs NF4 here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from _model_fixtures import tiny_model, tiny_tokenizer

from nbstream import StreamView
from nbstream.sources import TransformersSource

pytestmark = pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None,
                                reason="bitsandbytes is not installed")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("tiny-llama")
    tiny_model().save_pretrained(where)
    tiny_tokenizer().save_pretrained(where)
    return where


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


def test_4bit_and_unquantized_sources_do_not_share_a_model(folder: Path) -> None:
    plain = TransformersSource(str(folder), device="cpu")
    quant = TransformersSource(str(folder), device="cpu", load_in_4bit=True)
    assert plain.lane_key() != quant.lane_key()
