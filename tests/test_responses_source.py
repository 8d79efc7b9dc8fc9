"""ResponsesSource (/v1/responses): the request it builds, the events it reads, how a reply ends.

Recorded transcripts (tests/data/transcripts, replayed by the fake server): transformers
serve (real recordings: text cut at max_output_tokens that it calls "completed", and a
function call it sends whole), OpenAI's shapes (reasoning summaries, two function calls
with argument deltas, incomplete, failed, an error event) and vLLM's (reasoning text).
Against a real server: ``transformers serve`` on the embedded SmolLM2 (``model``), the
same answer as through /v1/chat/completions, a stop that closes the stream, and a real
function call from serve's response parsing (a response template that reads part of the
greedy answer as a call: the 135M model cannot call tools by itself).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _servers import ServerProcess, start_fake_server
from _wait import wait_until

from nbstream.core.pieces import Outcome, Reasoning, ToolCallDelta
from nbstream.generation import check_generation
from nbstream.sources import Cancelled, OpenAISource, ResponsesSource, SourceError
from nbstream.sources.base import ChatMessage

pytestmark = pytest.mark.server

HI: list[ChatMessage] = [{"role": "user", "content": "Hi"}]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"tz": {"type": "string"}}}, "strict": True}}


@pytest.fixture(scope="module")
def fake() -> Iterator[ServerProcess]:
    server = start_fake_server()
    yield server
    server.stop()


def run(source: ResponsesSource, messages: list[ChatMessage] = HI,
        options: dict[str, Any] | None = None, tools: list[dict[str, Any]] | None = None,
        ) -> tuple[list[Any], Outcome]:
    pieces: list[Any] = []
    outcome = source.generate_with(messages, pieces.append, threading.Event(),
                                   options or {}, tools or [])
    return pieces, outcome


def transcript(fake: ServerProcess, name: str, **options: Any) -> ResponsesSource:
    return ResponsesSource("transcript", fake.base_url, x_transcript=name, **options)


def calls_of(pieces: list[Any]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for p in pieces:
        if isinstance(p, ToolCallDelta):
            if p.name is not None:
                assert p.index == len(calls) and p.id
                calls.append({"id": p.id, "name": p.name, "arguments": p.arguments, "n": 1})
            else:
                assert p.id is None
                calls[p.index]["arguments"] += p.arguments
                calls[p.index]["n"] += 1
    return calls


def text(pieces: list[Any]) -> tuple[str, str]:
    return ("".join(p for p in pieces if isinstance(p, Reasoning)),
            "".join(p for p in pieces if isinstance(p, str) and not isinstance(p, Reasoning)))


# ---------------------------------------------------------------- transcripts
@pytest.mark.parametrize("chunk", [0, 1, 11])
def test_openai_reasoning_summary_and_two_function_calls(fake: ServerProcess,
                                                         chunk: int) -> None:
    pieces, outcome = run(transcript(fake, "openai_responses_function_calls", x_chunk=chunk))
    reasoning, answer = text(pieces)
    # two summary parts, a blank line between them
    assert reasoning == "**Checking the weather**\n\nThe user wants Paris.\n\n**Two calls**"
    assert answer == ""
    calls = calls_of(pieces)
    assert [(c["id"], c["name"]) for c in calls] == [("call_W1", "get_weather"),
                                                     ("call_T2", "get_time")]
    # streamed by the deltas, and not sent again by .done and output_item.done
    assert calls[0]["arguments"] == '{"city":"Paris","unit":"c"}' and calls[0]["n"] == 1 + 3
    assert json.loads(calls[1]["arguments"]) == {"tz": "Europe/Paris"}
    assert outcome.finish_reason == "tool_calls"
    assert outcome.usage == {"prompt_tokens": 320, "completion_tokens": 96,
                             "cached_tokens": 128, "reasoning_tokens": 64}
    assert outcome.figures["tokens"] == 96


def test_transformers_serve_sends_a_call_whole(fake: ServerProcess) -> None:
    pieces, outcome = run(transcript(fake, "transformers_serve_responses_tool_call"))
    assert text(pieces) == ("", "Hello! ")
    assert calls_of(pieces) == [{"id": "340d0b24-5340-4e2f-bf68-437ec6720645_tool_call_0",
                                 "name": "greet",
                                 "arguments": '{"text": "can I assist you today"}', "n": 1}]
    assert outcome.finish_reason == "tool_calls"


def test_transformers_serve_says_completed_at_the_limit(fake: ServerProcess) -> None:
    source = transcript(fake, "transformers_serve_responses_at_limit")
    pieces, outcome = run(source, options={"max_new_tokens": 2})
    assert pieces == ["Hello", "!"]
    assert outcome.finish_reason == "length"  # all of max_output_tokens used
    assert outcome.usage["completion_tokens"] == 2
    _, outcome = run(source)  # no limit sent: nothing says it was cut
    assert outcome.finish_reason == "stop"


def test_incomplete_is_length(fake: ServerProcess) -> None:
    pieces, outcome = run(transcript(fake, "openai_responses_incomplete", x_chunk=5))
    assert "".join(pieces) == "Once upon a time"
    assert outcome.finish_reason == "length"
    assert outcome.usage["completion_tokens"] == 4


def test_vllm_reasoning_text_then_the_answer(fake: ServerProcess) -> None:
    pieces, outcome = run(transcript(fake, "vllm_responses_reasoning"))
    assert text(pieces) == ("User asks 2+2.", "2 + 2 = 4.")
    first_answer = next(i for i, p in enumerate(pieces) if not isinstance(p, Reasoning))
    assert all(isinstance(p, Reasoning) for p in pieces[:first_answer])
    assert outcome.finish_reason == "stop"
    assert outcome.usage == {"prompt_tokens": 70, "completion_tokens": 20, "cached_tokens": 64,
                             "reasoning_tokens": 12}


@pytest.mark.parametrize(("name", "said"), [
    ("openai_responses_failed", "the response failed after 2 pieces: server_error: The model "
                                "failed to generate a response."),
    ("openai_responses_error_event", "reported an error after 1 pieces: rate_limit_exceeded: "
                                     "Rate limit reached"),
])
def test_failures_are_clear_errors_that_keep_the_text(fake: ServerProcess, name: str,
                                                      said: str) -> None:
    pieces: list[Any] = []
    with pytest.raises(SourceError) as info:
        transcript(fake, name).generate(HI, pieces.append, threading.Event())
    assert said in str(info.value)
    assert pieces and "".join(pieces) in ("The answer", "Hi")


def test_a_stream_that_ends_without_a_terminal_event_did_not_finish(
        fake: ServerProcess) -> None:
    pieces: list[Any] = []
    with pytest.raises(SourceError, match=r"no response\.completed or response\.incomplete: "
                                          r"the answer is incomplete"):
        transcript(fake, "responses_cut").generate(HI, pieces.append, threading.Event())
    assert text(pieces) == ("User asks 2+2.", "2 + 2 = 4.")  # what came is kept


# ------------------------------------------------------------------- requests
def test_the_request_body(fake: ServerProcess) -> None:
    conversation: list[ChatMessage] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris, and the time?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "18 C"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "name": "get_time", "content": "10:00"},
    ]
    source = ResponsesSource("fake", fake.base_url, reasoning={"effort": "low"})
    pieces, outcome = run(source, conversation,
                          {"temperature": 0.2, "top_p": 0.9, "max_new_tokens": 50,
                           "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
                          [WEATHER, TIME])
    assert "".join(pieces) == "Hello, world! How are you?" and outcome.finish_reason == "stop"
    record = fake.requests()[-1]
    assert record["path"] == "/v1/responses"
    body = record["body"]
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"role": "user", "content": "Weather in Paris, and the time?"},
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "c1", "name": "get_weather",
         "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
        {"type": "function_call", "call_id": "c2", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "10:00"},
    ]
    assert body["tools"] == [
        {"type": "function", "name": "get_weather", "description": "Weather of a city",
         "parameters": WEATHER["function"]["parameters"], "strict": False},
        {"type": "function", "name": "get_time",
         "parameters": TIME["function"]["parameters"], "strict": True}]
    assert body["tool_choice"] == {"type": "function", "name": "get_time"}
    assert (body["temperature"], body["top_p"], body["max_output_tokens"]) == (0.2, 0.9, 50)
    assert body["reasoning"] == {"effort": "low"} and body["stream"] is True
    assert "stop" not in body and "messages" not in body
    # a plain question: no instructions, no tools
    run(source)
    body = fake.requests()[-1]["body"]
    assert body["input"] == [{"role": "user", "content": "Hi"}]
    assert not {"instructions", "tools", "tool_choice"} & body.keys()


def test_options_and_arguments() -> None:
    source = ResponsesSource("gpt-4.1-mini", "https://api.example.com/v1/responses",
                             max_output_tokens=100)
    assert source.url == "https://api.example.com/v1/responses"
    assert source.lane_key() == ("responses", "https://api.example.com/v1", "gpt-4.1-mini")
    assert source.supports_tools
    assert source.options_in_force({"temperature": 0}) == {"temperature": 0,
                                                          "max_new_tokens": 100}
    assert source.options_in_force({"tool_choice": "required"})["tool_choice"] == "required"
    with pytest.raises(ValueError, match="does not take 'stop'"):
        check_generation({"stop": ["\n"]}, "g", label=source.label,
                         supported=source.generation_options)
    with pytest.raises(TypeError, match="system prompt is sent as instructions"):
        ResponsesSource("m", instructions="x")
    with pytest.raises(TypeError, match="ChatWidget"):
        ResponsesSource("m", tools=[WEATHER])
    with pytest.raises(ValueError, match="base_url"):
        ResponsesSource("m", "ftp://x")


def test_stop_closes_the_stream(fake: ServerProcess) -> None:
    source = ResponsesSource("fake", fake.base_url, x_pieces=[f"w{i} " for i in range(400)],
                             x_delay=0.02)
    cancel = threading.Event()
    pieces: list[Any] = []

    def emit(piece: Any) -> None:
        pieces.append(piece)
        if len(pieces) == 3:
            cancel.set()

    with pytest.raises(Cancelled):
        source.generate(HI, emit, cancel)
    assert len(pieces) == 3
    wait_until(lambda: fake.requests()[-1]["disconnected"], timeout=10,
               message="the server saw the connection close")


def test_an_unreachable_server_is_a_clear_error() -> None:
    from _servers import free_port

    source = ResponsesSource("m", f"http://127.0.0.1:{free_port()}/v1", connect_timeout=2)
    with pytest.raises(SourceError, match=r"cannot reach m at .*is the server running"):
        source.generate(HI, lambda piece: None, threading.Event())


# --------------------------------------------------------- transformers serve
@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    from _servers import start_transformers_serve

    from nbstream.sources.transformers.default_model import default_model_path

    folder = default_model_path()
    server = start_transformers_serve(folder, tmp_path_factory.mktemp("serve") / "serve.log")
    yield server, str(folder)
    server.stop()


@pytest.mark.model
def test_transformers_serve_answers_as_through_chat_completions(
        serve: tuple[ServerProcess, str]) -> None:
    server, model = serve
    pieces, outcome = run(ResponsesSource(model, server.base_url, temperature=0),
                          [{"role": "system", "content": "Be brief."}, *HI],
                          {"max_new_tokens": 6})
    assert pieces and all(isinstance(p, str) and not isinstance(p, Reasoning) for p in pieces)
    chat: list[Any] = []
    OpenAISource(model, server.base_url, temperature=0).generate_with(
        [{"role": "system", "content": "Be brief."}, *HI], chat.append, threading.Event(),
        {"max_new_tokens": 6})
    assert "".join(pieces) == "".join(chat)  # greedy: the same answer by either API
    # SmolLM2 has no reasoning: nothing else; serve says "completed" at the limit
    assert outcome.usage["completion_tokens"] == 6 and outcome.finish_reason == "length"


@pytest.mark.model
def test_transformers_serve_takes_tool_turns_and_stops(serve: tuple[ServerProcess, str]) -> None:
    server, model = serve
    conversation: list[ChatMessage] = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "18 C"}]
    pieces, outcome = run(ResponsesSource(model, server.base_url, temperature=0), conversation,
                          {"max_new_tokens": 4}, [WEATHER])
    assert "".join(pieces).strip() and outcome.finish_reason in ("stop", "length")
    # a stop mid-answer: the stream closes, and the server answers the next request
    source = ResponsesSource(model, server.base_url, temperature=0, max_output_tokens=200)
    cancel = threading.Event()
    got: list[Any] = []

    def emit(piece: Any) -> None:
        got.append(piece)
        if len(got) == 2:
            cancel.set()

    started = time.monotonic()
    with pytest.raises(Cancelled):
        source.generate(HI, emit, cancel)
    assert len(got) == 2 and time.monotonic() - started < 60
    pieces, _ = run(ResponsesSource(model, server.base_url, temperature=0),
                    options={"max_new_tokens": 1})
    assert len(pieces) == 1


def greet_folder(root: Path) -> Path:
    """The converted SmolLM2 folder (linked) with a response template that reads
    "How ... ?" of its greedy answer as a call of ``greet`` (its arguments a JSON object
    holding the text): transformers serve's own tool-call path, on a model that cannot
    call tools by itself."""
    from nbstream.sources.transformers.default_model import default_model_path

    src = default_model_path()
    root.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name != "tokenizer_config.json":
            os.symlink(f, root / f.name)
    config = json.loads((src / "tokenizer_config.json").read_text())
    config["response_template"] = {
        "start_anchor": "<|im_start|>assistant\n",
        "defaults": {"role": "assistant"},
        "fields": {
            "tool_calls": {"open": "How", "close": "?", "repeats": True, "content": "text",
                           "transform": {"type": "function", "function": {
                               "name": "greet", "arguments": {"text": "{content}"}}}},
            "content": {"content": "text", "close_pattern": r"\s*(?:<\|im_end\|>)"},
        },
    }
    (root / "tokenizer_config.json").write_text(json.dumps(config))
    return root


@pytest.mark.model
def test_transformers_serve_emits_a_real_function_call(tmp_path: Path) -> None:
    from _servers import start_transformers_serve

    folder = greet_folder(tmp_path / "smollm2-greet")
    server = start_transformers_serve(folder, tmp_path / "serve.log")
    try:
        greet = {"type": "function", "function": {"name": "greet", "parameters": {
            "type": "object", "properties": {"text": {"type": "string"}}}}}
        for source in (ResponsesSource(str(folder), server.base_url, temperature=0),
                       OpenAISource(str(folder), server.base_url, temperature=0)):
            pieces, outcome = run(source, options={"max_new_tokens": 20}, tools=[greet])
            calls = calls_of(pieces)
            assert [c["name"] for c in calls] == ["greet"], (type(source).__name__, pieces)
            assert set(json.loads(calls[0]["arguments"])) == {"text"}
            assert text(pieces)[1].startswith("Hello")  # the content before the call
            assert outcome.finish_reason == "tool_calls"
    finally:
        server.stop()
