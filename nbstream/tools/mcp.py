"""Tools served by an MCP server (the Model Context Protocol), over stdio.

``McpServer("python", ["server.py"])`` starts the server as a child process on
first use (or ``with McpServer(...) as server:``), lists its tools and makes
each a :class:`~nbstream.tools.Tool` that is called like a Python tool: same
approval rules (a call asks unless ``approve=True``), same timeout, same
cards. ``ChatWidget(source, tools=[server])`` takes them all;
``server.tools()`` lists them. A call's result is what the server returned:
its text blocks, JSON (``structuredContent``), PNG / JPEG images for the view;
a result the server marks as an error is reported to the model as an error.

Threads: the official ``mcp`` client is async (anyio), so a server holds one
thread of its own (``nbstream-mcp``) running an event loop with the session;
tool calls come from the tool loop's threads and wait for their answer there
(a stop sets the call's cancel event: the wait ends at once and the request
is cancelled). :meth:`McpServer.close` ends the session, which stops the
child process (stdin closed, then terminated), and is also called when the
interpreter exits. Needs the ``mcp`` extra (``pip install "nbstream[mcp]"``).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import logging
import os
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from ..extras import require_mcp
from .results import ToolResult, bounded
from .schema import clean_schema
from .tool import DEFAULT_TIMEOUT, Approve, Tool

log = logging.getLogger("nbstream")

__all__ = ["McpError", "McpServer"]

#: how long starting a server (spawning it, the protocol's handshake, listing tools) may take
START_TIMEOUT = 30.0


class McpError(RuntimeError):
    """An MCP server could not be started or reached, or a tool call failed there."""


class McpServer:
    """An MCP server over stdio whose tools a chat may call (see the module docstring)."""

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        approve: Approve = False,
        runs_code: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        prefix: str = "",
    ) -> None:
        require_mcp()
        if not isinstance(command, str) or not command:
            raise TypeError(f"McpServer(command): the program to run, a str, got {command!r}")
        if isinstance(args, (str, bytes)) or not all(isinstance(a, str) for a in args):
            raise TypeError("McpServer(command, args): args must be a list of str")
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.approve = approve
        self.runs_code = runs_code
        self.timeout = timeout
        self.prefix = prefix
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._listed: list[Any] = []
        self._tools: list[Tool] | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> McpServer:
        """Start the server and its session (once; later calls return at once)."""
        with self._lock:
            if self._thread is None:
                self._ready.clear()
                self._error = None
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name=f"nbstream-mcp-{os.path.basename(self.command)}")
                self._thread.start()
                _running.add(self)
        if not self._ready.wait(START_TIMEOUT):
            self.close()
            raise McpError(f"MCP server {self.command!r} did not start within {START_TIMEOUT:g} s")
        if self._error is not None:
            error = self._error
            self.close()
            raise McpError(f"MCP server {self._cmdline()} could not be started: "
                           f"{type(error).__name__}: {error}") from error
        return self

    def close(self) -> None:
        """End the session and stop the server process (waits for it, a few seconds at most)."""
        with self._lock:
            thread, loop, stop = self._thread, self._loop, self._stop
            self._thread = None
        if thread is None:
            return
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop ended already
                loop.call_soon_threadsafe(stop.set)
        thread.join(15.0)
        _running.discard(self)
        self._session = None
        self._tools = None

    @property
    def running(self) -> bool:
        """Whether the session is up."""
        with self._lock:
            return self._thread is not None and self._session is not None

    def __enter__(self) -> McpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _cmdline(self) -> str:
        return " ".join([self.command, *self.args])

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:
            if not self._ready.is_set():
                self._error = exc
            else:
                log.warning("nbstream: MCP server %s ended: %s", self._cmdline(), exc)
        finally:
            self._session = None
            self._ready.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    async def _main(self) -> None:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=self.command, args=self.args, env=self.env,
                                       cwd=self.cwd)
        self._stop = asyncio.Event()
        errlog = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            listed: list[Any] = []
            cursor = None
            while True:
                page = await (session.list_tools() if cursor is None else session.list_tools(
                    params=_paginated(cursor)))
                listed += list(page.tools)
                cursor = getattr(page, "next_cursor", None) or getattr(page, "nextCursor", None)
                if not cursor:
                    break
            self._listed = listed
            self._session = session
            self._ready.set()
            await self._stop.wait()

    # ------------------------------------------------------------------ tools
    def tools(self) -> list[Tool]:
        """The server's tools (it starts the server if it is not running)."""
        self.start()
        with self._lock:
            if self._tools is None:
                self._tools = [self._tool(t) for t in self._listed]
            return list(self._tools)

    def _tool(self, listed: Any) -> Tool:
        name = str(listed.name)
        schema = getattr(listed, "input_schema", None) or getattr(listed, "inputSchema", None)
        description = str(listed.description or getattr(listed, "title", None) or name)

        def call(args: dict[str, Any], cancel: threading.Event) -> ToolResult:
            return self.call(name, args, cancel)

        return Tool.remote(f"{self.prefix}{name}", description, clean_schema(dict(schema or {})),
                           call,
                           approve=self.approve, runs_code=self.runs_code, timeout=self.timeout)

    def call(self, name: str, args: Mapping[str, Any],
             cancel: threading.Event | None = None) -> ToolResult:
        """Call the server's tool ``name`` with ``args`` (any thread; blocks until it
        answers, or ``cancel`` is set). Raises :class:`McpError` for an error result."""
        session, loop = self._session, self._loop
        if session is None or loop is None:
            raise McpError(f"MCP server {self._cmdline()} is not running")
        future = asyncio.run_coroutine_threadsafe(session.call_tool(name, dict(args)), loop)
        while True:
            try:
                result = future.result(timeout=0.1)
                break
            except concurrent.futures.TimeoutError:
                if cancel is not None and cancel.is_set():
                    future.cancel()
                    raise McpError(f"the call of {name} was cancelled") from None
                if not self.running:
                    raise McpError(f"MCP server {self._cmdline()} stopped") from None
        return _result(name, result)

    def __repr__(self) -> str:
        return f"McpServer({self._cmdline()!r}, running={self.running})"


def _paginated(cursor: str) -> Any:
    from mcp import types

    return types.PaginatedRequestParams(cursor=cursor)


def _result(name: str, result: Any) -> ToolResult:
    """An MCP ``CallToolResult`` as a tool result (an error result raises)."""
    texts: list[str] = []
    display: dict[str, str] = {}
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(str(block.text))
        elif kind == "image":
            mime = str(getattr(block, "mime_type", None) or getattr(block, "mimeType", ""))
            if mime in ("image/png", "image/jpeg"):
                display[mime] = str(block.data)
            texts.append(f"(an image, {mime})")
        else:
            texts.append(f"({kind} content)")
    structured = getattr(result, "structured_content", None)
    if structured is None:
        structured = getattr(result, "structuredContent", None)
    if not texts and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False, indent=1))
    text = "\n".join(texts)
    if getattr(result, "is_error", None) or getattr(result, "isError", None):
        raise McpError(text or f"{name} failed")
    body, cut = bounded(text)
    return ToolResult(body, display, cut)


#: servers running now: closed at exit, so no child process outlives the kernel
_running: weakref.WeakSet[McpServer] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for server in list(_running):
        with contextlib.suppress(Exception):
            server.close()
