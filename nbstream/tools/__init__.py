"""Tools: Python functions a model may call from a chat (see docs/tools.md).

``ChatWidget(source, tools=[get_weather])``: each function becomes a :class:`Tool`
(its JSON Schema from its signature, type hints and docstring: :mod:`.schema`);
the model's calls stream into the reply as parts (:class:`ToolCall`), run once a
person approved them (safe by default: a tool asks unless ``approve=True``),
and their results go back to the model until it answers. :class:`McpServer`
brings the tools of an MCP server (stdio). The loop itself is the widget side's
(``nbstream/widgets/toolturn.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .calls import FINAL_TOOL_STATES, ToolCall, ToolState
from .results import ToolResult
from .schema import ToolDefinitionError
from .tool import DEFAULT_TIMEOUT, Tool, ToolArgumentsError, tool

if TYPE_CHECKING:
    from .mcp import McpServer

__all__ = ["DEFAULT_TIMEOUT", "FINAL_TOOL_STATES", "McpServer", "Tool", "ToolArgumentsError",
           "ToolCall", "ToolDefinitionError", "ToolResult", "ToolState", "tool"]


def __getattr__(name: str) -> Any:
    if name == "McpServer":  # imports nothing of mcp until used
        from .mcp import McpServer

        return McpServer
    raise AttributeError(name)
