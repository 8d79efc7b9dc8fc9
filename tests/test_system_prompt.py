"""A system prompt you can see and generation options per reply (issue 13, item 5).

``chat.system_prompt`` (a synced trait, also edited in the view through a
``system_prompt`` command) applies to the questions asked after it is set; a
reply already asked keeps the one it was asked with. ``chat.generation``
reaches the source of each new reply (``Source.generate_with``), is checked
at once with errors naming the key, and each reply's meta carries the options
in force (what the view shows on hover).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from _wait import wait_until
from _wire import send_from_view

from nbstream import ChatWidget
from nbstream.generation import GENERATION_OPTIONS, GenerationOptions, check_generation
from nbstream.sources import ScriptedSource
from nbstream.sources.base import ChatMessage, Emit, Source
from nbstream.widgets.wire import reply_meta


class Recording(Source):
    """Records what each reply was asked with; a reply waits for ``gate`` (set by
    default) before it answers, so a test can hold one while it changes things."""

    generation_options: ClassVar[frozenset[str]] = frozenset(GENERATION_OPTIONS)

    def __init__(self) -> None:
        self.calls: list[tuple[list[ChatMessage], dict[str, Any]]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> None:
        self.generate_with(messages, emit, cancel, {})

    def generate_with(self, messages: Sequence[ChatMessage], emit: Emit,
                      cancel: threading.Event, options: GenerationOptions) -> None:
        self.calls.append((list(messages), dict(options)))
        self.started.set()
        self.gate.wait(60)
        emit(f"answer {len(self.calls)}")

    def options_in_force(self, options: GenerationOptions) -> dict[str, Any]:
        return {"max_new_tokens": 64, **options}


def system_of(messages: list[ChatMessage]) -> str | None:
    return messages[0]["content"] if messages and messages[0]["role"] == "system" else None


def test_a_new_system_prompt_applies_to_the_next_question_only() -> None:
    src = Recording()
    chat = ChatWidget(src, system_prompt="You are terse.")
    src.gate.clear()
    first = chat.send("one")
    wait_until(src.started.is_set)
    queued = chat.send("two")  # asked before the change: keeps the old prompt
    chat.system_prompt = "You are a pirate."  # while the first runs
    third = chat.send("three")
    src.gate.set()
    for r in (first, queued, third):
        r.wait(30)
    assert [system_of(m) for m, _ in src.calls] == [
        "You are terse.", "You are terse.", "You are a pirate."]
    # the history after the system turn is unchanged by it
    assert [m["content"] for m in src.calls[2][0][1:]] == [
        "one", "answer 1", "two", "answer 2", "three"]


def test_no_system_prompt_sends_no_system_turn() -> None:
    src = Recording()
    chat = ChatWidget(src, system_prompt="x")
    chat.system_prompt = None
    chat.send("a").wait(30)
    chat.system_prompt = ""
    chat.send("b").wait(30)
    assert [system_of(m) for m, _ in src.calls] == [None, None]


def test_system_prompt_is_synced_state() -> None:
    chat = ChatWidget(ScriptedSource("a"), system_prompt="Be brief.")
    assert chat.get_state("system_prompt") == {"system_prompt": "Be brief."}
    assert ChatWidget(ScriptedSource("a")).get_state("system_prompt") == {"system_prompt": None}


def test_the_views_edit_sets_the_system_prompt() -> None:
    src = Recording()
    chat = ChatWidget(src)
    send_from_view(chat, {"kind": "system_prompt", "text": "Answer in French."})
    assert chat.system_prompt == "Answer in French."
    chat.send("hi").wait(30)
    assert system_of(src.calls[0][0]) == "Answer in French."
    send_from_view(chat, {"kind": "system_prompt", "text": "  \n"})  # cleared
    assert chat.system_prompt is None


@pytest.mark.parametrize(("content", "reason"), [
    ({"kind": "system_prompt"}, "system_prompt: Object missing required field `text`"),
    ({"kind": "system_prompt", "text": 7}, "system_prompt: Expected `str`, got `int`"),
    ({"kind": "system_prompt", "text": ["a"]}, "system_prompt: Expected `str`, got `array`"),
    ({"kind": "system_prompt", "text": "x" * 1_000_001},
     "system_prompt: Expected `str` of length <= 1000000"),
])
def test_a_hostile_system_prompt_edit_is_ignored_and_logged(
        content: dict[str, Any], reason: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="nbstream")
    chat = ChatWidget(ScriptedSource("a"), system_prompt="kept")
    for _ in range(2):
        send_from_view(chat, content)
    assert chat.system_prompt == "kept"
    logged = [r for r in caplog.records if "ignored a view message" in r.getMessage()]
    assert len(logged) == 1 and reason in logged[0].getMessage()


def test_a_bad_system_prompt_raises_naming_it() -> None:
    chat = ChatWidget(ScriptedSource("a"))
    with pytest.raises(TypeError, match=r"ChatWidget\.system_prompt must be a str or None, "
                                        r"got int 5"):
        chat.system_prompt = 5
    with pytest.raises(TypeError, match=r"ChatWidget\(system_prompt=\.\.\.\)"):
        ChatWidget(ScriptedSource("a"), system_prompt=b"bytes")  # type: ignore[arg-type]
    assert chat.system_prompt is None


def test_generation_options_reach_the_source_for_each_new_reply() -> None:
    src = Recording()
    chat = ChatWidget(src, generation={"temperature": 0.2, "max_tokens": 200})
    assert chat.generation == {"temperature": 0.2, "max_new_tokens": 200}
    src.gate.clear()
    first = chat.send("one")
    wait_until(src.started.is_set)
    chat.generation = {"top_p": 0.9, "stop": "END"}  # the running reply keeps its own
    second = chat.send("two")
    src.gate.set()
    first.wait(30)
    second.wait(30)
    assert [opts for _, opts in src.calls] == [
        {"temperature": 0.2, "max_new_tokens": 200}, {"top_p": 0.9, "stop": ["END"]}]
    assert first.generation == {"temperature": 0.2, "max_new_tokens": 200}
    # the meta on the wire carries the options in force (the source's default included)
    assert reply_meta(first)["options"] == {"max_new_tokens": 200, "temperature": 0.2}
    assert reply_meta(second)["options"] == {"max_new_tokens": 64, "top_p": 0.9,
                                             "stop": ["END"]}
    assert second.options == reply_meta(second)["options"]
    chat.generation = None
    assert chat.generation == {}
    chat.send("three").wait(30)
    assert src.calls[-1][1] == {}


def test_a_reply_with_no_options_in_force_sends_none() -> None:
    chat = ChatWidget(ScriptedSource("a b", rate=1000))
    reply = chat.send("x")
    reply.wait(30)
    assert "options" not in reply_meta(reply)


@pytest.mark.parametrize(("value", "error", "match"), [
    ({"temprature": 0.5}, TypeError, r"unknown option 'temprature'; did you mean 'temperature'"),
    ({"temperature": "hot"}, TypeError, r"'temperature' must be a number, got str"),
    ({"temperature": -1}, ValueError, r"'temperature' must be a finite number >= 0"),
    ({"temperature": float("nan")}, ValueError, r"'temperature'"),
    ({"temperature": True}, TypeError, r"'temperature' must be a number"),
    ({"top_p": 0}, ValueError, r"'top_p' must be in \(0, 1\]"),
    ({"top_p": 1.5}, ValueError, r"'top_p'"),
    ({"max_new_tokens": 0}, ValueError, r"'max_new_tokens' must be at least 1"),
    ({"max_tokens": 2.5}, TypeError, r"'max_new_tokens' must be an int, got float"),
    ({"max_tokens": 5, "max_new_tokens": 5}, ValueError, r"either 'max_tokens' or"),
    ({"stop": ["ok", ""]}, TypeError, r"'stop' must be a non-empty str or a list"),
    ({"stop": 3}, TypeError, r"'stop'"),
    ([("temperature", 1)], TypeError, r"must be a dict such as"),
])
def test_bad_generation_options_raise_naming_the_key(
        value: Any, error: type[Exception], match: str) -> None:
    chat = ChatWidget(Recording())
    with pytest.raises(error, match=match):
        chat.generation = value
    assert chat.generation == {}  # nothing half-applied
    with pytest.raises(error, match=match):
        ChatWidget(Recording(), generation=value)


def test_a_source_that_takes_no_options_says_so() -> None:
    chat = ChatWidget(ScriptedSource("a"))
    with pytest.raises(ValueError, match=r"ScriptedSource does not take 'temperature' "
                                         r"\(it takes: none\)"):
        chat.generation = {"temperature": 0.3}
    chat.generation = {}  # nothing to apply is fine


def test_check_generation_normalizes() -> None:
    assert check_generation({"max_tokens": 7, "stop": ("a", "b")}, "f") == {
        "max_new_tokens": 7, "stop": ["a", "b"]}
    assert check_generation(None, "f") == {}


def test_transformers_source_maps_the_options_to_generate_kwargs() -> None:
    from nbstream.sources.transformers import TransformersSource

    src = TransformersSource(max_new_tokens=100)  # nothing is loaded until prepare()
    kwargs = src._generate_kwargs({"temperature": 0.7, "top_p": 0.9, "stop": ["\n\n"]})
    assert kwargs == {"do_sample": True, "temperature": 0.7, "top_p": 0.9,
                      "max_new_tokens": 100, "stop_strings": ["\n\n"]}
    assert src._generate_kwargs({"temperature": 0, "top_p": 0.5, "max_new_tokens": 9}) == {
        "do_sample": False, "max_new_tokens": 9}  # greedy: no sampling knobs (no warning)
    assert src.options_in_force({}) == {"temperature": 0.0, "max_new_tokens": 100}
    assert src.options_in_force({"temperature": 0.7}) == {"temperature": 0.7,
                                                          "max_new_tokens": 100}


def test_openai_source_puts_the_options_in_the_request() -> None:
    pytest.importorskip("httpx")
    from nbstream.sources.openai import OpenAISource

    src = OpenAISource("m", max_completion_tokens=50, seed=1)
    body = src.request_body([{"role": "user", "content": "hi"}],
                            {"temperature": 0.2, "max_new_tokens": 20, "stop": ["x"]})
    assert body["temperature"] == 0.2 and body["max_tokens"] == 20 and body["stop"] == ["x"]
    assert "max_completion_tokens" not in body and body["seed"] == 1
    assert "temperature" not in src.request_body([{"role": "user", "content": "hi"}])
    assert src.options_in_force({}) == {"max_new_tokens": 50}
    assert src.options_in_force({"top_p": 0.5}) == {"top_p": 0.5, "max_new_tokens": 50}
