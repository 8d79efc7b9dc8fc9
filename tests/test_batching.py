"""Several replies of one local model at once (nbstream.sources.transformers.batching).

Most tests run a random-weight two-layer Llama (tests/_model_fixtures.py) whose
replies go through transformers' continuous batching; ``model`` tests run the
embedded SmolLM2-135M-Instruct. Order of events, counts and token ids are
asserted, never durations: where two replies must be seen streaming at the same
time, one of them waits (up to a generous bound) for the other's first piece,
which can only come while it runs if both run at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import pytest
from _model_fixtures import tiny_model, tiny_tokenizer
from _wait import wait_until

from nbstream.core import lanes
from nbstream.core.pieces import ToolCallDelta
from nbstream.sources.base import ChatMessage, ToolSchema
from nbstream.sources.transformers import TransformersSource, batching, devices
from nbstream.sources.transformers.batching import BatchError

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.transformers


def ask(i: int) -> list[ChatMessage]:
    return [{"role": "user", "content": f"Question number {i}: hello there"}]


def peaked_model() -> Any:
    """The tiny random model with its output layer scaled up: random weights give
    nearly equal logits, whose argmax a batched step's rounding may flip; scaled,
    greedy decoding has one clear answer per step, as a trained model has."""
    m = tiny_model()
    with torch.no_grad():
        m.lm_head.weight.mul_(30)
    return m


class OneAtATime:
    """Wraps a model's decoder so that two threads inside it at once are noted: the
    rule that keeps transformers' ``config.is_causal`` juggling safe."""

    def __init__(self, model: Any) -> None:
        self.overlaps: list[tuple[str, str]] = []
        self._inside: str | None = None
        self._lock = threading.Lock()
        real = model.model.forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            me = threading.current_thread().name
            with self._lock:
                if self._inside is not None:
                    self.overlaps.append((self._inside, me))
                outer, self._inside = self._inside, me
            try:
                return real(*args, **kwargs)
            finally:
                with self._lock:
                    self._inside = outer

        model.model.forward = forward


@pytest.fixture
def model() -> Iterator[Any]:
    """A fresh tiny model per test (its engine, made by the first batched reply,
    goes with it); the engine is closed at the end so no thread outlives the test.
    Every test also checks that no two threads computed with the model at once."""
    m = peaked_model()
    watch = OneAtATime(m)
    holder = TransformersSource(m, tiny_tokenizer(), concurrency=4)
    holder.prepare()
    yield m
    loaded = holder._loaded
    if loaded is not None and loaded.engine is not None:
        loaded.engine.close()
    assert watch.overlaps == [], watch.overlaps[:3]
    assert getattr(m.config, "is_causal", True) is not False


def source(model: Any, **kwargs: Any) -> TransformersSource:
    kwargs.setdefault("max_new_tokens", 24)
    kwargs.setdefault("concurrency", 4)
    s = TransformersSource(model, tiny_tokenizer(), **kwargs)
    s.prepare()
    return s


def engine_of(s: TransformersSource) -> batching.Engine:
    assert s._loaded is not None and s._loaded.engine is not None
    return s._loaded.engine


class Run:
    """One reply on its own thread, as a lane worker runs it; records its pieces.

    Started with :func:`together`, a reply waits at its first piece (60 s at most)
    until every reply of its group has asked the model: a reply alone runs
    ``generate()`` and goes into the batch when another asks, so this is what makes
    the group's replies overlap (as two chats asked a second apart do).
    """

    def __init__(self, src: TransformersSource, messages: list[ChatMessage],
                 on_piece: Callable[[Run, str], None] | None = None,
                 options: dict[str, Any] | None = None,
                 tools: Sequence[ToolSchema] = ()) -> None:
        self.source = src
        self.tools = tools
        self.pieces: list[str] = []
        self.cancel = threading.Event()
        self.outcome: Any = None
        self.error: BaseException | None = None
        self.ids: list[int] = []
        self.first = threading.Event()
        self.asked = threading.Event()
        self.ended = threading.Event()
        self.group: tuple[Run, ...] = ()
        self._on_piece = on_piece
        self.thread = threading.Thread(target=self._run, args=(messages, options or {}),
                                       daemon=True)

    def _emit(self, piece: str) -> None:
        self.pieces.append(piece)
        self.first.set()
        if len(self.pieces) == 1:
            for other in self.group:
                other.asked.wait(60)
        if self._on_piece is not None:
            self._on_piece(self, piece)

    def _run(self, messages: list[ChatMessage], options: dict[str, Any]) -> None:
        self.asked.set()
        try:
            self.outcome = self.source.generate_with(messages, self._emit, self.cancel,
                                                     options,  # type: ignore[arg-type]
                                                     self.tools)
        except BaseException as exc:
            self.error = exc
        finally:
            self.ids = list(self.source.last_token_ids)
            self.ended.set()

    def start(self) -> Run:
        self.thread.start()
        return self

    def join(self) -> Run:
        self.thread.join(120)
        assert not self.thread.is_alive(), "the reply did not end"
        return self


