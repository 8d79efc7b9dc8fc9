"""Splitting inline ``<think>…</think>`` out of streamed text: one streaming splitter.

Models run locally (Qwen3, DeepSeek-R1 distills, ...) and servers without a
reasoning parser write their thinking into the text itself, between
``<think>`` and ``</think>``. Often the output holds only the closing tag,
because the chat template already opened the block at the end of the prompt.
:class:`ThinkSplitter` turns such text, fed piece by piece, into
:class:`~nbstream.core.pieces.Reasoning` pieces (inside the block) and plain
``str`` pieces (the answer). Used by ``TransformersSource``,
``OpenAISource`` and ``IteratorSource``; it runs on the thread that feeds
it (the reply's worker thread) and serves one reply.

What it guarantees (``tests/test_think.py`` checks it with hypothesis): any
split of a text into pieces gives the same parts (the reasoning text and the
answer text, in the same order) as the whole text in one piece. A tag may be
cut across pieces at any position; the end of a piece that could be the start
of a tag is held back until the next piece tells. Text without ``<`` passes
through piece for piece.

The rules, for the whole text:

* Outside a block, ``<think>`` opens one; inside, ``</think>`` closes it.
  A ``<think>`` inside a block is text; a ``</think>`` outside one is dropped
  (a stray end of a block the template opened, when told otherwise).
* ``start_inside=True``: the text starts inside a block (the prompt ended
  with ``<think>``).
* An unclosed block at the end is reasoning to the end.
* Whitespace that templates put around the tags is dropped: at both ends of
  the reasoning, at the start of an answer that follows ``</think>``, and
  whitespace alone before a first ``<think>``. Other answer text is kept as
  it is (text before ``<think>`` included).
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping
from typing import Any, Literal, cast

from ..core.pieces import Reasoning, ToolCallDelta

__all__ = ["CLOSE", "OPEN", "ThinkSplitter", "ThinkTags", "check_think_options", "splitting"]

OPEN = "<think>"
CLOSE = "</think>"

#: How a source treats inline think tags: ``None`` (auto: the source decides,
#: e.g. from the chat template), ``True`` (split), ``False`` (leave the text as
#: it is), or ``"opened"`` (split, and the output starts inside a block the
#: template opened).
ThinkTags = bool | Literal["opened"] | None


def check_think_options(think_tags: object, chat_template_kwargs: object = None, *,
                        where: str) -> tuple[ThinkTags, dict[str, Any]]:
    """A source's thinking options, checked in the caller's thread: ``think_tags``
    (see :data:`ThinkTags`) and ``chat_template_kwargs`` (a dict, such as
    ``{"enable_thinking": False}``, handed to the model's chat template; None: none),
    returned as (``think_tags``, a copy of the dict). The one check every source
    that takes them uses; an error names ``where`` (the source's constructor).

    Raises :class:`ValueError` for a ``think_tags`` of another value,
    :class:`TypeError` for ``chat_template_kwargs`` that are not a mapping with
    str keys.
    """
    if not (think_tags is None or isinstance(think_tags, bool) or think_tags == "opened"):
        raise ValueError(f"{where}: think_tags must be True, False, None or 'opened', "
                         f"got {reprlib.repr(think_tags)}")
    if chat_template_kwargs is None:
        kwargs: dict[str, Any] = {}
    elif isinstance(chat_template_kwargs, Mapping) and all(
            isinstance(k, str) for k in chat_template_kwargs):
        kwargs = dict(chat_template_kwargs)
    else:
        raise TypeError(f"{where}: chat_template_kwargs must be a dict, such as "
                        f"{{'enable_thinking': False}}, got {type(chat_template_kwargs).__name__} "
                        f"{reprlib.repr(chat_template_kwargs)}")
    return think_tags, kwargs


def _is_space(text: str) -> bool:
    return not text or text.isspace()


class ThinkSplitter:
    """Split streamed text into reasoning and answer pieces (see the module docstring).

    ``feed(text)`` returns the pieces ready so far; ``flush()`` returns the
    rest at the end of the stream. One splitter serves one reply.
    """

    def __init__(self, *, start_inside: bool = False) -> None:
        self.inside = start_inside
        # text not yet decided: a possible start of a tag, or whitespace that is
        # dropped or kept depending on what follows
        self._held = ""
        # True while nothing of the current segment was emitted (its leading
        # whitespace is still being dropped)
        self._segment_start = True
        # True until the first answer text or tag: whitespace alone before a
        # first <think> is dropped, and such whitespace is held meanwhile
        self._at_start = not start_inside
        # whether the current answer segment follows a </think> (its leading
        # whitespace is dropped)
        self._after_close = False

    def feed(self, text: str) -> list[str]:
        """The pieces that ``text`` (the next piece of the stream) completes."""
        if not text:
            return []
        if "<" not in text and not self._held and not self.inside and not self._segment_start:
            return [text]  # answer text under way, no tag in sight: as it is
        out: list[str] = []
        buf = self._held + text
        self._held = ""
        while buf:
            tag = CLOSE if self.inside else OPEN
            stray = None if self.inside else CLOSE
            pos, which = _find_tag(buf, tag, stray)
            if pos < 0:
                keep = _partial_tag_suffix(buf, tag, stray)
                self._text(buf[: len(buf) - keep], buf[len(buf) - keep:], out)
                return out
            self._text(buf[:pos], "", out)
            rest = buf[pos + len(which):]
            if which == tag:
                self._switch()
                buf = rest
            else:  # a stray </think> outside a block: dropped
                buf, self._held = self._held + rest, ""
        return out

    def flush(self) -> list[str]:
        """The pieces held back, at the end of the stream."""
        text, self._held = self._held, ""
        if self.inside:
            # an unclosed block: reasoning to the end, trailing whitespace dropped
            text = text.strip() if self._segment_start else text.rstrip()
            return [Reasoning(text)] if text else []
        if self._segment_start and self._after_close:
            text = text.lstrip()
        return [text] if text else []

    # ----------------------------------------------------------------- internals
    def _text(self, body: str, tail: str, out: list[str]) -> None:
        """Emit ``body``, text of the current segment; hold ``tail`` and what must wait."""
        if self.inside:
            if self._segment_start:
                body = body.lstrip()
                self._segment_start = not body
            # trailing whitespace waits: dropped if </think> or the end follows
            stripped = body.rstrip()
            if stripped:
                out.append(Reasoning(stripped))
            self._held = body[len(stripped):] + tail
            return
        if self._segment_start and (self._after_close or self._at_start):
            if _is_space(body):
                # whitespace alone so far: wait for what follows (a tag drops it)
                self._held = body + tail
                return
            if self._after_close:
                body = body.lstrip()
            self._segment_start = self._at_start = False
        if body:
            out.append(body)
        self._held = tail

    def _switch(self) -> None:
        """A tag ended the current segment (what it held is dropped); start the other."""
        self._held = ""
        self.inside = not self.inside
        self._segment_start = True
        self._at_start = False
        self._after_close = not self.inside


def _find_tag(buf: str, tag: str, stray: str | None) -> tuple[int, str]:
    """The first of ``tag`` / ``stray`` in ``buf``: (position, which), or (-1, "")."""
    pos = buf.find(tag)
    found = tag
    if stray is not None:
        other = buf.find(stray)
        if other >= 0 and (pos < 0 or other < pos):
            pos, found = other, stray
    return pos, found if pos >= 0 else ""


def _partial_tag_suffix(buf: str, tag: str, stray: str | None) -> int:
    """Length of the longest end of ``buf`` that is a proper start of a tag."""
    best = 0
    for t in (tag, stray):
        if t is None:
            continue
        for n in range(min(len(t) - 1, len(buf)), best, -1):
            if buf.endswith(t[:n]):
                best = n
                break
    return best


def splitting(emit: Callable[[str], None], splitter: ThinkSplitter
              ) -> tuple[Callable[[str], None], Callable[[], None]]:
    """``(emit2, finish)``: ``emit2`` feeds the splitter and emits what it gives;
    ``finish()`` emits what it held at the end. Explicit :class:`Reasoning`
    pieces pass through as they are, and so do tool-call pieces (after what the
    splitter held)."""

    def emit2(piece: str) -> None:
        if isinstance(piece, ToolCallDelta):  # (the pipeline's emit takes these too)
            for part in splitter.flush():
                emit(part)
            cast(Callable[[object], None], emit)(piece)
            return
        if isinstance(piece, Reasoning):
            for part in splitter.flush():
                emit(part)
            emit(piece)
            return
        for part in splitter.feed(piece):
            emit(part)

    def finish() -> None:
        for part in splitter.flush():
            emit(part)

    return emit2, finish
