"""OpenAISource against llama.cpp's server through llama-cpp-python, on the embedded SmolLM2 GGUF.

``python -m llama_cpp.server`` serves the GGUF file as it is (no conversion), on
127.0.0.1, started and stopped by process group. Greedy (temperature 0, a seed), so
answers repeat. Three of its behaviours used to look like normal, successful replies;
each must now end visibly: an empty event stream (prompt longer than the context), a
stream cut by a second request ([DONE] without a finish reason), max_tokens capped
silently (finish_reason "length", as it reports).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _servers import ServerProcess, llama_cpp_available, start_llama_cpp_server
from _wait import wait_until

from nbstream import ChatWidget
from nbstream.core.pieces import Outcome, ToolCallDelta
from nbstream.sources import Cancelled, OpenAISource, SourceError
from nbstream.sources.base import ChatMessage

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(not llama_cpp_available(),
                       reason="llama-cpp-python[server] is not installed (make setup installs it)"),
]

N_CTX = 512
GREEDY = {"temperature": 0, "seed": 1}
QUESTION: list[ChatMessage] = [{"role": "user", "content": "What is the capital of France?"}]
STORY: list[ChatMessage] = [
    {"role": "user", "content": "Write a long story about a robot who learns to paint."}]


def gguf() -> Path:
    from nbstream.sources.transformers.default_model import gguf_path

    return gguf_path()


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Its defaults: a second request interrupts the first."""
    log = tmp_path_factory.mktemp("llama") / "server.log"
    server = start_llama_cpp_server(gguf(), log, n_ctx=N_CTX)
    yield server
    server.stop()


def source(server: ServerProcess, **options: object) -> OpenAISource:
    return OpenAISource("smollm2", server.base_url, **{**GREEDY, **options})


def run(src: OpenAISource, messages: list[ChatMessage] = QUESTION,
        cancel: threading.Event | None = None,
        on_piece: object = None) -> tuple[list[str], Outcome]:
    pieces: list[str] = []

    def emit(piece: str) -> None:
        pieces.append(piece)
        if callable(on_piece):
            on_piece(pieces)

    outcome = src.generate(messages, emit, cancel or threading.Event())
    return pieces, outcome


def test_streams_a_greedy_answer_that_ends_with_stop(llama: ServerProcess) -> None:
    pieces, outcome = run(source(llama, max_tokens=64))
    assert len(pieces) > 3 and "Paris" in "".join(pieces)
    assert outcome.finish_reason == "stop"
    again, _ = run(source(llama, max_tokens=64))
    assert again == pieces  # greedy: the same pieces every time


def test_max_tokens_gives_length(llama: ServerProcess) -> None:
    pieces, outcome = run(source(llama, max_tokens=5), STORY)
    assert outcome.finish_reason == "length"
    assert 1 <= len(pieces) <= 5


def test_max_tokens_capped_by_the_context_is_length_too(llama: ServerProcess) -> None:
    # the server caps max_tokens at what is left of the context, silently
    # a system prompt of ~440 tokens: about 70 of the 512 are left for the story
    long_prompt: list[ChatMessage] = [
        {"role": "system", "content": "The robot painted. " * 110}, *STORY]
    pieces, outcome = run(source(llama, max_tokens=4000), long_prompt)
    assert outcome.finish_reason == "length", pieces
    assert 1 <= len(pieces) < 100


def test_a_prompt_longer_than_the_context_is_an_error(llama: ServerProcess) -> None:
    # HTTP 200 and an empty event stream: the error is only in the server's log
    too_long: list[ChatMessage] = [{"role": "user", "content": "word " * (2 * N_CTX)}]
    with pytest.raises(SourceError, match="empty stream") as info:
        run(source(llama, max_tokens=5), too_long)
    assert "longer than the model's context" in str(info.value)


