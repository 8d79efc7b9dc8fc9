"""Reasoning pieces and outcomes from ScriptedSource, IteratorSource, ReplaySource and Recorder.

No server, no model. What a source returns from ``generate`` (an ``Outcome``) is how it
says why it ended; the Recorder keeps pieces with their part type and the outcome, and
``record(reply, path)`` finds a reply's recording through ``reply.outcome`` (or the error),
never through the reply's internals.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from _wait import wait_until

from nbstream import ChatWidget, ReplyError
from nbstream.core.pieces import Outcome, Reasoning
from nbstream.sources import (
    IteratorSource,
    RecordedOutcome,
    Recorder,
    Recording,
    RecordingError,
    ReplaySource,
    ScriptedSource,
    record,
)
from nbstream.sources.base import ChatMessage

MSGS: list[ChatMessage] = [{"role": "user", "content": "Hi"}]


def run(source: object) -> tuple[list[str], Outcome | None]:
    pieces: list[str] = []
    outcome = source.generate(MSGS, pieces.append, threading.Event())  # type: ignore[attr-defined]
    return pieces, outcome


def split(pieces: list[str]) -> tuple[str, str]:
    return ("".join(p for p in pieces if isinstance(p, Reasoning)),
            "".join(p for p in pieces if not isinstance(p, Reasoning)))


# ------------------------------------------------------------------ ScriptedSource
def test_scripted_types_the_reasoning_first_then_the_text() -> None:
    source = ScriptedSource("The answer.", rate=1000, reasoning="Let me think.")
    pieces, outcome = run(source)
    assert pieces == ["Let", " me", " think.", "The", " answer."]
    assert [isinstance(p, Reasoning) for p in pieces] == [True, True, True, False, False]
    assert outcome == Outcome("stop")


def test_scripted_finish_reason_and_usage() -> None:
    source = ScriptedSource("cut", rate=1000, finish_reason="length",
                            usage={"completion_tokens": 256})
    _, outcome = run(source)
    assert outcome is not None and outcome.finish_reason == "length"
    assert outcome.usage == {"completion_tokens": 256}
    _, outcome = run(ScriptedSource("x", rate=1000, finish_reason=None))
    assert outcome is not None and outcome.finish_reason is None


def test_scripted_reasoning_must_be_text() -> None:
    with pytest.raises(TypeError, match="reasoning"):
        ScriptedSource("x", reasoning=42)  # type: ignore[arg-type]


# ------------------------------------------------------------------ IteratorSource
def test_iterator_yields_reasoning_and_an_outcome_last() -> None:
    def fn(messages: list[ChatMessage]) -> Iterator[str | Outcome]:
        yield Reasoning("hmm")
        yield "Hello"
        yield Outcome("length", usage={"completion_tokens": 2})

    pieces, outcome = run(IteratorSource(fn))
    assert pieces == [Reasoning("hmm"), "Hello"] and isinstance(pieces[0], Reasoning)
    assert outcome == Outcome("length", usage={"completion_tokens": 2})


def test_a_generator_may_return_its_outcome() -> None:
    def fn(messages: list[ChatMessage]) -> Iterator[str]:
        yield "a"
        return Outcome("length")  # type: ignore[return-value]

    pieces, outcome = run(IteratorSource(fn))
    assert pieces == ["a"] and outcome == Outcome("length")
    _, outcome = run(IteratorSource(lambda m: iter(["x"])))
    assert outcome is None  # ended normally


def test_an_async_function_yields_reasoning_and_an_outcome() -> None:
    async def fn(messages: list[ChatMessage]) -> AsyncIterator[str | Outcome]:
        yield Reasoning("r")
        yield "a"
        yield Outcome(None)

    pieces, outcome = run(IteratorSource(fn))
    assert pieces == [Reasoning("r"), "a"] and isinstance(pieces[0], Reasoning)
    assert outcome == Outcome(None)


def test_nothing_may_follow_an_outcome() -> None:
    with pytest.raises(TypeError, match="after an Outcome"):
        run(IteratorSource(lambda m: [Outcome(), "late"]))


def test_iterator_splits_inline_think_tags_when_asked() -> None:
    chunks = ["<thi", "nk>\nso", "me\n</th", "ink>\n\nAns", "wer"]
    pieces, _ = run(IteratorSource(lambda m: list(chunks)))
    assert "".join(pieces) == "".join(chunks)  # by default: as it is
    pieces, _ = run(IteratorSource(lambda m: list(chunks), think_tags=True))
    assert split(pieces) == ("some", "Answer")
    pieces, _ = run(IteratorSource(lambda m: ["so", "me\n</think>", "Answer"],
                                   think_tags="opened"))
    assert split(pieces) == ("some", "Answer")
    with pytest.raises(ValueError, match="think_tags"):
        IteratorSource(lambda m: [], think_tags="yes")  # type: ignore[arg-type]


# ------------------------------------------------------------ Recorder and replay
def test_a_recording_keeps_part_types_and_the_outcome(tmp_path: Path) -> None:
    recorder = Recorder(ScriptedSource("Answer here.", rate=1000, reasoning="Think first.",
                                       finish_reason="length", usage={"prompt_tokens": 3}))
    pieces, outcome = run(recorder)
    assert isinstance(outcome, RecordedOutcome)
    assert outcome.finish_reason == "length" and outcome.usage == {"prompt_tokens": 3}
    rec = outcome.recording
    assert rec is not None and rec is recorder.last_recording
    assert (rec.reasoning, rec.text) == ("Think first.", "Answer here.")

    path = rec.save(tmp_path / "r.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert header["finish_reason"] == "length" and header["usage"] == {"prompt_tokens": 3}
    assert json.loads(lines[1]) == {"t": json.loads(lines[1])["t"], "text": "Think",
                                    "part": "reasoning"}
    assert "part" not in json.loads(lines[-1])  # answer pieces are written as before

    replay = ReplaySource.from_file(path, speed=0)
    again, replayed = run(replay)
    assert again == pieces
    assert [isinstance(p, Reasoning) for p in again] == [isinstance(p, Reasoning)
                                                        for p in pieces]
    assert replayed == Outcome("length", usage={"prompt_tokens": 3})


def test_old_recordings_still_load_and_end_with_stop(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text('{"nbstream_recording": 1, "source": "x", "pieces": 2}\n'
                    '{"t": 0, "text": "a"}\n{"t": 0.1, "text": " b"}\n', encoding="utf-8")
    pieces, outcome = run(ReplaySource.from_file(path, speed=0))
    assert pieces == ["a", " b"] and outcome == Outcome("stop")


@pytest.mark.parametrize(("line", "says"), [
    ('{"t": 0, "text": "a", "part": "tool"}', '"part" must be "answer" or "reasoning"'),
])
def test_a_bad_part_is_refused(line: str, says: str) -> None:
    with pytest.raises(RecordingError, match=says):
        Recording.parse(['{"nbstream_recording": 1}', line])


def test_a_bad_finish_reason_is_refused() -> None:
    with pytest.raises(RecordingError, match="finish_reason"):
        Recording.parse(['{"nbstream_recording": 1, "finish_reason": "done"}'])


def test_replay_source_takes_reasoning_pieces() -> None:
    pieces, outcome = run(ReplaySource([(0, Reasoning("r")), (0, "a")], speed=0))
    assert pieces == [Reasoning("r"), "a"] and isinstance(pieces[0], Reasoning)
    assert outcome == Outcome("stop")


def test_record_finds_done_stopped_and_failed_replies_through_their_outcome(
        tmp_path: Path) -> None:
    w = ChatWidget(Recorder(ScriptedSource("a b c", rate=1000, finish_reason="length")))
    try:
        done = w.send("hi")
        done.wait(10)
        assert isinstance(done.outcome, RecordedOutcome)
        rec = Recording.load(record(done, tmp_path / "done.jsonl"))
        assert rec.header["finish_reason"] == "length" and rec.text == "a b c"
    finally:
        w.close()

    w = ChatWidget(Recorder(ScriptedSource("a b c d e f g h", rate=20)))
    try:
        stopped = w.send("hi")
        wait_until(lambda: len(stopped.text) >= 3, 10)
        stopped.cancel()
        wait_until(lambda: stopped.outcome is not None, 10)
        rec = Recording.load(record(stopped, tmp_path / "stopped.jsonl"))
        assert rec.header["status"] == "stopped"
        assert rec.header["finish_reason"] == "cancelled"
    finally:
        w.close()

    w = ChatWidget(Recorder(ScriptedSource("a b c", rate=1000, error_after=2)))
    try:
        failed = w.send("hi")
        with pytest.raises(ReplyError):
            failed.wait(10)
        assert failed.outcome is None
        rec = Recording.load(record(failed, tmp_path / "failed.jsonl"))
        assert rec.header["status"] == "error" and rec.text == "a b"
    finally:
        w.close()


def test_replay_does_not_import_the_reply_module() -> None:
    import ast
    import inspect

    from nbstream.sources import replay

    tree = ast.parse(inspect.getsource(replay))
    imported = {node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module}
    assert not any(m.endswith("reply") for m in imported)
    assert "_stream" not in inspect.getsource(replay)
