"""A small MCP server for the tests (stdio): started by tests/test_tools_mcp.py."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("nbstream-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@server.tool()
def broken(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ValueError(reason)


if __name__ == "__main__":
    server.run()