def test_stop_mid_answer_closes_the_stream_and_the_server_stops(llama: ServerProcess) -> None:
    cancel = threading.Event()

    def stop_after_three(pieces: list[str]) -> None:
        if len(pieces) == 3:
            cancel.set()

    with pytest.raises(Cancelled):
        run(source(llama, max_tokens=400), STORY, cancel, stop_after_three)
    assert llama.log_path is not None
    wait_until(lambda: "Disconnected from client" in llama.log_tail(20000), 30)
    pieces, outcome = run(source(llama, max_tokens=64))  # and it serves the next one
    assert outcome.finish_reason == "stop"


def test_a_second_request_cuts_the_first_which_ends_without_a_reason(
        llama: ServerProcess) -> None:
    first = ChatWidget(source(llama, max_tokens=400))
    second = ChatWidget(source(llama, max_tokens=64))
    try:
        cut = first.send(STORY[0]["content"])
        wait_until(lambda: len(cut.text) > 20, 60)
        other = second.send(QUESTION[0]["content"])
        cut.wait(120)
        other.wait(120)
        assert cut.status == "done" and other.status == "done"
        assert cut.outcome is not None and cut.outcome.finish_reason is None
        assert cut.finish_reason is None  # shown as "the stream ended without an end marker"
        assert other.outcome is not None and other.outcome.finish_reason == "stop"
        assert other.finish_reason == "stop"
        assert "Paris" in other.text
    finally:
        first.close()
        second.close()


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
ASK_WEATHER: list[ChatMessage] = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_a_named_tool_choice_makes_a_real_streamed_call_and_the_result_goes_back(
        llama: ServerProcess) -> None:
    """llama-cpp-python constrains the answer to the tool's schema (a grammar) when
    tool_choice names it: a real server emitting tool calls for the embedded model."""
    src = source(llama)
    named = {"type": "function", "function": {"name": "get_weather"}}
    pieces: list[object] = []
    outcome = src.generate_with(ASK_WEATHER, pieces.append, threading.Event(),
                                {"max_new_tokens": 40, "tool_choice": named}, [WEATHER])
    assert outcome.finish_reason == "tool_calls"
    deltas = [p for p in pieces if isinstance(p, ToolCallDelta)]
    assert deltas == pieces  # no text: a call only
    first, rest = deltas[0], deltas[1:]
    assert first.name == "get_weather" and first.id and first.index == 0
    assert rest and all(p.name is None and p.id is None and p.index == 0 for p in rest)
    arguments = "".join(p.arguments for p in deltas)
    assert json.loads(arguments) == {"city": "Paris"}  # greedy, in the grammar
    # the call and its result sent back: the model answers in text
    conversation: list[ChatMessage] = [
        *ASK_WEATHER,
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": first.id, "type": "function",
             "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": first.id, "name": "get_weather",
         "content": "18 C and sunny"}]
    answer: list[object] = []
    outcome = src.generate_with(conversation, answer.append, threading.Event(),
                                {"max_new_tokens": 40}, [WEATHER])
    assert outcome.finish_reason in ("stop", "length")
    assert answer and all(isinstance(p, str) for p in answer)


def test_two_widgets_at_once_without_interrupts(tmp_path: Path) -> None:
    server = start_llama_cpp_server(gguf(), tmp_path / "server.log", n_ctx=N_CTX,
                                    interrupt_requests=False)
    try:
        alone, _ = run(source(server, max_tokens=24), STORY)
        widgets = [ChatWidget(source(server, max_tokens=24)) for _ in range(2)]
        try:
            replies = [w.send(STORY[0]["content"]) for w in widgets]
            for reply in replies:
                reply.wait(120)
            for reply in replies:
                assert reply.status == "done"
                assert reply.outcome is not None
                assert reply.outcome.finish_reason == "length"  # neither was cut
                # (not always the very same text: the second reuses the first's cache)
                assert reply.text.startswith("".join(alone[:3]))
        finally:
            for w in widgets:
                w.close()
    finally:
        server.stop()