def together(*runs: Run) -> tuple[Run, ...]:
    """Start ``runs`` as one group (see :class:`Run`)."""
    for r in runs:
        r.group = runs
    for r in runs:
        r.start()
    return runs


def alone(model: Any, messages: list[ChatMessage], **kwargs: Any) -> Run:
    """The same request through the model's own generate() (concurrency=1)."""
    return Run(source(model, concurrency=1, **kwargs), messages).start().join()


# -- batched replies each complete, in order --------------------------------------


def test_batched_replies_equal_the_same_requests_alone(model: Any) -> None:
    runs = together(*(Run(source(model), ask(i)) for i in range(4)))
    for r in runs:
        r.join()
        assert r.error is None, r.error
    engine = engine_of(runs[0].source)
    assert engine.starts == 1  # one manager ran all four
    for i, r in enumerate(runs):
        ref = alone(model, ask(i))
        assert r.ids == ref.ids and len(r.ids) == 24  # greedy: the same tokens
        assert "".join(r.pieces) == "".join(ref.pieces)  # the same text, pieces in order
        assert r.outcome.finish_reason == ref.outcome.finish_reason == "length"
        assert r.outcome.usage == ref.outcome.usage
        assert r.outcome.figures["tokens"] == 24
        assert r.outcome.figures["first_token_seconds"] is not None


def test_replies_stream_at_the_same_time(model: Any) -> None:
    """The first reply, after its first piece, waits until the second has asked; when
    the second's first piece comes, the first must still be running (with text):
    taking turns, the second would start only after the first ended."""
    seen: list[tuple[int, bool]] = []

    def note(run: Run, piece: str) -> None:
        if len(run.pieces) == 1:
            seen.append((len(a.pieces), a.ended.is_set()))

    a = Run(source(model, max_new_tokens=60), ask(0))
    b = Run(source(model, max_new_tokens=60), ask(1), note)
    a.group = (b,)  # a waits at its first piece until b has asked
    a.start()
    a.first.wait(60)
    b.start()
    a.join()
    b.join()
    assert a.error is None and b.error is None
    assert len(seen) == 1
    shown, ended = seen[0]
    assert shown >= 1 and not ended
    assert len(a.ids) == len(b.ids) == 60
    assert a.ids == alone(model, ask(0), max_new_tokens=60).ids  # it moved into the batch
    assert b.ids == alone(model, ask(1), max_new_tokens=60).ids
    assert engine_of(a.source).starts == 1


def test_a_reply_alone_runs_generate_and_no_engine(model: Any) -> None:
    """Nothing is paid for batching while a reply is alone: model.generate runs it."""
    calls: list[int] = []
    real = model.generate
    model.generate = lambda *a, **k: (calls.append(1), real(*a, **k))[1]
    try:
        r = Run(source(model), ask(0)).start().join()
    finally:
        model.generate = real
    assert r.error is None and calls == [1] and r.ids == alone(model, ask(0)).ids
    engine = engine_of(r.source)
    assert engine.starts == 0 and engine.running() == {}


def test_stop_of_one_leaves_the_others_running(model: Any) -> None:
    stop_at = 3

    def stopper(run: Run, piece: str) -> None:
        if len(run.pieces) == stop_at:
            run.cancel.set()

    runs = together(Run(source(model, max_new_tokens=120), ask(0)),
                    Run(source(model, max_new_tokens=120), ask(1), stopper),
                    Run(source(model, max_new_tokens=120), ask(2)))
    stopped = runs[1].join()
    assert stopped.outcome.finish_reason == "cancelled"
    assert len(stopped.pieces) == stop_at  # nothing emitted after the stop
    # its request leaves the batch at the next step; the others go on to their end
    engine = engine_of(stopped.source)
    for r in (runs[0], runs[2]):
        r.join()
        assert r.error is None, r.error
        assert r.outcome.finish_reason == "length" and len(r.ids) == 120
        assert r.ids == alone(model, ask(runs.index(r)), max_new_tokens=120).ids
    wait_until(lambda: sum(engine.running().values()) == 0, 30)


def test_stop_before_the_first_token_and_before_asking(model: Any) -> None:
    r = Run(source(model), ask(0))
    r.cancel.set()
    r.start().join()
    assert r.outcome.finish_reason == "cancelled" and r.pieces == [] and r.ids == []


def test_an_error_in_one_reply_fails_that_reply_only(model: Any) -> None:
    def broken(run: Run, piece: str) -> None:
        if len(run.pieces) == 2:
            raise RuntimeError("the view went away")

    bad, good = together(Run(source(model, max_new_tokens=80), ask(0), broken),
                         Run(source(model, max_new_tokens=80), ask(1)))
    bad.join()
    good.join()
    assert isinstance(bad.error, RuntimeError) and "went away" in str(bad.error)
    assert good.error is None and len(good.ids) == 80
    engine = engine_of(good.source)
    wait_until(lambda: sum(engine.running().values()) == 0, 30)


