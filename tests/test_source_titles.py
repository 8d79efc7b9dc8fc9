"""What a widget's header names: something a person named, or nothing.

The header shows the widget's ``title`` and its source's ``label``. A function's
name is a name a person chose (``def answer``); ``<lambda>``, ``<genexpr>`` or
``list`` are not, and a header saying them tells the reader nothing. Errors and
reprs still say what they are about.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Sequence

import pytest

from nbstream import ChatWidget, Compare, StreamView
from nbstream.sources import IteratorSource, ScriptedSource
from nbstream.sources.base import ChatMessage, source_name
from nbstream.sources.iterator import given_name


def answer(messages: Sequence[ChatMessage]) -> Iterator[str]:
    yield "Paris."


def with_style(messages: Sequence[ChatMessage], style: str) -> Iterator[str]:
    yield style


class Model:
    """A callable object of one's own, as a model wrapper would be."""

    def __call__(self, messages: Sequence[ChatMessage]) -> list[str]:
        return ["ok"]


def test_a_named_function_names_the_source() -> None:
    assert IteratorSource(answer).label == "answer"
    assert IteratorSource(functools.partial(with_style, style="terse")).label == "with_style"
    assert IteratorSource(Model()).label == "Model"
    assert ChatWidget(IteratorSource(answer)).source_label == "answer"


def test_what_nobody_named_shows_no_name() -> None:
    unnamed = [
        lambda m: ["x"],
        functools.partial(lambda m, k: ["x"], k=1),
        functools.partial(functools.partial(lambda m, a, b: ["x"], a=1), b=2),
    ]
    for fn in unnamed:
        src = IteratorSource(fn)
        assert src.label == "", fn
        assert ChatWidget(src).source_label == ""
    assert given_name(x for x in "ab") == ""
    assert given_name(["a", "b"]) == "" and given_name(iter("ab")) == ""


def test_label_given_outright_wins_and_empty_means_none() -> None:
    assert IteratorSource(lambda m: ["x"], label="a thinking model").label == "a thinking model"
    assert IteratorSource(answer, label="").label == ""
    with pytest.raises(TypeError, match=r"IteratorSource\(label=...\) must be a str, got int"):
        IteratorSource(answer, label=3)  # type: ignore[arg-type]


def test_stream_names_a_generator_by_its_function_only() -> None:
    def countdown() -> Iterator[str]:
        yield from ["3 ", "2 ", "1"]

    named = StreamView(countdown())
    assert named.source_label == "countdown"
    assert named.wait(5) == "3 2 1"
    anonymous = StreamView(x for x in ["a", "b"])
    assert anonymous.source_label == ""
    assert anonymous.wait(5) == "ab"
    listed = StreamView(["a", "b"])
    assert listed.source_label == "" and listed.wait(5) == "ab"
    # the repr still says what was streamed
    assert repr(anonymous) == "StreamView(source=IteratorSource(generator))"
    assert repr(listed) == "StreamView(source=IteratorSource(list))"


def test_compare_panes_of_unnamed_sources() -> None:
    c = Compare([IteratorSource(lambda m: ["a"]), IteratorSource(lambda m: ["b"])])
    # no "<lambda> #1": the view calls them "Pane 1", "Pane 2"; the header names nothing
    assert c.labels == ["", ""] and c.panes == [{"label": ""}, {"label": ""}]
    assert c.source_label == ""
    named = Compare([IteratorSource(answer), ScriptedSource("x")])
    assert named.source_label == "answer vs ScriptedSource"


def test_errors_still_name_an_unnamed_source() -> None:
    src = IteratorSource(lambda m: 42)  # type: ignore[arg-type,return-value]
    assert repr(src) == "IteratorSource(<lambda>)"
    assert source_name(src) == "IteratorSource"
    with pytest.raises(TypeError, match=r"IteratorSource function '<lambda>' returned int"):
        src.generate([{"role": "user", "content": "hi"}], lambda piece: None, threading.Event())
    with pytest.raises(ValueError, match=r"^IteratorSource takes no generation options"):
        src.generate_with([], lambda piece: None, threading.Event(), {"temperature": 0.1})
    chat = ChatWidget(src)
    with pytest.raises(ValueError, match=r"IteratorSource does not take 'temperature'"):
        chat.generation = {"temperature": 0.1}
