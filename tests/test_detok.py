"""Incremental detokenization: never a split character, never a lost or repeated one.

Both engines (``DecodeStream`` in Rust, the window decoder in Python) run on the
real SmolLM2 tokenizer (byte-level BPE, the embedded default), on a tiny
byte-level BPE trained in memory and on a Llama-2-style tokenizer (Metaspace +
byte fallback, whose decoder strips the leading space), with fixed texts and
hypothesis-generated strings and id sequences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from _model_fixtures import tiny_tokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbstream.sources.transformers import detok
from nbstream.sources.transformers.detok import REPLACEMENT, IncrementalDecoder, decode_pieces

# the local transformers source and its helpers (torch, transformers, tokenizers:
# tiny random-weight models): not in `make test-fast`
pytestmark = pytest.mark.transformers

ENGINES = ("rust", "python")

TEXTS = {
    "english": "Hello, world! Streaming tokens into a notebook.",
    "chinese": "我们正在测试中文文本的流式输出。",
    "japanese": "日本語のテキストをストリーミングします。カタカナとひらがな。",
    "korean": "한국어 텍스트를 스트리밍합니다. 안녕하세요!",
    "emoji": "😀🎉🚀👍🏽",
    "zwj": "👨‍👩‍👧‍👦 and 🏳️‍🌈 and 👩🏾‍💻",
    "flags": "🇯🇵🇰🇷🇨🇳🇫🇷",
    "mixed": "Café ñandú — 東京 (Tōkyō) 서울 🍣 ∑x² ≠ ∞; naïve résumé",
    "combining": "e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937",
    "newlines": "line one\n\n```python\nprint('日本')\n```\n\ttab",
}


# -- tokenizers -----------------------------------------------------------------


@pytest.fixture(scope="module")
def smol() -> Any:
    """The SmolLM2 tokenizer: from the converted folder when there is one, else the GGUF."""
    from transformers import AutoTokenizer

    from nbstream.sources.transformers import default_model

    try:
        gguf = default_model.gguf_path()
    except default_model.DefaultModelMissing as exc:
        pytest.skip(str(exc))
    folder = default_model.converted_path(gguf)
    if default_model.is_converted(folder):
        return AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)


def llama2_style_tokenizer() -> Any:
    """Metaspace pre-tokenizer, byte fallback, decoder that strips one leading space."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = len(vocab)
    pieces = ["▁", *"abcdefghijklmnopqrstuvwxyzHTW,.!?", "é", "日", "本"]
    pieces += ["▁t", "▁th", "▁the", "he", "▁a", "▁w", "or", "ld", "▁日本"]
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    merges = [("▁", "t"), ("▁t", "h"), ("▁th", "e"), ("h", "e"), ("▁", "a"), ("▁", "w")]
    merges += [("o", "r"), ("l", "d"), ("日", "本")]
    merges = [m for m in merges if "".join(m) in vocab]
    model = models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>")
    backend = Tokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    backend.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


@pytest.fixture(scope="module")
def llama2() -> Any:
    return llama2_style_tokenizer()