def test_per_reply_options_in_one_batch(model: Any) -> None:
    """max_new_tokens and stop strings per reply; a sampled reply beside greedy ones."""
    ref = alone(model, ask(0), max_new_tokens=40)
    text = "".join(ref.pieces)
    stop = text[12:15]
    assert stop and text.count(stop) >= 1
    ref_stop = alone(model, ask(0), max_new_tokens=40, stop_strings=[stop])
    assert ref_stop.outcome.finish_reason == "stop" and len(ref_stop.ids) < 40
    runs = together(
        Run(source(model, max_new_tokens=40), ask(0), options={"stop": [stop]}),
        Run(source(model, max_new_tokens=40), ask(1), options={"max_new_tokens": 7}),
        Run(source(model, max_new_tokens=40), ask(2), options={"temperature": 0.9, "top_p": 0.8}),
        Run(source(model, max_new_tokens=40), ask(3)),
    )
    for r in runs:
        r.join()
        assert r.error is None, r.error
    assert runs[0].ids == ref_stop.ids and runs[0].outcome.finish_reason == "stop"
    assert "".join(runs[0].pieces) == "".join(ref_stop.pieces)
    assert len(runs[1].ids) == 7 and runs[1].outcome.finish_reason == "length"
    assert runs[1].ids == ref.ids[:7]
    assert runs[3].ids == alone(model, ask(3), max_new_tokens=40).ids
    assert 0 < len(runs[2].ids) <= 40
    # the sampled reply made the engine mixed: greedy replies sample from their argmax
    assert engine_of(runs[0].source).mixed_starts == 1


def test_sampled_replies_really_sample(model: Any) -> None:
    s = source(model, max_new_tokens=16, temperature=1.0)
    outs = {tuple(Run(s, ask(0)).start().join().ids) for _ in range(4)}
    assert len(outs) > 1


def test_settings_per_reply() -> None:
    from transformers import GenerationConfig

    config = GenerationConfig(eos_token_id=[2, 7], pad_token_id=2)
    greedy = batching.settings_for(config, {"max_new_tokens": 9, "do_sample": False}, 5)
    assert greedy == batching.Settings(9, (2, 7))
    sampled = batching.settings_for(config, {"max_new_tokens": 9, "do_sample": True,
                                             "temperature": 0.7, "top_p": 0.9}, 5)
    # generate()'s own defaults where neither the model nor the call says (top_k 50)
    assert sampled == batching.Settings(9, (2, 7), True, 0.7, 50, 0.9)
    assert batching.refusal(config, {"max_new_tokens": 9, "temperature": 0.5,
                                     "do_sample": True, "top_k": 5}) is None
    for key, value in (("repetition_penalty", 1.3), ("min_new_tokens", 4),
                       ("no_repeat_ngram_size", 3), ("stopping_criteria", [object()]),
                       ("logits_processor", [object()])):
        why = batching.refusal(config, {"max_new_tokens": 9, key: value})
        assert why is not None and key in why
        assert key in (batching.named_refusal({key: value}) or "")
    # a setting equal to generate()'s default changes nothing
    assert batching.refusal(config, {"max_new_tokens": 9, "repetition_penalty": 1.0}) is None
    assert batching.named_refusal({"repetition_penalty": 1.0, "min_new_tokens": 0}) is None
    # the model's own generation config counts too
    penalized = GenerationConfig(eos_token_id=2, repetition_penalty=1.1)
    assert "repetition_penalty" in (batching.refusal(penalized, {"max_new_tokens": 9}) or "")


# -- tools and other inputs --------------------------------------------------------------


#: what the tool model below writes at every step, one added token: a whole Hermes call
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'


