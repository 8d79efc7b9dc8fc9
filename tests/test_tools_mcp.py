"""Tools served by an MCP server over stdio (#20): a small server the test starts
(tests/data/mcp_server.py, mcp's own server API), its tools listed and called like
Python tools in a chat, an error result reported to the model, and the server
process stopped at the end."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest
from _wait import wait_until

from nbstream import ChatWidget
from nbstream.sources import ScriptedSource, call
from nbstream.sources.base import ChatMessage
from nbstream.tools.mcp import McpError, McpServer

SERVER = Path(__file__).parent / "data" / "mcp_server.py"


@pytest.fixture(scope="module")
def server() -> Iterator[McpServer]:
    with McpServer(sys.executable, [str(SERVER)], timeout=60) as s:
        yield s
    assert not s.running


def _children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True)
            if str(SERVER) in " ".join(p.cmdline())]


def test_its_tools_are_listed_with_their_schemas(server: McpServer) -> None:
    tools = {t.name: t for t in server.tools()}
    assert set(tools) == {"add", "shout", "broken"}
    assert tools["add"].description == "Add two integers."
    assert tools["add"].parameters == {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]}
    assert tools["add"].needs_approval({"a": 1, "b": 2})  # safe by default, like any tool


def test_a_chat_calls_them_like_python_tools(server: McpServer) -> None:
    def script(messages: Sequence[ChatMessage]) -> list[Any]:
        if messages[-1]["role"] == "user":
            return [call("add", a=2, b=40), call("shout", text="hi"),
                    call("broken", reason="no luck")]
        return ["; ".join(m["content"] for m in messages if m["role"] == "tool")]

    chat = ChatWidget(ScriptedSource(script, rate=5000), tools=[server])
    reply = chat.send("?")
    wait_until(lambda: len(chat.pending_approvals) == 3, 30)
    for c in list(chat.pending_approvals):
        chat.approve(c.id)
    text = reply.wait(60)
    assert [c.state for c in reply.tool_calls] == ["done", "done", "error"]
    assert text.startswith("42; HI; Error: McpError: ")
    assert "broken" in text


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_server_process_stops_when_closed() -> None:
    before = {p.pid for p in _children()}  # (the module's server)
    s = McpServer(sys.executable, [str(SERVER)]).start()
    pids = [p.pid for p in _children() if p.pid not in before]
    assert len(pids) == 1
    s.close()
    wait_until(lambda: not any(_alive(p) for p in pids), 30)
    with pytest.raises(McpError, match="is not running"):
        s.call("add", {"a": 1, "b": 2})


def test_a_server_that_cannot_start_says_so() -> None:
    with pytest.raises(McpError, match="could not be started"):
        McpServer(sys.executable, ["-c", "import sys; sys.exit(3)"]).start()
