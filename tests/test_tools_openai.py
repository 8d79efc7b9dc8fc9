"""The agent loop on a real protocol (#20): a ChatWidget on OpenAISource, the model's
tool calls streamed by the fake server from a recorded transcript (vLLM's two parallel
calls, arguments cut anywhere), the tools run, and the next request carries the
assistant turn with its ``tool_calls`` and a ``tool`` turn per result, as the server
received it. Recorded transcripts, because no server on this machine calls tools on its
own: the real-server recordings are toolsrc's (tests/test_openai_tools.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from _servers import ServerProcess, start_fake_server

from nbstream import ChatWidget, tool
from nbstream.sources import OpenAISource

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def fake() -> Iterator[ServerProcess]:
    server = start_fake_server()
    yield server
    server.stop()


def get_weather(city: str, unit: str = "celsius") -> str:
    """Weather of a city.

    Args:
        city: the city
        unit: celsius or fahrenheit
    """
    return f"4 degrees {unit} in {city}"


def get_time(timezone: str) -> str:
    """Time in a zone.

    Args:
        timezone: an IANA zone
    """
    return f"12:00 in {timezone}"


def test_a_chat_on_openai_source_runs_the_calls_and_sends_the_results_back(
        fake: ServerProcess) -> None:
    source = OpenAISource("transcript", fake.base_url, x_transcript="vllm_parallel_tool_calls",
                          x_chunk=3)
    # the transcript calls tools every time: one round of tools, then the turn ends there
    chat = ChatWidget(source, tools=[tool(get_weather, approve=True),
                                     tool(get_time, approve=True)], max_tool_rounds=1)
    before = len(fake.requests())
    reply = chat.send("Weather in Zürich, and the time?")
    reply.wait(60)
    assert reply.finish_reason == "max_tool_rounds"
    first, second = fake.requests()[before:]
    assert [t["function"]["name"] for t in first["body"]["tools"]] == ["get_weather", "get_time"]
    sent = second["body"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert sent[1]["content"] == "Let me check both."
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in sent[1]["tool_calls"]] == [
        ("chatcmpl-tool-4f7d2a1c9b8e4e0f", "get_weather", {"city": "Zürich", "unit": "celsius"}),
        ("chatcmpl-tool-9a0b6c3d2e1f4a5b", "get_time", {"timezone": "Europe/Zurich"})]
    assert sent[2] == {"role": "tool", "tool_call_id": "chatcmpl-tool-4f7d2a1c9b8e4e0f",
                       "content": "4 degrees celsius in Zürich"}  # (the source sends no name)
    assert sent[3]["content"] == "12:00 in Europe/Zurich"
    # the first round's calls ran; the second round's were not (max_tool_rounds)
    assert [c.state for c in reply.tool_calls] == ["done", "done", "cancelled", "cancelled"]
    assert reply.stats["usage"]["prompt_tokens"] == 2 * 210  # summed over the rounds


def test_a_forced_tool_choice_holds_for_the_first_round_only(fake: ServerProcess) -> None:
    source = OpenAISource("transcript", fake.base_url, x_transcript="vllm_parallel_tool_calls")
    chat = ChatWidget(source, tools=[tool(get_weather, approve=True),
                                     tool(get_time, approve=True)], max_tool_rounds=1,
                      generation={"tool_choice": "required"})
    before = len(fake.requests())
    chat.send("Weather in Zürich, and the time?").wait(60)
    first, second = fake.requests()[before:]
    assert first["body"]["tool_choice"] == "required"
    assert second["body"]["tool_choice"] == "auto"  # else the model could never answer
