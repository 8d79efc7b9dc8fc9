"""OpenAISource on recorded server transcripts: reasoning, finish reasons, usage, timings.

The fake server (tests/_servers.py, model ``transcript``) replays the SSE bodies in
tests/data/transcripts/ byte for byte; each file says where its shape comes from.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _servers import ServerProcess, load_transcript, start_fake_server

from nbstream.core.pieces import Outcome, Reasoning, ToolCallDelta
from nbstream.sources import OpenAISource, SourceError
from nbstream.sources.base import ChatMessage

pytestmark = pytest.mark.server

MSGS: list[ChatMessage] = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def fake() -> Iterator[ServerProcess]:
    server = start_fake_server()
    yield server
    server.stop()


def run(source: OpenAISource) -> tuple[list[str], Outcome]:
    pieces: list[str] = []
    outcome = source.generate(MSGS, pieces.append, threading.Event())
    return pieces, outcome


def parts(pieces: list[str]) -> tuple[str, str]:
    """(reasoning, answer) text of ``pieces``."""
    return ("".join(p for p in pieces if isinstance(p, Reasoning)),
            "".join(p for p in pieces if not isinstance(p, Reasoning)))


def transcript(fake: ServerProcess, name: str, **options: Any) -> OpenAISource:
    return OpenAISource("transcript", fake.base_url, x_transcript=name, **options)


@pytest.mark.parametrize("chunk", [0, 1, 7])
def test_vllm_reasoning_then_answer_then_a_usage_chunk(fake: ServerProcess, chunk: int) -> None:
    # chunk: 0 one event per write; 1 and 7 bytes: events and UTF-8 cut anywhere
    pieces, outcome = run(transcript(fake, "vllm_reasoning", x_chunk=chunk))
    assert parts(pieces) == ("Okay, the user says hi.", "\n\nHello! How can I help?")
    first_answer = next(i for i, p in enumerate(pieces) if not isinstance(p, Reasoning))
    assert all(isinstance(p, Reasoning) for p in pieces[:first_answer])
    assert outcome.finish_reason == "stop"
    assert outcome.usage == {"prompt_tokens": 12, "completion_tokens": 17, "cached_tokens": 8}
    assert outcome.figures["tokens"] == 17


def test_vllm_before_0_10_says_reasoning_content_and_abort(fake: ServerProcess) -> None:
    pieces, outcome = run(transcript(fake, "vllm_abort"))
    assert parts(pieces) == ("Let me count.", "One, two")
    assert outcome.finish_reason == "abort"
    assert outcome.usage == {}


def test_an_error_event_mid_stream_is_a_source_error(fake: ServerProcess) -> None:
    pieces: list[str] = []
    with pytest.raises(SourceError, match="EngineDeadError") as info:
        transcript(fake, "vllm_error_mid_stream").generate(MSGS, pieces.append,
                                                         threading.Event())
    assert "".join(pieces) == "The answer is"  # what came before is kept
    assert "after 3 pieces" in str(info.value)


def test_ollama_v1_reasoning_with_empty_content(fake: ServerProcess) -> None:
    pieces, outcome = run(transcript(fake, "ollama_v1_reasoning"))
    assert parts(pieces) == ("Okay, a greeting.", "Hi there!")
    assert all(pieces)  # the empty contents beside the reasoning emit nothing
    assert outcome.finish_reason == "stop"
    assert outcome.usage == {"prompt_tokens": 11, "completion_tokens": 9}


def test_llama_cpp_server_timings_and_cached_tokens(fake: ServerProcess) -> None:
    pieces, outcome = run(transcript(fake, "llamacpp_server_reasoning", x_chunk=5))
    assert parts(pieces) == ("The user greets me.", "Hello!")
    assert outcome.finish_reason == "stop"
    assert outcome.usage == {"prompt_tokens": 14, "completion_tokens": 8, "cached_tokens": 3}
    timings = outcome.figures["timings"]
    assert timings["prompt_per_second"] == 511.6 and timings["predicted_per_second"] == 49.9
    assert timings["predicted_n"] == 8


@pytest.mark.parametrize("chunk", [0, 3])
def test_llama_cpp_python_pings_crlf_and_a_cut_stream(fake: ServerProcess, chunk: int) -> None:
    # [DONE] without any finish reason: the stream was cut (a second request)
    pieces, outcome = run(transcript(fake, "llama_cpp_python_cut", x_chunk=chunk))
    assert pieces == ["Once", " upon", " a", " time"]  # the pings emit nothing
    assert outcome.finish_reason is None


def test_a_stream_with_no_done_and_no_finish_reason_did_not_finish(fake: ServerProcess) -> None:
    got: list[str] = []
    with pytest.raises(SourceError, match=r"ended after 3 pieces with neither a finish reason "
                                          r"nor \[DONE\]: the answer is incomplete"):
        transcript(fake, "no_done_no_finish").generate(MSGS, got.append, threading.Event())
    assert "".join(got) == "Half an answer"  # what came is kept


def test_openai_tool_calls_and_token_details(fake: ServerProcess) -> None:
    pieces, outcome = run(transcript(fake, "openai_tool_calls_usage"))
    assert pieces == [ToolCallDelta(0, "", id="call_1", name="get_weather"),
                      ToolCallDelta(0, '{"city":"Paris"}')]
    assert outcome.finish_reason == "tool_calls"
    assert outcome.usage == {"prompt_tokens": 80, "completion_tokens": 150,
                             "reasoning_tokens": 128, "cached_tokens": 64}


@pytest.mark.parametrize("chunk", [0, 1])
def test_inline_think_opened_by_the_template(fake: ServerProcess, chunk: int) -> None:
    pieces, _ = run(transcript(fake, "r1_inline_think", think_tags="opened", x_chunk=chunk))
    assert parts(pieces) == ("Okay, so 2+2.", "2 + 2 = 4.")
    # by default only tags that open are recognised: the stray </think> is dropped
    pieces, _ = run(transcript(fake, "r1_inline_think", x_chunk=chunk))
    assert parts(pieces) == ("", "Okay, so 2+2.\n\n\n2 + 2 = 4.")
    # think_tags=False: the content as the server sent it
    pieces, _ = run(transcript(fake, "r1_inline_think", think_tags=False))
    assert "".join(pieces) == "Okay, so 2+2.\n</think>\n\n2 + 2 = 4."


def test_a_server_that_refuses_stream_options_is_asked_again_without(
        fake: ServerProcess) -> None:
    source = transcript(fake, "refuses_stream_options")
    before = len(fake.requests())
    pieces, outcome = run(source)
    assert "".join(pieces) == "Fine, thanks"
    assert outcome.finish_reason == "stop"
    bodies = [r["body"] for r in fake.requests()[before:]]
    assert ["stream_options" in b for b in bodies] == [True, False]
    # remembered: the next reply asks once, without it
    run(source)
    bodies = [r["body"] for r in fake.requests()[before:]]
    assert ["stream_options" in b for b in bodies] == [True, False, False]


def test_a_refusal_of_stream_options_the_user_set_is_an_error(fake: ServerProcess) -> None:
    source = transcript(fake, "refuses_stream_options",
                        stream_options={"include_usage": True})
    with pytest.raises(SourceError, match="HTTP 400") as info:
        run(source)
    assert info.value.status_code == 400
    assert "stream_options" in str(info.value)


def test_chat_template_kwargs_go_into_the_request(fake: ServerProcess) -> None:
    source = OpenAISource("fake", fake.base_url, chat_template_kwargs={"enable_thinking": False})
    run(source)
    body = fake.requests()[-1]["body"]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["stream_options"] == {"include_usage": True}


def test_bad_think_tags_and_template_kwargs_are_refused() -> None:
    with pytest.raises(ValueError, match="think_tags"):
        OpenAISource("m", think_tags="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="chat_template_kwargs"):
        OpenAISource("m", chat_template_kwargs=["enable_thinking"])  # type: ignore[arg-type]


def test_every_transcript_says_where_its_shape_comes_from() -> None:
    from _servers import TRANSCRIPTS

    names = sorted(p.stem for p in TRANSCRIPTS.glob("*.sse"))
    assert len(names) >= 9
    for name in names:
        notes = load_transcript(name).notes
        assert notes and len(" ".join(notes)) > 60, name
