"""The shared streaming splitter of inline <think>…</think> (nbstream/sources/think.py)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbstream.core.pieces import Reasoning
from nbstream.sources.think import ThinkSplitter, splitting


def parts(pieces: list[str], *, start_inside: bool = False) -> list[tuple[str, str]]:
    """The (part type, text) runs that ``pieces`` give, consecutive pieces of one type merged."""
    splitter = ThinkSplitter(start_inside=start_inside)
    out: list[str] = []
    for piece in pieces:
        out += splitter.feed(piece)
    out += splitter.flush()
    assert all(out), "no empty pieces"
    runs: list[tuple[str, str]] = []
    for piece in out:
        kind = "reasoning" if isinstance(piece, Reasoning) else "answer"
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + piece)
        else:
            runs.append((kind, piece))
    return runs


CASES = [
    # the usual shape: a template's newlines around the tags are dropped
    ("<think>\nLet me see.\n</think>\n\nThe answer.",
     False, [("reasoning", "Let me see."), ("answer", "The answer.")]),
    # the template opened the block: the output only closes it
    ("Let me see.\n</think>\n\nThe answer.",
     True, [("reasoning", "Let me see."), ("answer", "The answer.")]),
    # no tags at all: the text as it is, whitespace included
    ("  Plain text, <b>bold</b> and a < sign.\n", False,
     [("answer", "  Plain text, <b>bold</b> and a < sign.\n")]),
    # an unclosed block at the end (the model was cut while thinking)
    ("<think>\nStill thinking", False, [("reasoning", "Still thinking")]),
    ("Still thinking\n", True, [("reasoning", "Still thinking")]),
    # text before <think> is answer text, kept as it is
    ("Sure. <think>hmm</think> Done.", False,
     [("answer", "Sure. "), ("reasoning", "hmm"), ("answer", "Done.")]),
    # whitespace alone before the first <think> is dropped
    ("\n\n<think>a</think>b", False, [("reasoning", "a"), ("answer", "b")]),
    # an empty block (Qwen3 with enable_thinking=False writes one)
    ("<think>\n\n</think>\n\nHi", False, [("answer", "Hi")]),
    # a <think> inside a block is text; a stray </think> outside one is dropped
    ("<think>a <think> b</think>c", False, [("reasoning", "a <think> b"), ("answer", "c")]),
    ("a</think>b", False, [("answer", "ab")]),
    # two blocks (interleaved thinking)
    ("<think>one</think>A<think>two</think>B", False,
     [("reasoning", "one"), ("answer", "A"), ("reasoning", "two"), ("answer", "B")]),
    # inner whitespace is kept
    ("<think>a\n\nb</think>\n x \n", False, [("reasoning", "a\n\nb"), ("answer", "x \n")]),
    # something that looks like the start of a tag at the end is text
    ("<think>a</think>b <thi", False, [("reasoning", "a"), ("answer", "b <thi")]),
    ("<think>a </thin", False, [("reasoning", "a </thin")]),
]


@pytest.mark.parametrize(("text", "inside", "expected"), CASES)
def test_whole_text(text: str, inside: bool, expected: list[tuple[str, str]]) -> None:
    assert parts([text], start_inside=inside) == expected


@pytest.mark.parametrize(("text", "inside", "expected"), CASES)
def test_one_character_at_a_time(text: str, inside: bool,
                                 expected: list[tuple[str, str]]) -> None:
    assert parts(list(text), start_inside=inside) == expected


def test_tags_cut_at_every_position() -> None:
    text = "<think>\nx\n</think>\n\ny"
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1):
            pieces = [p for p in (text[:i], text[i:j], text[j:]) if p]
            assert parts(pieces) == [("reasoning", "x"), ("answer", "y")], pieces


def test_text_without_a_tag_start_passes_through_piece_for_piece() -> None:
    splitter = ThinkSplitter()
    for piece in ["Hello", ",", " world", "!", " 3 > 2"]:
        assert splitter.feed(piece) == [piece]
    assert splitter.flush() == []


def test_a_possible_tag_start_is_held_until_the_next_piece() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("a <") == ["a "]
    assert splitter.feed("b") == ["<b"]
    assert splitter.feed("<th") == []
    assert splitter.flush() == ["<th"]


def test_splitting_emit_passes_explicit_reasoning_through() -> None:
    got: list[str] = []
    emit, finish = splitting(got.append, ThinkSplitter())
    emit("<think>a")
    emit(Reasoning("b"))
    emit("</think>c")
    finish()
    assert got == [Reasoning("a"), Reasoning("b"), "c"]
    assert [type(p) for p in got] == [Reasoning, Reasoning, str]


# --- property: any split gives the same parts as the whole ---------------------------

_ALPHABET = st.sampled_from(["<think>", "</think>", "<", ">", "/", "t", "h", "think", "\n",
                             " ", "a", "b", "é", "😀", "<thi", "nk>", "</"])
_DOCUMENTS = st.lists(_ALPHABET, max_size=30).map("".join)


@st.composite
def _split(draw: st.DrawFn) -> tuple[str, list[str], bool]:
    text = draw(_DOCUMENTS)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    return text, pieces, draw(st.booleans())


@settings(max_examples=400, deadline=None)
@given(_split())
def test_any_split_gives_the_same_parts_as_the_whole(case: tuple[str, list[str], bool]) -> None:
    text, pieces, inside = case
    assert parts(pieces, start_inside=inside) == parts([text], start_inside=inside)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="<"), max_size=40))
def test_text_without_tags_is_unchanged(text: str) -> None:
    expected = [("answer", text)] if text else []
    assert parts([text]) == expected
    assert parts(list(text)) == expected