def tool_model() -> tuple[Any, Any]:
    """A random Llama that writes :data:`CALL` at every step (its output layer gives
    that token alone a score), with a Hermes chat template that takes tools: random
    weights write no calls, and a logits processor would keep a reply out of the batch."""
    import copy

    from test_transformers_tools import HERMES, model, tokenizer

    m = copy.deepcopy(model())
    tok = tokenizer(HERMES, added=(CALL,))
    call = tok.convert_tokens_to_ids(CALL)
    head = torch.nn.Linear(m.lm_head.in_features, m.lm_head.out_features, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(-10.0)
        head.bias[call] = 10.0
    m.lm_head = head
    return m, tok


def test_tools_and_tool_choice_per_reply_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tools shape a reply's prompt (the template, a forced call's prefill) and the reading
    of its text, not the decoding: a batch takes replies with and without tools, each
    with its own tool_choice, and each reads as the same request alone."""
    from test_transformers_tools import TIME, WEATHER, answer, calls_of

    prompts: list[list[int]] = []  # what each reply handed the engine
    real_run = batching.Engine.run

    def run(self: batching.Engine, prompt: Sequence[int], *args: Any, **kwargs: Any) -> bool:
        prompts.append(list(prompt))
        return real_run(self, prompt, *args, **kwargs)

    monkeypatch.setattr(batching.Engine, "run", run)
    m, tok = tool_model()
    watch = OneAtATime(m)
    tools = [WEATHER, TIME]
    cases: list[tuple[dict[str, Any], Sequence[ToolSchema]]] = [
        ({}, tools),  # auto: the model's calls are read
        ({"tool_choice": "none"}, tools),  # no tools in the prompt, the text is text
        ({"tool_choice": {"type": "function", "function": {"name": "get_time"}}}, tools),
        ({}, ()),  # no tools at all
    ]

    def src(concurrency: int) -> TransformersSource:
        s = TransformersSource(m, tok, max_new_tokens=2, concurrency=concurrency)
        s.prepare()
        return s

    holder = src(4)
    try:
        runs = together(*(Run(src(4), ASK_WEATHER, options=o, tools=t) for o, t in cases))
        for r in runs:
            r.join()
            assert r.error is None, r.error
        engine = engine_of(holder)
        assert engine.starts == 1  # all four went through one batch
        refs = [Run(src(1), ASK_WEATHER, options=o, tools=t).start().join() for o, t in cases]
    finally:
        if holder._loaded is not None and holder._loaded.engine is not None:
            holder._loaded.engine.close()
    assert watch.overlaps == []

    def shape(r: Run) -> tuple[Any, ...]:
        calls = [(c["name"], c["arguments"]) for c in calls_of(r.pieces)]
        return (r.ids, answer(r.pieces), calls, r.outcome.finish_reason)

    for r, ref in zip(runs, refs, strict=True):
        assert shape(r) == shape(ref)
    auto, none, named, plain = runs
    # the engine got each reply's own prompt: tools in the template or not, the prefill
    texts = [tok.decode(p) for p in prompts[:4]]
    assert len(texts) == 4 and sum("Weather of a city" in t for t in texts) == 2
    assert sum(t.endswith('<tool_call>\n{"name": "get_time", "arguments": ') for t in texts) == 1
    oslo = [("get_weather", '{"city": "Oslo"}')] * 2
    assert [(c["name"], c["arguments"]) for c in calls_of(auto.pieces)] == oslo
    assert auto.outcome.finish_reason == "tool_calls" and answer(auto.pieces) == ""
    assert answer(none.pieces) == CALL * 2 and calls_of(none.pieces) == []
    first = named.pieces[0]
    assert isinstance(first, ToolCallDelta) and first.name == "get_time"  # its prefill
    assert answer(plain.pieces) == CALL * 2 and calls_of(plain.pieces) == []


ASK_WEATHER: list[ChatMessage] = [{"role": "user", "content": "What is the weather in Oslo?"}]


def test_a_reply_with_other_model_inputs_takes_turns(model: Any) -> None:
    """The engine takes token ids only: a reply whose inputs carry more (a vision model's
    pixel_values...) runs generate() on its own; all-zero token_type_ids change nothing."""
    ids = torch.tensor([[1, 2, 3]])
    assert batching.inputs_refusal({"input_ids": ids, "attention_mask": ids * 0 + 1}) is None
    assert batching.inputs_refusal({"input_ids": ids, "token_type_ids": ids * 0}) is None
    why = batching.inputs_refusal({"input_ids": ids, "pixel_values": torch.zeros(1, 3, 4, 4),
                                   "image_sizes": ids})
    assert why is not None and "image_sizes, pixel_values" in why and "takes turns" in why
    s = source(model)
    kwargs = s._generate_kwargs({})
    assert s._engine(kwargs, {"input_ids": ids, "attention_mask": ids}) is not None
    assert s._engine(kwargs, {"input_ids": ids, "pixel_values": torch.zeros(1, 3, 4, 4)}) \
        is None


def test_a_vision_model_takes_turns_and_says_why() -> None:
    """A source with a processor (a vision model) is not batched, with or without an
    image in the question: two replies asked at once run generate() one after the
    other (never inside the model together), the one with an image through its pixels."""
    import io

    from _model_fixtures import tiny_vision
    from PIL import Image

    from nbstream import ChatWidget, attach

    m, processor = tiny_vision()
    watch = OneAtATime(m)
    src = TransformersSource(m, processor=processor, max_new_tokens=12, concurrency=4)
    assert src.concurrency == 1 and "vision model" in src.batching  # known before loading
    calls: list[set[str]] = []
    real = m.generate

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(set(kwargs))
        return real(*args, **kwargs)

    m.generate = spy
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 30, 30)).save(buffer, format="PNG")
    a, b = ChatWidget(src), ChatWidget(src)
    try:
        ra = a.send("What color is this?", attachments=[attach(buffer.getvalue())])
        rb = b.send("Hello")
        ra.wait(120)
        rb.wait(120)
    finally:
        a.close()
        b.close()
    assert ra.status == rb.status == "done"
    assert len(calls) == 2 and sum("pixel_values" in c for c in calls) == 1
    assert watch.overlaps == []
    assert src._loaded is not None and src._loaded.engine is None  # never made


# -- the lane fallback ----------------------------------------------------------------


def test_a_setting_the_batch_does_not_apply_takes_turns_and_says_so(model: Any) -> None:
    s = source(model, repetition_penalty=1.3)
    assert s.concurrency == 1
    assert "take turns" in s.batching and "repetition_penalty" in s.batching
    # run from three threads at once: generate() calls never overlap, first come first served
    inside: list[int] = []
    most = [0]
    lock = threading.Lock()
    real = model.generate
    order: list[int] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        with lock:
            inside.append(1)
            most[0] = max(most[0], len(inside))
        try:
            return real(*args, **kwargs)
        finally:
            with lock:
                inside.pop()

    model.generate = spy
    try:
        runs = []
        for i in range(3):
            r = Run(s, ask(i), lambda run, p, i=i: order.append(i) if len(run.pieces) == 1
                    else None).start()
            r.first.wait(60) if i == 0 else None
            runs.append(r)
        for r in runs:
            r.join()
            assert r.error is None
    finally:
        model.generate = real
    assert most[0] == 1
    assert order[0] == 0 and sorted(order) == [0, 1, 2]
    assert s._loaded is not None and s._loaded.engine is None  # the engine was never made


def test_one_thread_computes_with_the_model_at_a_time(model: Any) -> None:
    """transformers 5 writes ``config.is_causal`` during each forward: two threads
    computing with one model at once could leave it False for good. A reply that runs
    on its own waits for the batched ones (and they for it), first come first served;
    afterwards the model answers as before."""
    before = alone(model, ask(3), max_new_tokens=30).ids
    order: list[str] = []
    solo = source(model, max_new_tokens=30, repetition_penalty=1.2)  # not batched
    batched = [Run(source(model, max_new_tokens=120), ask(i),
                   lambda run, p, i=i: order.append(f"batch{i}") if len(run.pieces) == 1
                   else None) for i in range(2)]
    for r in batched:
        r.start()
    wait_until(lambda: len(order) == 2, 60)
    lone = Run(solo, ask(2), lambda run, p: order.append("solo") if len(run.pieces) == 1
               else None).start()
    gate = solo._loaded.gate if solo._loaded else None
    assert gate is not None
    wait_until(lambda: gate.state()[2] == 1, 30)  # the solo reply waits its turn
    late = Run(source(model, max_new_tokens=10), ask(1),
               lambda run, p: order.append("late") if len(run.pieces) == 1 else None).start()
    wait_until(lambda: gate.state()[2] == 2, 30)  # and a later batched reply behind it
    for r in (*batched, lone, late):
        r.join()
        assert r.error is None, r.error
    assert order == ["batch0", "batch1", "solo", "late"] or \
        order == ["batch1", "batch0", "solo", "late"]
    assert getattr(model.config, "is_causal", True) is not False
    assert alone(model, ask(3), max_new_tokens=30).ids == before
    # greedy and sampled replies together, then the model alone: still the same
    mixed = [Run(source(model, max_new_tokens=30), ask(3)),
             Run(source(model, max_new_tokens=30, temperature=0.9), ask(2))]
    for r in mixed:
        r.start()
    for r in mixed:
        r.join()
        assert r.error is None
    assert mixed[0].ids == before
    assert alone(model, ask(3), max_new_tokens=30).ids == before


def test_gate_lets_batches_share_and_keeps_order() -> None:
    gate = batching.Gate()
    never = threading.Event()
    a = gate.enter("batch", never)
    b = gate.enter("batch", never)
    assert gate.state() == ("batch", 2, 0)
    got: list[str] = []
    solo = threading.Thread(target=lambda: (got.append("solo") if gate.enter("solo", never)
                                            else None), daemon=True)
    solo.start()
    wait_until(lambda: gate.state()[2] == 1, 10)
    later = threading.Thread(target=lambda: (got.append("batch") if gate.enter("batch", never)
                                             else None), daemon=True)
    later.start()
    wait_until(lambda: gate.state()[2] == 2, 10)
    assert got == []  # the solo waits for the batch; the later batch waits behind the solo
    gate.leave(a)
    gate.leave(b)
    wait_until(lambda: got == ["solo"], 10)
    assert gate.state() == ("solo", 1, 1)
    gate.leave(object())
    wait_until(lambda: got == ["solo", "batch"], 10)
    cancelled = threading.Event()
    cancelled.set()
    assert gate.enter("solo", cancelled) is None  # a stop while waiting: no turn
    assert gate.state() == ("batch", 1, 0)


def test_concurrency_one_is_the_previous_way(model: Any) -> None:
    s = source(model, concurrency=1)
    assert s.concurrency == 1 and "concurrency=1" in s.batching
    Run(s, ask(0)).start().join()
    assert s._loaded is not None and s._loaded.engine is None


def test_eager_attention_takes_turns() -> None:
    m = tiny_model()
    m.config._attn_implementation = "eager"
    s = source(m)
    assert s.concurrency == 1 and "eager" in s.batching
    r = Run(s, ask(0)).start().join()
    assert r.error is None and len(r.ids) == 24
    assert s._loaded is not None and s._loaded.engine is None


def test_quantized_and_other_settings_take_turns_before_loading(tmp_path: Any) -> None:
    (tmp_path / "config.json").write_text("{}")
    for kwargs, word in ((dict(load_in_4bit=True), "bitsandbytes"),
                         (dict(attn_implementation="eager"), "eager"),
                         (dict(cpu_threads=1), "cpu_threads"),
                         (dict(min_new_tokens=3), "min_new_tokens")):
        s = TransformersSource(str(tmp_path), concurrency=4, **kwargs)  # nothing loaded
        assert s.concurrency == 1 and word in s.batching, (kwargs, s.batching)
    s = TransformersSource(str(tmp_path), concurrency=3)
    assert s.concurrency == 3 and "decided when it is loaded" in s.batching


def test_a_reply_larger_than_the_cache_runs_alone(model: Any) -> None:
    s = source(model, max_new_tokens=8)
    Run(s, ask(0)).start().join()
    engine = engine_of(s)
    big = source(model, max_new_tokens=engine.capacity() + 1)
    assert big.concurrency == 4  # the source is batched; this one reply is too large
    real = model.generate
    calls: list[int] = []
    model.generate = lambda *a, **k: (calls.append(1), real(*a, **{**k, "max_new_tokens": 4}))[1]
    try:
        r = Run(big, ask(0)).start().join()
    finally:
        model.generate = real
    assert r.error is None and calls == [1] and len(r.ids) == 4


# -- the engine's own life ----------------------------------------------------------


def test_engine_failure_fails_its_replies_then_recovers(model: Any) -> None:
    """A step that raises ends the engine's thread: every reply it runs fails with a
    clear error; the next reply starts a new engine."""
    fail = threading.Event()
    real_forward = model.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        if fail.is_set():
            raise RuntimeError("out of memory (simulated)")
        return real_forward(*args, **kwargs)

    model.forward = forward
    runs = together(*(Run(source(model, max_new_tokens=400), ask(i)) for i in range(2)))
    holder = runs[0].source._loaded
    assert holder is not None
    engine = wait_until(lambda: holder.engine, 60)  # made by the first reply that asks
    # both in the batch, and a step went through for them
    wait_until(lambda: engine.running().get("greedy") == 2 and all(
        len(r.pieces) > 3 for r in runs), 60)
    fail.set()
    for r in runs:
        r.join()
        assert isinstance(r.error, BatchError), r.error
        assert "out of memory (simulated)" in str(r.error)
    assert engine.broken is None  # it worked before: a failure, not a model it cannot run
    fail.clear()
    again = together(Run(source(model), ask(0)), Run(source(model), ask(1)))
    for r in again:
        r.join()
        assert r.error is None
    assert again[0].ids == alone(model, ask(0)).ids
    assert engine.starts == 2


def test_an_engine_that_fails_at_once_falls_back_to_turns(model: Any) -> None:
    real_forward = model.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        if "logits_indices" in kwargs:  # only the engine's steps carry these
            raise RuntimeError("this model cannot run paged attention (simulated)")
        return real_forward(*args, **kwargs)

    model.forward = forward
    first = together(Run(source(model), ask(0)), Run(source(model), ask(1)))
    for r in first:
        r.join()
    assert any(isinstance(r.error, BatchError) for r in first), [r.error for r in first]
    s = source(model)
    assert s.concurrency == 1 and "simulated" in s.batching
    r = Run(s, ask(0)).start().join()
    assert r.error is None and len(r.ids) == 24


def test_an_idle_engine_stops_and_starts_again(model: Any,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching, "IDLE_SECONDS", 0.0)
    s = source(model)
    for r in together(Run(s, ask(0)), Run(source(model), ask(1))):
        r.join()
    engine = engine_of(s)
    assert engine.starts == 1

    def routers() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("nbstream-batch")]

    wait_until(lambda: not engine.running() and not routers(), 30)
    runs = together(Run(s, ask(1)), Run(source(model), ask(2)))
    for r in runs:
        r.join()
    assert runs[0].error is None and runs[0].ids == alone(model, ask(1)).ids
    assert engine.starts == 2


# -- choosing the engine per device, no GPU needed ------------------------------------------


def test_batching_is_selected_per_device() -> None:
    cpu = devices.select_batching("cpu", "sdpa", None, 4, max_positions=512)
    assert cpu.enabled and cpu.tokens_per_reply == 512 and cpu.cache_tokens(4) == 2048
    assert devices.select_batching("cpu", "sdpa", None, 4).tokens_per_reply == 1024
    assert cpu.step_tokens == 256 and cpu.page_size == 64
    cuda = devices.select_batching("cuda:0", "flash_attention_2", None, 8,
                                   max_positions=32768)
    assert cuda.enabled and "cuda:0" in cuda.reason and cuda.tokens_per_reply == 8192
    assert cuda.step_tokens == 2048 and cuda.page_size == 256
    assert devices.select_batching("cuda", "sdpa", None, 2).enabled
    for args, word in ((("cuda", "sdpa", "bitsandbytes", 4), "bitsandbytes"),
                       (("cpu", "eager", None, 4), "eager"),
                       (("cpu", "flex_attention", None, 4), "flex_attention"),
                       (("cpu", "sdpa", None, 1), "concurrency=1"),
                       (("xpu", "sdpa", None, 4), "xpu")):
        plan = devices.select_batching(*args)
        assert not plan.enabled and word in plan.reason, plan
    old_mps = devices.select_batching("mps", "sdpa", None, 4, torch_version=lambda: (2, 13))
    assert not old_mps.enabled and "2.14" in old_mps.reason
    assert devices.select_batching("mps", "sdpa", None, 4, torch_version=lambda: (2, 14)).enabled


def test_the_loaded_model_decides(model: Any) -> None:
    s = source(model)
    assert s.concurrency == 4
    assert s.batching.startswith("up to 4 replies together on cpu")
    assert batching.model_facts(model)[:3] == ("cpu", "sdpa", None)
    assert batching.plan_for(model, 1).enabled is False


# -- construction: options generate() would not take ----------------------------------------


@pytest.mark.parametrize(("kwargs", "error", "words"), [
    ({"concurrency": 0}, ValueError, "concurrency"),
    ({"concurrency": "2"}, ValueError, "concurrency"),
    ({"concurrency": True}, ValueError, "concurrency"),
    ({"concurency": 2}, TypeError, "did you mean 'concurrency'"),
    ({"max_new_token": 20}, TypeError, "did you mean 'max_new_tokens'"),
    ({"not_an_option": 1}, TypeError, "'not_an_option'"),
    ({"top_p": 0.9}, ValueError, "top_p"),
    ({"top_k": 20, "do_sample": False}, ValueError, "top_k"),
    ({"temperature": 0.5, "do_sample": False}, ValueError, "temperature"),
    ({"temperature": -1}, ValueError, "temperature"),
    ({"top_p": 1.5, "do_sample": True}, ValueError, "top_p"),
    ({"max_new_tokens": 0}, ValueError, "max_new_tokens"),
    ({"max_new_tokens": 2.5}, TypeError, "max_new_tokens"),
    ({"num_beams": 3}, ValueError, "num_beams"),
    ({"num_return_sequences": 2}, ValueError, "num_return_sequences"),
    ({"input_ids": [1, 2]}, TypeError, "input_ids"),
    ({"streamer": object()}, TypeError, "streamer"),
    ({"stop_strings": [""]}, TypeError, "stop_strings"),
    ({"do_sample": "yes"}, TypeError, "do_sample"),
    ({"eos_token_id": "x"}, TypeError, "eos_token_id"),
])
def test_bad_options_fail_at_construction_naming_them(
        kwargs: dict[str, Any], error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(")):
        TransformersSource(tiny_model(), tiny_tokenizer(), **kwargs)


def test_good_options_are_kept() -> None:
    s = TransformersSource(None, concurrency=2)  # the example that used to fail every reply
    assert s.concurrency == 2 and s.generate_kwargs == {}
    s = TransformersSource(tiny_model(), tiny_tokenizer(), temperature=0.7, top_p=0.9,
                           max_new_tokens=10, guidance_scale=1.0)
    assert s.generate_kwargs == {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 10,
                                 "guidance_scale": 1.0, "do_sample": True}
    greedy = TransformersSource(tiny_model(), tiny_tokenizer(), temperature=0)
    assert greedy.generate_kwargs == {"do_sample": False}


# -- through the widgets --------------------------------------------------------------------


class Gated(TransformersSource):
    """A TransformersSource whose replies note what the other one showed.

    The reply whose first piece comes first waits there (60 s at most) until a
    second reply has asked; the second, at its own first piece, notes what the
    first one's message showed then (its status and text) and whether the first
    had ended. Taking turns, the second would start only after the first ended.

    The replies' messages are found by their cancel events (each reply's stream
    hands its own to the source): the test puts the widget's replies in
    :attr:`replies` once it has them."""

    asked = threading.Event()  # two replies have asked
    first_ended = threading.Event()
    cancels: ClassVar[list[threading.Event]] = []  # the replies' cancel events, as they asked
    first: ClassVar[list[threading.Event]] = []  # the cancel event of the first to stream
    replies: ClassVar[list[Any]] = []  # the widget's Reply objects (the test adds them)
    seen: ClassVar[list[tuple[str, str, bool]]] = []
    lock = threading.Lock()

    @classmethod
    def reset(cls) -> None:
        cls.asked = threading.Event()
        cls.first_ended = threading.Event()
        cls.cancels.clear()
        cls.first.clear()
        cls.replies.clear()
        cls.seen.clear()

    @classmethod
    def first_reply(cls) -> Any:
        """The reply that streamed first (waits until the test has handed it over)."""
        def found() -> Any:
            return next((r for r in cls.replies if r.stream.cancel_event is cls.first[0]), None)

        return wait_until(found, 60, "the test hands over the replies")

    def generate_with(self, messages: Any, emit: Any, cancel: Any, options: Any,
                      tools: Any = ()) -> Any:
        with Gated.lock:
            Gated.cancels.append(cancel)
            if len(Gated.cancels) == 2:
                Gated.asked.set()
        count = [0]

        def gated(piece: Any) -> None:
            emit(piece)
            count[0] += 1
            if count[0] != 1:
                return
            with Gated.lock:
                leading = not Gated.first
                if leading:
                    Gated.first.append(cancel)
            if leading:
                Gated.asked.wait(60)
            else:
                first = Gated.first_reply()
                Gated.seen.append((first.status, first.text, Gated.first_ended.is_set()))

        try:
            return super().generate_with(messages, gated, cancel, options, tools)
        finally:
            if Gated.first and Gated.first[0] is cancel:
                Gated.first_ended.set()


def test_two_chats_on_one_model_stream_at_the_same_time(model: Any) -> None:
    from nbstream import ChatWidget

    Gated.reset()
    a_src = Gated(model, tiny_tokenizer(), max_new_tokens=60, concurrency=4)
    b_src = Gated(model, tiny_tokenizer(), max_new_tokens=60, concurrency=4)
    assert a_src.lane_key() == b_src.lane_key()
    a, b = ChatWidget(a_src), ChatWidget(b_src)
    try:
        ra = a.send("Hello from the first chat")
        Gated.replies.append(ra)
        wait_until(lambda: Gated.first, 60)
        rb = b.send("Hello from the second chat")
        Gated.replies.append(rb)
        ra.wait(120)
        rb.wait(120)
        # when the second chat's first piece came, the first was running, its text shown
        assert len(Gated.seen) == 1
        status, text, ended = Gated.seen[0]
        assert status == "running" and text and not ended
        assert ra.status == rb.status == "done"
        assert ra.outcome is not None and ra.outcome.figures["tokens"] == 60
        assert rb.outcome is not None and rb.outcome.figures["tokens"] == 60
    finally:
        a.close()
        b.close()
    wait_until(lambda: lanes.get(a_src.lane_key()) is None, 30)


def test_compare_over_one_model_streams_its_panes_side_by_side(model: Any) -> None:
    from nbstream import Compare

    Gated.reset()
    greedy = Gated(model, tiny_tokenizer(), max_new_tokens=60, concurrency=4)
    sampled = Gated(model, tiny_tokenizer(), max_new_tokens=60, concurrency=4, temperature=0.8)
    assert greedy.lane_key() == sampled.lane_key()
    cmp = Compare([greedy, sampled])
    try:
        replies = cmp.send("Hello, both of you")
        Gated.replies.extend(replies)
        cmp.wait(120)
        assert len(Gated.seen) == 1
        status, text, ended = Gated.seen[0]
        assert status == "running" and text and not ended
        assert [r.status for r in replies] == ["done", "done"]
        expected = alone(model, [{"role": "user", "content": "Hello, both of you"}],
                         max_new_tokens=60)
        assert replies[0].text == "".join(expected.pieces)
    finally:
        cmp.close()


# -- the embedded model ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def smol() -> Iterator[TransformersSource]:
    from nbstream.sources.transformers import default_model

    try:
        default_model.gguf_path()
    except default_model.DefaultModelMissing as exc:
        pytest.skip(str(exc))
    s = TransformersSource(max_new_tokens=48, concurrency=4)
    s.prepare()
    yield s
    if s._loaded is not None and s._loaded.engine is not None:
        s._loaded.engine.close()


STORIES = ["Write a short story about a robot who learns to paint.",
           "What is the capital of France?",
           "List three fruits.",
           "Explain what a rainbow is to a child."]


@pytest.mark.model
def test_model_batched_replies_equal_their_answers_alone(smol: TransformersSource) -> None:
    runs = [Run(TransformersSource(max_new_tokens=48, concurrency=4),
                [{"role": "user", "content": q}]) for q in STORIES]
    for r in runs:
        r.source.prepare()
        assert r.source.model is smol.model
    starts = engine_of(smol).starts if smol._loaded and smol._loaded.engine else 0
    together(*runs)
    for r, q in zip(runs, STORIES):
        r.join()
        assert r.error is None, r.error
        one = TransformersSource(max_new_tokens=48, concurrency=1)
        ref = Run(one, [{"role": "user", "content": q}]).start().join()
        assert r.ids == ref.ids, q
        assert "".join(r.pieces) == "".join(ref.pieces)
        assert r.outcome.finish_reason == ref.outcome.finish_reason
    assert engine_of(smol).starts == starts + 1  # one manager ran the four
    assert "France" in "".join(runs[1].pieces) or "Paris" in "".join(runs[1].pieces)
