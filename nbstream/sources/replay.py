"""Recordings of real generations, and a source that plays them back in rhythm.

A recording is a JSON-lines file. The first line is a header object::

    {"nbstream_recording": 1, "source": "SmolLM2-135M-Instruct", "prompt": "Hello",
     "messages": [...], "created": "2026-01-02T03:04:05+00:00", "pieces": 42,
     "duration": 1.93, "status": "done"}

(only ``nbstream_recording`` is required; other fields are kept as they are),
then one object per piece, ``{"t": seconds since generation started, "text":
piece}``, in order, with ``"part": "reasoning"`` for a piece of the model's
reasoning (no ``part``: answer text). Times never decrease; the first piece's
``t`` is the time to the first token. The header also keeps how the
generation ended, as the source said (``finish_reason``: a string or null,
``usage`` and ``figures``: objects); recordings without them (older ones)
ended with ``"stop"``.

Recording: wrap a source in :class:`Recorder`. It delegates everything to the
wrapped source (same label, lane and concurrency) and notes ``(t, piece)``
for each piece it emits, on the worker thread that runs the reply; at the end
of each reply (done, stopped or failed) it keeps the :class:`Recording`. Then
``record(reply, path)`` (for a reply of a widget built on a Recorder) or
``recorder.save(path)`` (the latest reply) writes the file. A reply on its own
cannot be recorded: its stream keeps the times of the pieces but not the
pieces themselves. The recording travels back with the reply's own result,
never through the reply's internals: the Recorder's ``generate`` returns a
:class:`RecordedOutcome` (``reply.outcome``), a stop included; for a failed
reply it rides on the error (``reply.error``).

Playback: :class:`ReplaySource` emits the pieces on the recorded schedule,
scaled by ``speed`` (2.0: twice as fast; 0 or ``inf``: as fast as possible),
whatever the prompt. The schedule is absolute (a late wake-up does not delay
the pieces after it), and it waits on the cancel event, never in a plain
sleep, so a stop is immediate. It returns the recorded ``finish_reason``,
usage and figures.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Protocol, cast, get_args

from ..core.attachment import ANY_TYPE
from ..core.pieces import FinishReason, Outcome, Reasoning, ToolCallDelta
from .base import Cancelled, ChatMessage, Emit, Source

__all__ = ["FORMAT_VERSION", "RecordedOutcome", "Recorder", "Recording", "RecordingError",
           "ReplaySource", "record"]

FORMAT_VERSION = 1
_MAGIC = "nbstream_recording"

#: (seconds since the start, piece); a piece is a str or a Reasoning
Piece = tuple[float, str]
StrPath = str | PathLike[str]
#: the finish reasons a source reports (the others are set by the pipeline)
_SOURCE_REASONS = frozenset({"stop", "length", "tool_calls", "abort"})
_ALL_REASONS = frozenset(get_args(FinishReason))
#: where a Recorder leaves the recording of a failed reply on its error
_ON_ERROR = "nbstream_recording"


class _ReplyLike(Protocol):
    """What :func:`record` needs of a reply (``nbstream.widgets.reply.Reply``)."""

    @property
    def source(self) -> Source: ...
    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def done(self) -> bool: ...
    @property
    def outcome(self) -> Outcome | None: ...
    @property
    def error(self) -> BaseException | None: ...


class RecordingError(ValueError):
    """A file (or lines) that is not a valid nbstream recording."""


@dataclass(frozen=True)
class Recording:
    """The pieces of one generation with their times, and a header describing it."""

    pieces: tuple[Piece, ...]
    header: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The answer text (reasoning left out)."""
        return "".join(text for _, text in self.pieces if not isinstance(text, Reasoning))

    @property
    def reasoning(self) -> str:
        """The reasoning text ('' if there was none)."""
        return "".join(text for _, text in self.pieces if isinstance(text, Reasoning))

    @property
    def outcome(self) -> Outcome:
        """How the recorded generation ended, as its source said (``"stop"`` if the
        recording does not say, or ended by a stop or an error)."""
        h = self.header
        reason = h.get("finish_reason", "stop")
        usage = h.get("usage")
        figures = h.get("figures")
        return Outcome(
            finish_reason=reason if reason is None or reason in _SOURCE_REASONS else "stop",
            usage=dict(usage) if isinstance(usage, dict) else {},
            figures=dict(figures) if isinstance(figures, dict) else {},
        )

    @property
    def duration(self) -> float:
        """Seconds from the start of generation to the last piece."""
        return self.pieces[-1][0] if self.pieces else 0.0

    @property
    def source(self) -> str | None:
        """The label of the source that was recorded, if the header says."""
        value = self.header.get("source")
        return value if isinstance(value, str) else None

    # ----------------------------------------------------------------- writing
    def to_lines(self) -> list[str]:
        """The file's lines (without line ends)."""
        header = {_MAGIC: FORMAT_VERSION, **{k: v for k, v in self.header.items() if k != _MAGIC}}
        header["pieces"] = len(self.pieces)
        header["duration"] = round(self.duration, 6)
        lines = [json.dumps(header, ensure_ascii=False)]
        lines += [json.dumps(_piece_obj(t, text), ensure_ascii=False) for t, text in self.pieces]
        return lines

    def save(self, path: StrPath) -> Path:
        """Write the recording to ``path`` (UTF-8 JSON lines); returns the path."""
        path = Path(path)
        path.write_text("\n".join(self.to_lines()) + "\n", encoding="utf-8")
        return path

    # ----------------------------------------------------------------- reading
    @classmethod
    def load(cls, path: StrPath) -> Recording:
        """Read and validate a recording file (:class:`RecordingError` if it is not one)."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise RecordingError(f"{path}: not a text file (not UTF-8 at byte {exc.start}), "
                                 "not an nbstream recording") from None
        # split on "\n" only: str.splitlines() would also split inside a JSON
        # string at U+2028, U+0085 and friends, which json.dumps leaves as they are
        return cls.parse(text.split("\n"), name=str(path))

    @classmethod
    def parse(cls, lines: Iterable[str], *, name: str = "<recording>") -> Recording:
        """Validate JSON lines as a recording; errors name the line (``name:N``)."""
        header: dict[str, Any] | None = None
        pieces: list[Piece] = []
        last_t = 0.0
        for lineno, line in enumerate(lines, 1):
            if not line.strip():  # blank lines (a final newline, CRLF ends) are allowed
                continue
            where = f"{name}:{lineno}"
            if header is None:
                header = _parse_header(line, where)
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordingError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})"
                                     ) from None
            if not isinstance(obj, dict) or "t" not in obj or "text" not in obj:
                raise RecordingError(f'{where}: expected a piece {{"t": seconds, "text": "..."}}, '
                                     f"got {_short(line)}")
            t, text = obj["t"], obj["text"]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) \
                    or t < 0:
                raise RecordingError(f'{where}: "t" must be a number of seconds >= 0, got {t!r}')
            if t < last_t:
                raise RecordingError(f'{where}: times must not decrease ("t" {t:g} after '
                                     f"{last_t:g})")
            if not isinstance(text, str):
                raise RecordingError(f'{where}: "text" must be a string, got {_short(text)}')
            part = obj.get("part", "answer")
            if part == "reasoning":
                text = Reasoning(text)
            elif part != "answer":
                raise RecordingError(f'{where}: "part" must be "answer" or "reasoning", '
                                     f"got {_short(part)}")
            pieces.append((float(t), text))
            last_t = float(t)
        if header is None:
            raise RecordingError(f"{name}: empty, not an nbstream recording")
        expected = header.get("pieces")
        if isinstance(expected, int) and expected != len(pieces):
            raise RecordingError(f"{name}: the header announces {expected} pieces, the file has "
                                 f"{len(pieces)} (cut short?)")
        return cls(tuple(pieces), header)


def _parse_header(line: str, where: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict) or _MAGIC not in obj:
        raise RecordingError(f'{where}: not an nbstream recording (the first line must be a '
                             f'JSON object with "{_MAGIC}": {FORMAT_VERSION}), got {_short(line)}')
    if obj[_MAGIC] != FORMAT_VERSION:
        raise RecordingError(f"{where}: recording format {obj[_MAGIC]!r} is not supported "
                             f"(this nbstream reads format {FORMAT_VERSION})")
    reason = obj.get("finish_reason", "stop")
    if reason is not None and reason not in _ALL_REASONS:
        raise RecordingError(f'{where}: "finish_reason" must be one of '
                             f"{', '.join(sorted(_ALL_REASONS))} or null, got {reason!r}")
    return obj


def _piece_obj(t: float, text: str) -> dict[str, Any]:
    obj: dict[str, Any] = {"t": round(t, 6), "text": str(text)}
    if isinstance(text, Reasoning):
        obj["part"] = "reasoning"
    return obj


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# ------------------------------------------------------------------- playback
class ReplaySource(Source):
    """Play a recording's pieces back on its schedule, scaled by ``speed``."""

    def __init__(
        self,
        recording: Recording | Sequence[Piece],
        *,
        speed: float = 1.0,
        label: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(recording, Recording):
            recording = Recording.parse(
                [json.dumps({_MAGIC: FORMAT_VERSION})]
                + [json.dumps(_piece_obj(t, text) if isinstance(text, str)
                              else {"t": t, "text": text}) for t, text in recording],
                name="<pieces>",
            )
        speed = float(speed)
        if math.isnan(speed) or speed < 0:
            raise ValueError("speed must be > 0 (2.0: twice as fast), or 0 / inf for "
                             "as fast as possible")
        self.recording = recording
        self.speed = math.inf if speed == 0 else speed
        self._label = label or (f"{recording.source} (replay)" if recording.source else "replay")
        self._clock = clock

    @classmethod
    def from_file(cls, path: StrPath, *, speed: float = 1.0,
                  label: str | None = None) -> ReplaySource:
        """A ReplaySource of the recording in ``path``."""
        return cls(Recording.load(path), speed=speed, label=label)

    @property
    def label(self) -> str:
        return self._label

    def lane_key(self) -> Hashable:
        return ("replay", id(self))

    @property
    def accepts(self) -> frozenset[str]:
        """Every attachment (a replay does not look at the messages)."""
        return ANY_TYPE

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> Outcome:
        start = self._clock()
        fast = math.isinf(self.speed)
        for t, text in self.recording.pieces:
            if not fast:
                ahead = start + t / self.speed - self._clock()
                if ahead > 0.0005 and cancel.wait(ahead):
                    raise Cancelled()
            if cancel.is_set():
                raise Cancelled()
            emit(text)
        return self.recording.outcome

    def __repr__(self) -> str:
        rec = self.recording
        speed = "inf" if math.isinf(self.speed) else f"{self.speed:g}"
        return (f"ReplaySource({self._label!r}, pieces={len(rec.pieces)}, "
                f"duration={rec.duration:.3f}, speed={speed})")


# ------------------------------------------------------------------ recording
@dataclass(frozen=True)
class RecordedOutcome(Outcome):
    """The outcome of a :class:`Recorder`'s reply: the wrapped source's, with the recording."""

    recording: Recording | None = None


def _json_safe(figures: Mapping[str, Any]) -> dict[str, Any]:
    """The figures that survive JSON as they are (numbers, strings, plain containers)."""
    out: dict[str, Any] = {}
    for key, value in figures.items():
        try:
            if json.loads(json.dumps(value)) == value:
                out[str(key)] = value
        except (TypeError, ValueError):
            continue
    return out


class Recorder(Source):
    """Wrap ``source`` and record each reply it generates (see the module docstring).

    :attr:`last_recording` is the latest reply's recording (written by the
    worker thread when a reply ends; read it from any thread).
    """

    def __init__(self, source: Source, *, clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(source, Source):
            raise TypeError(f"Recorder wraps a nbstream Source, got {type(source).__name__}")
        self.source = source
        self.concurrency = source.concurrency
        self._clock = clock
        self._lock = threading.Lock()
        self._last: Recording | None = None

    # -- delegated
    @property
    def label(self) -> str:
        return self.source.label

    def lane_key(self) -> Hashable:
        return self.source.lane_key()

    @property
    def prepared(self) -> bool:
        return self.source.prepared

    def prepare(self) -> None:
        self.source.prepare()

    @property
    def accepts(self) -> frozenset[str]:
        return self.source.accepts

    # -- recording
    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> RecordedOutcome:
        """Run the wrapped source, noting each piece; returns its outcome with the
        recording (a stop returns too, with ``finish_reason="cancelled"``; an error
        is raised again, carrying the recording)."""
        pieces: list[Piece] = []
        clock = self._clock
        start = clock()

        def recording_emit(piece: str | ToolCallDelta) -> None:
            t = clock() - start  # when the source produced it, before any backpressure
            cast(Callable[[object], None], emit)(piece)
            if isinstance(piece, str):  # (tool-call pieces are not recorded yet)
                pieces.append((t, piece))

        def keep(status: str, outcome: Outcome | None, error: str | None = None) -> Recording:
            header: dict[str, Any] = {
                "source": self.source.label,
                "prompt": _last_user_text(messages),
                "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
                "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "status": status,
            }
            if error is not None:
                header["error"] = error
            if outcome is not None:
                header["finish_reason"] = outcome.finish_reason
                if outcome.usage:
                    header["usage"] = dict(outcome.usage)
                figures = _json_safe(outcome.figures)
                if figures:
                    header["figures"] = figures
            rec = Recording(tuple(pieces), header)
            with self._lock:
                self._last = rec
            return rec

        try:
            outcome = self.source.generate(messages, recording_emit, cancel) or Outcome()
        except Cancelled:
            outcome = Outcome(finish_reason="cancelled")
        except BaseException as exc:
            rec = keep("error", None, f"{type(exc).__name__}: {exc}")
            with contextlib.suppress(AttributeError, TypeError):  # an exception without a dict
                setattr(exc, _ON_ERROR, rec)
            raise
        if cancel.is_set():
            outcome = Outcome("cancelled", outcome.usage, outcome.figures)
        rec = keep("stopped" if outcome.finish_reason == "cancelled" else "done", outcome)
        return RecordedOutcome(outcome.finish_reason, outcome.usage, outcome.figures,
                               recording=rec)

    @property
    def last_recording(self) -> Recording | None:
        """The recording of the latest reply that ended (None before the first)."""
        with self._lock:
            return self._last

    def recording_for(self, reply: _ReplyLike) -> Recording:
        """The recording of ``reply`` (a reply of this recorder that has ended)."""
        if reply.source is not self:
            raise ValueError("this reply was not generated by this Recorder")
        if not reply.done:
            raise RuntimeError(f"reply {reply.id} is still {reply.status}: wait for it to end "
                               "(reply.wait()) before recording it")
        outcome = reply.outcome
        rec: Recording | None = None
        if isinstance(outcome, RecordedOutcome):
            rec = outcome.recording
        elif reply.error is not None:
            found = getattr(reply.error, _ON_ERROR, None)
            rec = found if isinstance(found, Recording) else None
        if rec is None:
            raise RuntimeError(f"reply {reply.id} produced nothing to record "
                               f"(status {reply.status}: it never started generating)")
        return rec

    def save(self, path: StrPath) -> Path:
        """Write the latest reply's recording to ``path``; returns the path."""
        rec = self.last_recording
        if rec is None:
            raise RuntimeError("nothing recorded yet: no reply of this Recorder has ended")
        return rec.save(path)

    def __repr__(self) -> str:
        return f"Recorder({self.source!r})"


def record(reply: _ReplyLike, path: StrPath) -> Path:
    """Save the recording of ``reply`` to ``path``; returns the path.

    The reply must come from a source wrapped in :class:`Recorder`
    (``ChatWidget(Recorder(source))``) and must have ended.
    """
    source = reply.source
    if not isinstance(source, Recorder):
        raise TypeError("record(reply, path) needs a reply of a Recorder: build the widget "
                        "with ChatWidget(Recorder(source)); the pieces of other replies "
                        "are not kept")
    return source.recording_for(reply).save(path)


def _last_user_text(messages: Sequence[ChatMessage]) -> str:
    for message in reversed(messages):
        if message["role"] == "user":
            return message["content"]
    return ""
