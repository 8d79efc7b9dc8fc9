"""OpenAISource and tools: the request it sends, the tool-call deltas it reads.

Recorded transcripts (tests/data/transcripts, replayed by the fake server): two real
servers emitting tool calls for the embedded SmolLM2 (llama-cpp-python with a named
tool_choice: id and name repeated on every chunk; transformers serve with a response
template: a whole call in one delta, no [DONE]), vLLM's hermes parser (two parallel calls,
arguments cut anywhere), and a synthetic stream with interleaved indexes. The fake server
records each request, so the shapes sent (tools, tool_choice, assistant tool_calls, tool
turns) are checked as the server received them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _servers import ServerProcess, start_fake_server

from nbstream.core.pieces import Outcome, Reasoning, ToolCallDelta
from nbstream.sources import OpenAISource, SourceError
from nbstream.sources.base import ChatMessage

pytestmark = pytest.mark.server

ASK: list[ChatMessage] = [{"role": "user", "content": "Weather in Zürich, and the time?"}]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Time in a zone",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}}}


@pytest.fixture(scope="module")
def fake() -> Iterator[ServerProcess]:
    server = start_fake_server()
    yield server
    server.stop()


def run(source: OpenAISource, messages: list[ChatMessage] = ASK,
        options: dict[str, Any] | None = None, tools: list[dict[str, Any]] | None = None
        ) -> tuple[list[Any], Outcome]:
    pieces: list[Any] = []
    outcome = source.generate_with(messages, pieces.append, threading.Event(),
                                   options or {}, [WEATHER, TIME] if tools is None else tools)
    return pieces, outcome


def calls_of(pieces: list[Any]) -> list[dict[str, Any]]:
    """The calls the pieces make, checking the contract on the way."""
    calls: list[dict[str, Any]] = []
    for p in pieces:
        if not isinstance(p, ToolCallDelta):
            continue
        if p.name is not None:
            assert p.index == len(calls) and p.id
            calls.append({"id": p.id, "name": p.name, "arguments": p.arguments, "n": 1})
        else:
            assert p.id is None and p.index < len(calls)
            calls[p.index]["arguments"] += p.arguments
            calls[p.index]["n"] += 1
    return calls


def transcript(fake: ServerProcess, name: str, **options: Any) -> OpenAISource:
    return OpenAISource("transcript", fake.base_url, x_transcript=name, **options)


@pytest.mark.parametrize("chunk", [0, 1, 9])
def test_vllm_parallel_calls_with_arguments_cut_anywhere(fake: ServerProcess,
                                                         chunk: int) -> None:
    pieces, outcome = run(transcript(fake, "vllm_parallel_tool_calls", x_chunk=chunk))
    answer = "".join(p for p in pieces if isinstance(p, str))
    assert answer == "Let me check both."
    calls = calls_of(pieces)
    assert [(c["id"], c["name"]) for c in calls] == [
        ("chatcmpl-tool-4f7d2a1c9b8e4e0f", "get_weather"),
        ("chatcmpl-tool-9a0b6c3d2e1f4a5b", "get_time")]
    assert json.loads(calls[0]["arguments"]) == {"city": "Zürich", "unit": "celsius"}
    assert json.loads(calls[1]["arguments"]) == {"timezone": "Europe/Zurich"}
    assert calls[0]["n"] == 6  # streamed piece by piece, not joined at the end
    # the content came before the first call
    assert isinstance(pieces[0], str) and isinstance(pieces[-1], ToolCallDelta)
    assert outcome.finish_reason == "tool_calls"
    assert outcome.usage == {"prompt_tokens": 210, "completion_tokens": 52}


def test_interleaved_indexes_late_names_and_repeats(fake: ServerProcess) -> None:
    pieces, outcome = run(transcript(fake, "interleaved_tool_calls"))
    assert pieces[0] == Reasoning("Two lookups.")
    calls = calls_of(pieces)
    assert [(c["id"], c["name"]) for c in calls] == [("call_a", "get_weather"),
                                                     ("call_b", "search")]
    assert json.loads(calls[0]["arguments"]) == {"city": "Oslo"}
    assert json.loads(calls[1]["arguments"]) == {"q": "fjords"}
    # call_b's first argument piece came before its name: held, then sent with it
    first_b = next(p for p in pieces if isinstance(p, ToolCallDelta) and p.index == 1)
    assert first_b.name == "search" and first_b.arguments == '{"q": "fjords"}'
    # the server said "stop" after calling tools: the reply ends with its calls
    assert outcome.finish_reason == "tool_calls"
    assert outcome.figures["server_finish_reason"] == "stop"


def test_llama_cpp_python_repeats_the_id_and_name_on_every_chunk(fake: ServerProcess) -> None:
    pieces, outcome = run(transcript(fake, "llama_cpp_python_named_tool_choice", x_chunk=7))
    calls = calls_of(pieces)
    assert len(calls) == 1 and calls[0]["name"] == "get_weather"
    assert calls[0]["id"].startswith("call__0_get_weather_cmpl-")
    # its legacy function_call beside tool_calls is not read twice
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    assert not any(isinstance(p, str) for p in pieces)
    assert outcome.finish_reason == "tool_calls"


def test_transformers_serve_sends_a_whole_call_after_the_content(fake: ServerProcess) -> None:
    pieces, outcome = run(transcript(fake, "transformers_serve_tool_call"))
    assert pieces[:3] == ["Hello", "!", " "]
    calls = calls_of(pieces)
    assert calls == [{"id": "b6586226-40cb-4211-b606-b95910666545_tool_call_0",
                      "name": "greet", "arguments": '{"text": "can I assist you today"}',
                      "n": 1}]
    assert outcome.finish_reason == "tool_calls"  # without [DONE]: the body ended
    assert outcome.usage == {"prompt_tokens": 31, "completion_tokens": 10}


def test_a_server_id_the_conversation_already_has_is_replaced(fake: ServerProcess) -> None:
    earlier: list[ChatMessage] = [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Bern"}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "name": "get_weather", "content": "9 C"}]
    pieces, _ = run(transcript(fake, "interleaved_tool_calls"), earlier)
    ids = [c["id"] for c in calls_of(pieces)]
    assert ids[0] != "call_a" and ids[0].startswith("call_") and ids[1] == "call_b"


def test_the_request_carries_tools_choice_and_the_tool_turns(fake: ServerProcess) -> None:
    conversation: list[ChatMessage] = [
        {"role": "system", "content": "Be brief."},
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}},
            {"id": "c2", "type": "function",
             "function": {"name": "get_time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "9 C"},
        {"role": "tool", "tool_call_id": "c2", "name": "get_time", "content": "10:00"}]
    named = {"type": "function", "function": {"name": "get_time"}}
    run(OpenAISource("fake", fake.base_url), conversation, {"tool_choice": named})
    body = fake.requests()[-1]["body"]
    assert body["tools"] == [WEATHER, TIME]
    assert body["tool_choice"] == named
    assert body["messages"][2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}},
        {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}
    # a tool turn: its call's id and the result (OpenAI's API has no name field there)
    assert body["messages"][3] == {"role": "tool", "content": "9 C", "tool_call_id": "c1"}
    assert body["messages"][4] == {"role": "tool", "content": "10:00", "tool_call_id": "c2"}
    # no tools: neither field is sent, and a plain conversation is as before
    run(OpenAISource("fake", fake.base_url), ASK, tools=[])
    body = fake.requests()[-1]["body"]
    assert "tools" not in body and "tool_choice" not in body
    assert body["messages"] == [{"role": "user", "content": ASK[0]["content"]}]


def test_tool_choice_words_and_request_options(fake: ServerProcess) -> None:
    source = OpenAISource("fake", fake.base_url, tool_choice="required", parallel_tool_calls=False)
    run(source)
    body = fake.requests()[-1]["body"]
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    run(source, options={"tool_choice": "none"})  # the reply's own wins
    assert fake.requests()[-1]["body"]["tool_choice"] == "none"
    run(source, tools=[])  # a choice with no tools is not sent (servers refuse it)
    assert "tool_choice" not in fake.requests()[-1]["body"]
    assert source.options_in_force({"tool_choice": "auto"})["tool_choice"] == "auto"
    assert source.options_in_force({})["tool_choice"] == "required"


def test_a_bad_tool_choice_fails_before_any_request(fake: ServerProcess) -> None:
    source = OpenAISource("fake", fake.base_url)
    before = len(fake.requests())
    with pytest.raises(ValueError, match="'search', which is not among the tools"):
        run(source, options={"tool_choice": {"type": "function", "function": {"name": "search"}}})
    with pytest.raises(ValueError, match="needs tools"):
        run(source, options={"tool_choice": "required"}, tools=[])
    assert len(fake.requests()) == before


def test_tools_are_the_widgets_not_a_source_option() -> None:
    with pytest.raises(TypeError, match="ChatWidget"):
        OpenAISource("m", tools=[WEATHER])
    assert OpenAISource("m").supports_tools
    assert "tool_choice" in OpenAISource.generation_options


def test_a_call_without_a_name_is_a_source_error(fake: ServerProcess) -> None:
    with pytest.raises(SourceError, match="without a name"):
        run(transcript(fake, "nameless_tool_call"))
