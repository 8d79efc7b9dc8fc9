"""Bad input raises a TypeError / ValueError that names the argument, in the caller's
cell (never later on a worker), and nothing is lost; a source function yielding the
wrong type fails its reply with a message saying which piece it was."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from nbstream import ChatWidget, Compare, ReplyError, StreamView, stream
from nbstream.sources import IteratorSource, ScriptedSource
from nbstream.sources.base import ChatMessage

SRC = ScriptedSource("ok", rate=1000)


# ---------------------------------------------------------------- sources
@pytest.mark.parametrize("bad", [42, "a string", b"bytes", object()])
def test_chat_widget_rejects_a_source_that_is_not_one(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"ChatWidget\(source=\.\.\.\) must be a nbstream Source"):
        ChatWidget(source=bad)


def test_a_function_as_source_is_told_to_use_iterator_source() -> None:
    with pytest.raises(TypeError, match="wrap a function in IteratorSource"):
        ChatWidget(lambda messages: ["x"])  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [42, None, "text"])
def test_stream_rejects_what_it_cannot_stream(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"source=\.\.\."):
        stream(bad)


def test_compare_names_the_bad_source_and_labels() -> None:
    with pytest.raises(TypeError, match=r"Compare\(sources=\.\.\.\): item 1 must be a nbstream"):
        Compare([SRC, 42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"Compare\(sources=\.\.\.\) must be a list"):
        Compare(SRC)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least two"):
        Compare([SRC])
    with pytest.raises(ValueError, match=r"Compare\(labels=\.\.\.\)"):
        Compare([SRC, SRC], labels=["only one"])
    with pytest.raises(TypeError, match=r"Compare\(labels=\.\.\.\)"):
        Compare([SRC, SRC], labels="ab")


# ---------------------------------------------------------------- prompts
@pytest.mark.parametrize(("bad", "error", "pattern"), [
    (None, TypeError, r"send\(text\) takes the prompt as a str, got NoneType"),
    ("", ValueError, r"send\(text\) needs a non-empty prompt"),
    ("  \n", ValueError, r"send\(text\) needs a non-empty prompt"),
    (42, TypeError, r"send\(text\) takes the prompt as a str, got int"),
    (b"hello", TypeError, r"send\(text\) takes a str, got bytes; decode it"),
    (["hello"], TypeError, r"got list"),
    ({"role": "user", "content": "hi"}, TypeError, r"got dict"),
])
def test_send_rejects_what_is_not_a_prompt(bad: Any, error: type[Exception],
                                           pattern: str) -> None:
    w = ChatWidget(SRC)
    with pytest.raises(error, match=pattern):
        w.send(bad)
    assert w.replies == [] and w.messages == []  # nothing half-started
    c = Compare([SRC, SRC])
    with pytest.raises(error, match=pattern):
        c.send(bad)
    assert c.replies == []


def test_stream_view_checks_prompt_messages_and_system_prompt() -> None:
    with pytest.raises(ValueError, match=r"StreamView\(text\) needs a non-empty prompt"):
        StreamView(SRC, "")
    with pytest.raises(TypeError, match=r"StreamView\(messages=\.\.\.\): item 0 needs a str "
                                        r"'content', got int"):
        StreamView(SRC, "hi", messages=[{"role": "user", "content": 5}])  # type: ignore[typeddict-item]
    with pytest.raises(TypeError, match=r"StreamView\(messages=\.\.\.\) must be a list"):
        StreamView(SRC, "hi", messages="hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"StreamView\(system_prompt=\.\.\.\) must be a str"):
        StreamView(SRC, "hi", system_prompt=["be brief"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ChatWidget\(system_prompt=\.\.\.\)"):
        ChatWidget(SRC, system_prompt=1)  # type: ignore[arg-type]


# ---------------------------------------------------------------- options
@pytest.mark.parametrize(("kwargs", "error", "name"), [
    ({"interval": 0}, ValueError, "interval"),
    ({"interval": -1}, ValueError, "interval"),
    ({"interval": float("nan")}, ValueError, "interval"),
    ({"interval": float("inf")}, ValueError, "interval"),
    ({"interval": "fast"}, TypeError, "interval"),
    ({"interval": True}, TypeError, "interval"),
    ({"first_token_timeout": -1}, ValueError, "first_token_timeout"),
    ({"first_token_timeout": 0}, ValueError, "first_token_timeout"),
    ({"stall_timeout": -0.5}, ValueError, "stall_timeout"),
    ({"total_timeout": -3}, ValueError, "total_timeout"),
    ({"total_timeout": "10"}, TypeError, "total_timeout"),
    ({"max_pending": 0}, ValueError, "max_pending"),
    ({"max_pending": -5}, ValueError, "max_pending"),
    ({"max_pending": 1.5}, TypeError, "max_pending"),
])
def test_bad_options_name_the_argument_in_every_widget(kwargs: dict[str, Any],
                                                       error: type[Exception], name: str) -> None:
    for make in (lambda: ChatWidget(SRC, **kwargs),
                 lambda: StreamView(SRC, "hi", **kwargs),
                 lambda: stream(["a"], **kwargs),
                 lambda: Compare([SRC, SRC], **kwargs)):
        with pytest.raises(error, match=rf"^{name} must be"):
            make()


def test_good_options_are_accepted_and_none_means_no_limit() -> None:
    w = ChatWidget(SRC, interval=0.5, first_token_timeout=None, stall_timeout=2,
                   total_timeout=60.0, max_pending=10)
    assert w.options.interval == 0.5 and w.max_pending == 10
    assert w.limits.stall == 2 and w.limits.first_piece is None and w.limits.total == 60.0


@pytest.mark.parametrize(("make", "typo", "suggestion"), [
    (lambda **k: ChatWidget(SRC, **k), "system", "system_prompt"),
    (lambda **k: ChatWidget(SRC, **k), "sytem_prompt", "system_prompt"),
    (lambda **k: ChatWidget(SRC, **k), "stall_timout", "stall_timeout"),
    (lambda **k: ChatWidget(SRC, **k), "timeout", "total_timeout"),
    (lambda **k: StreamView(SRC, "hi", **k), "mesages", "messages"),
    (lambda **k: stream(["a"], **k), "titel", "title"),
    (lambda **k: Compare([SRC, SRC], **k), "label", "labels"),
])
def test_unknown_keywords_raise_with_a_suggestion(make: Any, typo: str, suggestion: str) -> None:
    with pytest.raises(TypeError, match=re.escape(
            f"unexpected keyword argument {typo!r}; did you mean {suggestion!r}?")):
        make(**{typo: "x"})


def test_unknown_keyword_without_a_near_name_lists_what_is_accepted() -> None:
    with pytest.raises(TypeError, match=r"ChatWidget\(\) got an unexpected keyword argument "
                                        r"'banana'.*accepts: source, title, system_prompt"):
        ChatWidget(SRC, banana=[])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'layout'"):
        ChatWidget(SRC, layout=None)  # type: ignore[call-arg]


# ------------------------------------------------------- IteratorSource
def test_iterator_source_checks_its_function_at_construction() -> None:
    with pytest.raises(TypeError, match=r"IteratorSource\(fn\): fn must be a function"):
        IteratorSource(["a", "b"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"IteratorSource\(fn\): fn must take one argument"):
        IteratorSource(lambda: ["a"])  # type: ignore[arg-type,misc]
    with pytest.raises(TypeError, match=r"fn must take one argument"):
        IteratorSource(lambda a, b, c: ["a"])
    IteratorSource(lambda messages, tools: ["a"])  # two: (messages, tools) since #20
    IteratorSource(lambda messages, *, temperature=0: ["a"])  # one argument: fine
    IteratorSource(print)  # no inspectable signature problem: fine


def reply_error(fn: Any) -> str:
    w = ChatWidget(IteratorSource(fn, label="my_fn"))
    r = w.send("go")
    with pytest.raises(ReplyError) as info:
        r.wait(10)
    assert isinstance(info.value.__cause__, TypeError)
    return str(info.value.__cause__)


def test_a_function_returning_a_non_iterable_fails_its_reply_clearly() -> None:
    msg = reply_error(lambda messages: 42)
    assert msg.startswith("IteratorSource function 'my_fn' returned int 42, expected an "
                          "iterable or async iterable of str")
    assert "returned a str" in reply_error(lambda messages: "whole text")


def test_a_wrong_piece_type_is_named_with_its_number() -> None:
    def gen(_messages: Sequence[ChatMessage]) -> Iterator[Any]:
        yield "fine "
        yield "also fine "
        yield b"bytes!"

    msg = reply_error(gen)
    assert msg.startswith("IteratorSource function 'my_fn' yielded piece #3 of type bytes "
                          "(b'bytes!'); every piece must be a str")


def test_a_wrong_piece_type_from_an_async_function_too() -> None:
    async def agen(_messages: Sequence[ChatMessage]) -> Any:
        yield "fine "
        yield {"text": "a dict"}

    assert "yielded piece #2 of type dict" in reply_error(agen)


def test_text_before_a_bad_piece_is_kept() -> None:
    def gen(_messages: Sequence[ChatMessage]) -> Iterator[Any]:
        yield "kept "
        yield None

    w = ChatWidget(IteratorSource(gen))
    r = w.send("go")
    with pytest.raises(ReplyError, match="piece #2 of type NoneType"):
        r.wait(10)
    assert r.text == "kept "
