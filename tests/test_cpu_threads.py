"""TransformersSource(cpu_threads=): torch's intra-op threads for the generation, restored after.

A tiny real model (tests/_model_fixtures.py) generates; ``torch.set_num_threads``
and ``torch.get_num_threads`` are wrapped to record what was set, on which
thread, and what the model saw while it generated.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from _model_fixtures import tiny_model, tiny_tokenizer

from nbstream.sources.transformers import TransformersSource

# the local transformers source and its helpers (torch, transformers, tokenizers:
# tiny random-weight models): not in `make test-fast`
pytestmark = pytest.mark.transformers

torch = pytest.importorskip("torch")


class ThreadSpy:
    """Records torch.set_num_threads calls (value, thread name); keeps the real behaviour."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[int, str]] = []
        self._real_set = torch.set_num_threads
        monkeypatch.setattr(torch, "set_num_threads", self._set)

    def _set(self, n: int) -> None:
        self.calls.append((n, threading.current_thread().name))
        self._real_set(n)


def generate_on_worker(source: TransformersSource, seen: list[int]) -> Any:
    """Runs one reply on a worker thread, as a lane does; records torch's threads mid-generation."""
    source.prepare()
    model = source.model
    real = model.generate

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    model.generate = spy
    try:
        outcomes: list[Any] = []

        def run() -> None:
            outcomes.append(source.generate([{"role": "user", "content": "hi"}],
                                            lambda _: None, threading.Event()))

        t = threading.Thread(target=run, name="worker")
        t.start()
        t.join()
    finally:
        model.generate = real
    return outcomes[0] if outcomes else None


def test_none_leaves_torch_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = ThreadSpy(monkeypatch)
    # the reply's own generate() (concurrency=1): a batched one runs on the engine's thread
    source = TransformersSource(tiny_model(), tiny_tokenizer(), max_new_tokens=4, concurrency=1)
    seen: list[int] = []
    before = torch.get_num_threads()
    generate_on_worker(source, seen)
    assert spy.calls == []
    assert seen == [before]


def test_an_int_sets_the_threads_for_the_generation_and_restores_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = ThreadSpy(monkeypatch)
    source = TransformersSource(tiny_model(), tiny_tokenizer(), max_new_tokens=4, cpu_threads=1)
    seen: list[int] = []
    outcome = generate_on_worker(source, seen)
    assert seen == [1]  # the model generated with one intra-op thread
    # set on the generation thread, then the worker's previous value put back
    assert [t for _, t in spy.calls] == ["worker", "worker"]
    assert spy.calls[0][0] == 1
    assert outcome is not None and outcome.figures["tokens"] == 4


def test_threads_are_restored_when_generation_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = ThreadSpy(monkeypatch)
    source = TransformersSource(tiny_model(), tiny_tokenizer(), max_new_tokens=4, cpu_threads=1)
    source.prepare()
    before = torch.get_num_threads()

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(source.model, "generate", boom)
    with pytest.raises(RuntimeError, match="out of memory"):
        source.generate([{"role": "user", "content": "hi"}], lambda _: None, threading.Event())
    assert [n for n, _ in spy.calls] == [1, before]
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True])
def test_bad_cpu_threads_is_refused_at_once(bad: Any) -> None:
    with pytest.raises(ValueError, match="cpu_threads"):
        TransformersSource(tiny_model(), tiny_tokenizer(), cpu_threads=bad)
