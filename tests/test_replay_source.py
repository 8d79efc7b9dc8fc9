"""Recorder, recordings on disk and ReplaySource (no server, no model)."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbstream import ChatWidget, ReplyError
from nbstream.sources import (
    Cancelled,
    Recorder,
    Recording,
    RecordingError,
    ReplaySource,
    ScriptedFailure,
    ScriptedSource,
    Source,
    record,
)
from nbstream.sources.base import ChatMessage
from nbstream.sources.scripted import split_words

MSGS: list[ChatMessage] = [{"role": "user", "content": "Tell me something"}]
TEXT = "The quick brown fox jumps over the lazy dog, twice: 日本 😀 and\nagain."
#: a short recording with uneven gaps (0.5 s in all)
SCHEDULE = [(0.05, "A"), (0.1, " b"), (0.12, " c"), (0.3, " d"), (0.35, " e"), (0.5, " f")]


def collect(source: Source, cancel_at: float | None = None
            ) -> tuple[list[tuple[float, str]], BaseException | None, float]:
    """(seconds since start, piece) per emit; the exception; seconds from cancel to return."""
    out: list[tuple[float, str]] = []
    cancel = threading.Event()
    start = time.monotonic()
    stamp: list[float] = []

    def stop() -> None:
        stamp.append(time.monotonic())
        cancel.set()

    timer = threading.Timer(cancel_at, stop) if cancel_at is not None else None
    if timer is not None:
        timer.start()
    error: BaseException | None = None
    try:
        source.generate(MSGS, lambda p: out.append((time.monotonic() - start, p)), cancel)
    except (Cancelled, ScriptedFailure) as exc:
        error = exc
    finally:
        if timer is not None:
            timer.cancel()
    return out, error, (time.monotonic() - stamp[0]) if stamp else 0.0


def write(tmp_path: Path, lines: Sequence[str] | bytes, name: str = "rec.jsonl") -> Path:
    path = tmp_path / name
    if isinstance(lines, bytes):
        path.write_bytes(lines)
    else:
        path.write_text("\n".join(lines), encoding="utf-8")
    return path


HEADER = json.dumps({"nbstream_recording": 1, "source": "test"})


# ------------------------------------------------------------------ round trip
def test_record_then_replay_gives_the_same_pieces(tmp_path: Path) -> None:
    scripted = ScriptedSource(TEXT, rate=200, jitter=0.5, seed=3)
    recorder = Recorder(scripted)
    emitted, error, _ = collect(recorder)
    assert error is None
    rec = recorder.last_recording
    assert rec is not None
    assert [p for _, p in rec.pieces] == [p for _, p in emitted] == split_words(TEXT)
    times = [t for t, _ in rec.pieces]
    assert times == sorted(times) and times[0] >= 0.0

    path = recorder.save(tmp_path / "fox.jsonl")
    header = json.loads(path.read_text(encoding="utf-8").split("\n")[0])
    assert header["nbstream_recording"] == 1
    assert header["source"] == "ScriptedSource"
    assert header["prompt"] == "Tell me something"
    assert header["messages"] == MSGS
    assert header["status"] == "done"
    assert header["pieces"] == len(rec.pieces)
    assert dt.datetime.fromisoformat(header["created"]).tzinfo is not None

    loaded = Recording.load(path)
    assert loaded.pieces == tuple((round(t, 6), p) for t, p in rec.pieces)
    assert loaded.text == TEXT
    replayed, error, _ = collect(ReplaySource.from_file(path, speed=float("inf")))
    assert error is None
    assert [p for _, p in replayed] == split_words(TEXT)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(), max_size=8))
def test_any_text_survives_a_file(tmp_path_factory: pytest.TempPathFactory,
                                  texts: list[str]) -> None:
    """Line separators inside pieces (U+2028, U+0085, CR...) must not split the file."""
    rec = Recording(tuple((i * 0.01, t) for i, t in enumerate(texts)), {"source": "x"})
    path = rec.save(tmp_path_factory.mktemp("rec") / "r.jsonl")
    assert Recording.load(path).pieces == rec.pieces


# --------------------------------------------------------------------- rhythm
@pytest.mark.parametrize("speed", [1.0, 4.0])
def test_replay_keeps_the_rhythm(speed: float) -> None:
    out, error, _ = collect(ReplaySource(SCHEDULE, speed=speed))
    assert error is None
    assert [p for _, p in out] == [p for _, p in SCHEDULE]
    late = [got - t / speed for (got, _), (t, _) in zip(out, SCHEDULE)]
    # on the real clock only "never early" holds whatever the load; the exact
    # schedule is checked on a fake clock below, and how late pieces come on a
    # loaded machine is a figure for benchmarks/, not a test
    assert min(late) > -0.002, "a piece came early"


def test_the_schedule_is_exact_and_scaled_on_a_fake_clock() -> None:
    now = [100.0]
    src = ReplaySource(SCHEDULE, speed=2.0, clock=lambda: now[0])
    cancel = threading.Event()
    waits: list[float] = []

    def fake_wait(timeout: float | None = None) -> bool:
        waits.append(timeout or 0.0)
        now[0] += timeout or 0.0
        return False

    cancel.wait = fake_wait  # type: ignore[method-assign]
    times: list[float] = []
    src.generate(MSGS, lambda p: times.append(now[0] - 100.0), cancel)
    assert times == pytest.approx([t / 2 for t, _ in SCHEDULE])
    assert all(w > 0 for w in waits)  # it waited on the cancel event, never slept


@pytest.mark.parametrize("speed", [0.0, float("inf")])
def test_speed_zero_or_inf_is_as_fast_as_possible(speed: float) -> None:
    slow = [(i * 1.0, f" w{i}") for i in range(50)]  # 49 s at speed 1
    src = ReplaySource(slow, speed=speed, clock=lambda: 100.0)
    cancel = threading.Event()
    waits: list[float | None] = []

    def no_wait(timeout: float | None = None) -> bool:
        waits.append(timeout)
        return False

    cancel.wait = no_wait  # type: ignore[method-assign]
    out: list[str] = []
    src.generate(MSGS, out.append, cancel)
    assert out == [p for _, p in slow]
    assert not [w for w in waits if w], "it waited"


def test_a_stop_mid_replay_is_immediate() -> None:
    src = ReplaySource([(0.0, "a"), (0.05, "b"), (30.0, "never")])
    cancel = threading.Event()
    waiting_long = threading.Event()
    real_wait = cancel.wait

    def wait(timeout: float | None = None) -> bool:
        if timeout is not None and timeout > 1.0:
            waiting_long.set()  # it now waits for "never", 30 s away
        return real_wait(timeout)

    cancel.wait = wait  # type: ignore[method-assign]

    def stop_while_waiting() -> None:
        waiting_long.wait(60)
        cancel.set()

    threading.Thread(target=stop_while_waiting, daemon=True).start()
    out: list[str] = []
    # it waits on the cancel event, so the stop ends that wait: no 30 s to sit out
    with pytest.raises(Cancelled):
        src.generate(MSGS, out.append, cancel)
    assert out == ["a", "b"]
    assert waiting_long.is_set()


# ----------------------------------------------------------------- bad files
@pytest.mark.parametrize(
    ("lines", "says"),
    [
        ([], ": empty, not an nbstream recording"),
        (["", "  "], ": empty, not an nbstream recording"),
        (["hello"], ":1: not an nbstream recording"),
        (['{"foo": 1}'], ":1: not an nbstream recording"),
        (['[{"t": 0, "text": "a"}]'], ":1: not an nbstream recording"),
        (['{"nbstream_recording": 2}'], ":1: recording format 2 is not supported"),
        ([HEADER, '{"t": 0.1, "text": "a"}', '{"t": 0.2, "text": '], ":3: not valid JSON"),
        ([HEADER, "", '{"t": -1, "text": "a"}'], ':3: "t" must be a number of seconds >= 0'),
        ([HEADER, '{"t": "0.1", "text": "a"}'], ':2: "t" must be a number'),
        ([HEADER, '{"t": true, "text": "a"}'], ':2: "t" must be a number'),
        ([HEADER, '{"t": NaN, "text": "a"}'], ':2: "t" must be a number'),
        ([HEADER, '{"t": 0.2, "text": "a"}', '{"t": 0.1, "text": "b"}'],
         ':3: times must not decrease ("t" 0.1 after 0.2)'),
        ([HEADER, '{"t": 0.1, "text": 5}'], ':2: "text" must be a string'),
        ([HEADER, "[1, 2]"], ":2: expected a piece"),
        ([HEADER, '{"t": 0.1}'], ":2: expected a piece"),
        ([json.dumps({"nbstream_recording": 1, "pieces": 3}), '{"t": 0, "text": "a"}'],
         ": the header announces 3 pieces, the file has 1 (cut short?)"),
    ],
)
def test_bad_files_are_refused_with_the_line_number(tmp_path: Path, lines: list[str],
                                                    says: str) -> None:
    path = write(tmp_path, lines)
    with pytest.raises(RecordingError) as info:
        ReplaySource.from_file(path)
    assert str(info.value).startswith(str(path))
    assert says in str(info.value)


def test_a_binary_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, b"\x89PNG\r\n\x1a\n\xff\x00")
    with pytest.raises(RecordingError, match="not a text file"):
        Recording.load(path)


def test_bad_pieces_and_speeds_are_refused() -> None:
    with pytest.raises(RecordingError, match="<pieces>:3: times must not decrease"):
        ReplaySource([(0.2, "a"), (0.1, "b")])
    for speed in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="speed"):
            ReplaySource(SCHEDULE, speed=speed)


def test_a_hand_written_recording_with_crlf_and_blank_lines_loads(tmp_path: Path) -> None:
    path = write(tmp_path, [HEADER + "\r", '{"t": 0, "text": "a"}\r', "", '{"t": 1, "text": "b"}',
                            ""])
    src = ReplaySource.from_file(path, speed=4)
    assert src.recording.pieces == ((0.0, "a"), (1.0, "b"))
    assert src.label == "test (replay)"
    assert repr(src) == "ReplaySource('test (replay)', pieces=2, duration=1.000, speed=4)"


# ------------------------------------------------------------------- Recorder
def test_recorder_is_transparent() -> None:
    inner = ScriptedSource("x y", rate=1000)
    inner.concurrency = 3
    rec = Recorder(inner)
    assert rec.label == inner.label
    assert rec.lane_key() == inner.lane_key()
    assert rec.concurrency == 3
    assert rec.prepared
    assert repr(rec) == f"Recorder({inner!r})"
    assert rec.last_recording is None
    with pytest.raises(RuntimeError, match="nothing recorded yet"):
        rec.save("never.jsonl")


def test_recorder_keeps_stopped_and_failed_replies() -> None:
    rec = Recorder(ScriptedSource("a b c d e f", rate=1000, error_after=3))
    out, error, _ = collect(rec)
    assert isinstance(error, ScriptedFailure)
    failed = rec.last_recording
    assert failed is not None and failed.header["status"] == "error"
    assert [p for _, p in failed.pieces] == ["a", " b", " c"]
    assert "ScriptedFailure: scripted failure after 3 pieces" in failed.header["error"]

    rec = Recorder(ScriptedSource("a b c d e f", rate=10))
    out, error, _ = collect(rec, cancel_at=0.15)
    assert error is None  # a stop returns, with its recording (RecordedOutcome)
    stopped = rec.last_recording
    assert stopped is not None and stopped.header["status"] == "stopped"
    assert [p for _, p in stopped.pieces] == [p for _, p in out]


# ---------------------------------------------------------------- with a widget
def test_record_a_widget_reply_and_replay_it_in_another(tmp_path: Path) -> None:
    w = ChatWidget(Recorder(ScriptedSource(TEXT, rate=100)))
    try:
        first = w.send("hi")
        assert first.wait(10) == TEXT
        path = record(first, tmp_path / "reply.jsonl")
    finally:
        w.close()
    assert Recording.load(path).header["prompt"] == "hi"

    w2 = ChatWidget(ReplaySource.from_file(path, speed=4))
    try:
        assert w2.source_label == "ScriptedSource (replay)"
        again = w2.send("any question")
        assert again.wait(10) == TEXT
        assert again.status == "done"
        assert again.stats["pieces"] == len(split_words(TEXT))
    finally:
        w2.close()


def test_record_refuses_replies_it_cannot_record(tmp_path: Path) -> None:
    w = ChatWidget(ScriptedSource("plain", rate=1000))
    try:
        r = w.send("hi")
        r.wait(10)
        with pytest.raises(TypeError, match=r"ChatWidget\(Recorder\(source\)\)"):
            record(r, tmp_path / "x.jsonl")
    finally:
        w.close()

    w = ChatWidget(Recorder(ScriptedSource("a b c", rate=1000, error_after=2)))
    try:
        r = w.send("hi")
        with pytest.raises(ReplyError):
            r.wait(10)
        path = record(r, tmp_path / "failed.jsonl")  # a failed reply is recorded too
        assert Recording.load(path).header["status"] == "error"
        assert Recording.load(path).text == r.text == "a b"
    finally:
        w.close()