class SlowOnly:
    """A tokenizer with ``decode`` and nothing else: a slow (pure Python) one."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.windows: list[int] = []

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        self.windows.append(len(ids))
        return str(self.inner.decode(list(ids), skip_special_tokens=skip_special_tokens))


# -- helpers --------------------------------------------------------------------


def encode(tok: Any, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False))


def full(tok: Any, ids: Sequence[int]) -> str:
    return str(tok.decode(list(ids), skip_special_tokens=True))


def stream(tok: Any, ids: Sequence[int], engine: str) -> tuple[list[str | None], str]:
    """Per-token step results, and the flushed rest."""
    decoder = IncrementalDecoder(tok, engine=engine)  # type: ignore[arg-type]
    steps = [decoder.step(i) for i in ids]
    return steps, decoder.flush()


def check_guarantees(tok: Any, ids: Sequence[int], engine: str) -> None:
    """The documented guarantees, for one id sequence."""
    whole = full(tok, ids)
    steps, rest = stream(tok, ids, engine)
    pieces = [p for p in steps if p is not None]
    # 1. nothing lost, nothing repeated (an incomplete last character is dropped)
    assert "".join(pieces) + rest == whole.rstrip(REPLACEMENT)
    # 2. U+FFFD only where the full decode has one
    if REPLACEMENT not in whole:
        assert all(REPLACEMENT not in p for p in [*pieces, rest])
    # 3. no piece is taken back: the text so far is always a prefix of the whole
    shown = ""
    for k, step in enumerate(steps, start=1):
        if step is not None:
            shown += step
        assert whole.startswith(shown)
        # 4. streamed as soon as complete: when the first k ids decode to whole
        #    characters, all of that text has been emitted
        upto = full(tok, ids[:k])
        if not upto.endswith(REPLACEMENT):
            assert shown == upto, (k, shown, upto)


# -- the real SmolLM2 tokenizer -----------------------------------------------------


def test_auto_uses_decode_stream_on_smollm2(smol: Any) -> None:
    assert detok.rust_available(smol)
    assert IncrementalDecoder(smol).engine == "rust"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_smollm2_texts(smol: Any, engine: str, name: str) -> None:
    check_guarantees(smol, encode(smol, TEXTS[name]), engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_multibyte_characters_stream_without_waiting_for_a_space(smol: Any, engine: str) -> None:
    # Byte-level BPE splits these over several tokens each; every character must
    # come out with the token that completes it, with no space anywhere.
    for text in ("日本語", "한국어", "你好世界", "😀😀😀", "👨‍👩‍👧"):
        ids = encode(smol, text)
        assert len(ids) > len(text) / 2  # really split into byte tokens
        steps, rest = stream(smol, ids, engine)
        pieces = [p for p in steps if p]
        assert "".join(pieces) == text and rest == ""
        assert len(pieces) >= len(text.replace("\u200d", "")) // 2
        assert steps[-1] is not None  # the last character is out at its last token


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["japanese", "zwj", "mixed", "korean"])
def test_cut_inside_a_character_emits_nothing_broken(smol: Any, engine: str, name: str) -> None:
    ids = encode(smol, TEXTS[name])
    cuts_inside = 0
    for k in range(1, len(ids) + 1):
        prefix = ids[:k]
        cuts_inside += full(smol, prefix).endswith(REPLACEMENT)
        steps, rest = stream(smol, prefix, engine)
        out = [p for p in steps if p] + [rest]
        assert all(REPLACEMENT not in p for p in out)
        assert "".join(out) == full(smol, prefix).rstrip(REPLACEMENT)
    assert cuts_inside > 0  # the text really had cuts inside characters


@pytest.mark.parametrize("engine", ENGINES)
def test_special_tokens_are_skipped(smol: Any, engine: str) -> None:
    ids = [smol.convert_tokens_to_ids("<|im_start|>"), *encode(smol, "hi 日本")]
    ids.append(smol.convert_tokens_to_ids("<|im_end|>"))
    check_guarantees(smol, ids, engine)
    assert "".join(decode_pieces(smol, ids, engine=engine)) == "hi 日本"  # type: ignore[arg-type]


def test_decoder_is_reusable_after_flush(smol: Any) -> None:
    decoder = IncrementalDecoder(smol)
    for text in ("first 日本", "second 😀"):
        out = [decoder.step(i) for i in encode(smol, text)]
        assert "".join(p for p in out if p) + decoder.flush() == text


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=40))
def test_smollm2_any_text(smol: Any, text: str) -> None:
    ids = encode(smol, text)
    for engine in ENGINES:
        check_guarantees(smol, ids, engine)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_smollm2_any_ids(smol: Any, data: st.DataObject) -> None:
    # Random ids: invalid byte sequences, lone continuation bytes, specials.
    size = len(smol)
    ids = data.draw(
        st.lists(
            st.one_of(
                st.integers(0, size - 1),
                # the single-byte tokens, where broken characters come from
                st.sampled_from([smol.convert_tokens_to_ids(chr(c)) for c in range(0x100, 0x144)]),
            ),
            max_size=30,
        )
    )
    ids = [i for i in ids if isinstance(i, int) and i >= 0]
    for engine in ENGINES:
        check_guarantees(smol, ids, engine)


# -- other tokenizer families -------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_tiny_byte_level_texts(engine: str, name: str) -> None:
    tok = tiny_tokenizer()
    check_guarantees(tok, encode(tok, TEXTS[name]), engine)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("text", ["the world", " the 日本 and 東京 😀", "Hello, wé!", "a  b   c"])
def test_llama2_style_leading_space_and_byte_fallback(llama2: Any, engine: str, text: str) -> None:
    ids = encode(llama2, text)
    check_guarantees(llama2, ids, engine)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(alphabet=st.sampled_from(list("the world 日本東京😀é,\u200d")), max_size=30))
def test_llama2_style_any_text(llama2: Any, text: str) -> None:
    ids = encode(llama2, text)
    for engine in ENGINES:
        check_guarantees(llama2, ids, engine)


# -- engine choice and fallbacks ------------------------------------------------------


def test_python_engine_for_a_slow_tokenizer(smol: Any) -> None:
    slow = SlowOnly(smol)
    decoder = IncrementalDecoder(slow)
    assert decoder.engine == "python"
    with pytest.raises(ValueError, match="fast tokenizer"):
        IncrementalDecoder(slow, engine="rust")
    check_guarantees(slow, encode(smol, TEXTS["mixed"]), "python")


def test_python_window_stays_small(smol: Any) -> None:
    # Never re-decodes the whole sequence: each decode sees a handful of ids.
    slow = SlowOnly(smol)
    text = (TEXTS["japanese"] + TEXTS["english"] + TEXTS["zwj"]) * 20
    ids = encode(smol, text)
    assert len(ids) > 1000
    assert "".join(decode_pieces(slow, ids)) == text
    assert max(slow.windows) <= 16
    assert len(slow.windows) <= 2 * len(ids) + 2


def test_python_engine_when_decode_stream_is_missing(
    smol: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(detok, "_new_decode_stream", lambda skip: None)
    assert not detok.rust_available(smol)
    decoder = IncrementalDecoder(smol)
    assert decoder.engine == "python"
    with pytest.raises(ValueError, match="DecodeStream"):
        IncrementalDecoder(smol, engine="rust")
    check_guarantees(smol, encode(smol, TEXTS["korean"]), "auto")


def test_python_engine_when_decode_cleans_up_spaces(
    smol: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tokenizer.decode would rewrite " ." to "." after the Rust decoder:
    # DecodeStream cannot match it, the window decoder uses decode itself.
    monkeypatch.setattr(smol, "clean_up_tokenization_spaces", True, raising=False)
    decoder = IncrementalDecoder(smol)
    assert decoder.engine == "python"
    text = "Hello , world . It 's fine ! 日本 ."
    ids = encode(smol, text)
    assert "".join(decode_pieces(smol, ids)) == full(smol, ids)


class FlakyStream:
    """A DecodeStream that works for a while, then rejects a step."""

    def __init__(self, real: Any, fail_at: int) -> None:
        self.real = real
        self.calls = 0
        self.fail_at = fail_at

    def step(self, tokenizer: Any, token_id: int) -> str | None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise Exception("Invalid prefix encountered")
        return self.real.step(tokenizer, token_id)  # type: ignore[no-any-return]


@pytest.mark.parametrize("fail_at", [1, 2, 5, 9, 20])
def test_rust_failure_midway_continues_in_python(smol: Any, fail_at: int) -> None:
    ids = encode(smol, TEXTS["mixed"])
    decoder = IncrementalDecoder(smol, engine="rust")
    decoder._stream = FlakyStream(decoder._stream, fail_at)
    out = [decoder.step(i) for i in ids]
    assert decoder.engine == "python"
    assert "".join(p for p in out if p) + decoder.flush() == TEXTS["mixed"]


def test_decode_pieces_keeps_specials_when_asked(smol: Any) -> None:
    ids = [smol.convert_tokens_to_ids("<|im_start|>"), *encode(smol, "hi")]
    assert "".join(decode_pieces(smol, ids, skip_special_tokens=False)) == "<|im_start|>hi"


def test_accepts_a_raw_tokenizers_tokenizer(smol: Any) -> None:
    raw = smol.backend_tokenizer
    decoder = IncrementalDecoder(raw)
    assert decoder.engine == "rust"
    ids = raw.encode("raw 日本 😀", add_special_tokens=False).ids
    steps: Callable[[int], str | None] = decoder.step
    assert "".join(p for p in map(steps, ids) if p) + decoder.flush() == "raw 日本 😀"
