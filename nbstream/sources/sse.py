"""What the HTTP sources share: one streaming request per reply, read as server-sent events.

:class:`SSESource` is the base of :class:`~nbstream.sources.openai.OpenAISource`
(``/v1/chat/completions``) and :class:`~nbstream.sources.responses.ResponsesSource`
(``/v1/responses``). It owns the URL and credentials, the request, reading
the response as server-sent events (httpx, and httpx-sse's parser), stopping,
and turning every failure into a :class:`SourceError` a person can act on;
a subclass builds the request body (:meth:`SSESource.request_body`) and reads
the events (:meth:`SSESource._read_events`).

Threads: every HTTP reply of the process is read on one asyncio event loop,
on a daemon thread of its own (``nbstream-http``, :func:`shared_loop`, started
with the first request). :meth:`SSESource.generate_with` runs on the reply's
worker thread: it hands the request to that loop as one task and emits the
pieces the task reads, in order, through a :class:`_Relay` (so a
:meth:`Stream.put <nbstream.core.stream.Stream.put>` that waits for the pump,
backpressure, waits on the reply's own worker, never on the shared loop;
while more than :data:`RELAY_HIGH` pieces wait there, that request stops
reading until half of them were emitted, and the server is held back by TCP).
Why one loop and not one per reply: with 32 replies at 100 pieces/s each, a loop
per worker thread had 32 threads waking for each piece and contending for the
GIL with the kernel's main thread, which then waited up to 8.8 ms (4.9-15) for
its turn; with one loop, 3.9 ms (2.8-5.1), for 6 % less CPU a piece
(benchmarks/http_reading.py, side by side).

The hand-off costs a wake of the worker for most pieces (a futex and a turn of
the GIL): with 32 replies at 100 pieces/s, 9 pieces in 10 find their worker
parked, since it emits a piece in microseconds and the next comes 10 ms later.
Tried and measured side by side (benchmarks/README.md, "32 streams"): pieces
taken in batches with a wake only for a parked worker cost the same; the wakes
of one turn of the loop sent once the turn ran saved 0-20 % of the CPU a piece
(0-2 % in the recorded runs) but handed pieces over later (p50 ~3x; p95 5 -> 20
ms at load 6); neither is used. The whole hand-off is ~28 % of the CPU a piece;
saving it needs an ``emit`` that runs here while the reply's stream has room
and goes to the worker only when it would wait.

One watcher per loop (:class:`_CancelWatch`) looks at the ``cancel`` events of
all the requests in flight every :data:`_POLL` (10 ms), and only while there
are some, and cancels the task of each request whose event is set, which closes
the response and its connection at once, whether the task waits for a
connection, for the response headers or for the next bytes of a stalled stream
(a piece arriving also sees it, sooner). A ``threading.Event`` cannot call back,
so it is polled; one timer for all requests instead of one per request keeps the
wakeups at 100/s whatever the number of replies (a watcher per request at 50 ms
made 640/s with 32 replies), and the Stop reaches the socket in 0-10 ms instead
of 0-50 (benchmarks/stop_frees_server.py measures it: the median went from 25 to
5 ms). The server sees the
connection close (vLLM, TGI and ``transformers serve`` then abort the
generation). Why not a plain blocking read: a thread blocked in ``recv`` cannot
be woken from another thread by closing its socket (not on Linux), a task can
be cancelled. Each reply gets a fresh client and connection (no keep-alive
between replies; the TLS context, the costly part, is built once per source).

A ``data: [DONE]`` line ends the events (:attr:`Progress.marker` says it came);
what else says a reply ended is each subclass's own (a finish reason, a
``response.completed``): a body that ends without it did not finish (a server
that died, a dropped connection), and the subclass makes that an error that
keeps the text received. A body cut off mid-way (an incomplete chunked body) is
an error, and so is a stream with no event at all (llama-cpp-python answers a
prompt longer than its context with HTTP 200 and an empty stream; the error is
only in its log). What a broken server cannot do to us: bytes that are not
UTF-8 and a line longer than :data:`MAX_LINE_BYTES` are errors as soon as they
come (:func:`checked_text`), never a flood or a hang.

Errors become :class:`SourceError`: the server cannot be reached, an HTTP
error (status and the server's own message, trimmed), a malformed event, an
error event mid-stream, a lost connection, no data for ``timeout`` seconds.
The widget turns it into a reply error and keeps the text received before.

Nothing here keeps the API key anywhere but in the request's header: not in
``repr``, not in error messages.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import queue
import re
import ssl
import threading
import weakref
from abc import abstractmethod
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
)
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ClassVar, cast

try:
    import httpx
    from httpx_sse import EventSource, SSEError
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "OpenAISource and ResponsesSource need httpx and httpx-sse: "
        "pip install 'nbstream[openai]'"
    ) from exc

from .._version import __version__
from ..core.attachment import RASTER_TYPES
from ..core.pieces import Outcome
from .base import Cancelled, ChatMessage, Emit, Source, SourceError, ToolSchema
from .think import ThinkSplitter, ThinkTags, check_think_options
from .toolcalls import CallIds, check_tool_request

if TYPE_CHECKING:
    from ..generation import GenerationOptions, ToolChoice

__all__ = ["DEFAULT_ACCEPTS", "DEFAULT_BASE_URL", "MAX_LINE_BYTES", "BadStream", "SSESource",
           "SourceError", "checked_text"]

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
#: the attachments an HTTP source hands its server by default (#21): text, and images
#: (PNG, JPEG, WebP, GIF: ``data:`` URLs); files only where ``accepts`` names their type
DEFAULT_ACCEPTS: frozenset[str] = frozenset({"text/*", *RASTER_TYPES})
API_KEY_ENV = "OPENAI_API_KEY"
#: how often the watcher looks at the cancel events of the requests in flight (seconds)
_POLL = 0.01
#: longest server message quoted in an error, and most bytes read of an error body
_TRIM = 240
_MAX_ERROR_BODY = 64 * 1024
_TAG = re.compile(r"<[^>]*>")


class SSESource(Source):
    """A model behind an HTTP endpoint that streams server-sent events.

    ``model`` is the name the server knows the model by (``transformers
    serve`` with a local folder: the folder's path). ``api_key`` defaults to
    ``$OPENAI_API_KEY`` and is sent as a Bearer token (no header without one).
    ``timeout`` is the longest wait, in seconds, for the server's next bytes
    (the response headers, or the next piece): a stalled server becomes an
    error after it (None: wait for ever; a stop always works). Every other
    keyword goes into the request body as it is.

    ``chat_template_kwargs`` (e.g. ``{"enable_thinking": False}``) is sent as
    the request field of that name, which vLLM, SGLang, llama.cpp and
    ``transformers serve`` hand to the model's chat template. ``think_tags``:
    whether ``<think>…</think>`` written inline in the text is split out as
    reasoning: None (the default) and True split it where it appears (text
    without tags passes through as it is), ``"opened"`` when the server's
    template opened the block so the text starts inside it, False leaves the
    text as it is. Reasoning the server sends apart is always a reasoning part.

    Replies of sources of one kind with the same ``base_url`` and ``model``
    share one lane that runs ``concurrency`` of them at once (servers batch
    requests).

    Attachments (``chat.send(text, attachments=[...])``) go into the user turn
    as the API's content parts (:mod:`nbstream.sources.content_parts`): images
    as ``data:`` URLs, texts (files, tables) as text, other files as file parts.
    ``accepts`` (MIME patterns) says what the server takes: by default text and
    PNG / JPEG / WebP / GIF images (:data:`DEFAULT_ACCEPTS`); add
    ``"application/pdf"`` for a server that reads PDFs (OpenAI's), or pass
    ``{"text/*"}`` for a text-only model, so that the chat refuses an image at
    once instead of the server.
    """

    #: the path after ``base_url`` (``"/chat/completions"``)
    endpoint: ClassVar[str]
    #: request fields the source sets itself, and why (the error's hint)
    reserved: ClassVar[Mapping[str, str]]
    #: first item of :meth:`lane_key`
    lane_kind: ClassVar[str]
    #: the generation options sent as request fields: (option, field) pairs
    option_fields: ClassVar[tuple[tuple[str, str], ...]]

    supports_tools: ClassVar[bool] = True

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        *,
        timeout: float | None = 300.0,
        connect_timeout: float = 10.0,
        concurrency: int = 4,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        think_tags: ThinkTags = None,
        headers: Mapping[str, str] | None = None,
        verify: bool | str | ssl.SSLContext = True,
        label: str | None = None,
        accepts: Iterable[str] | None = None,
        **request_options: Any,
    ) -> None:
        kind = type(self).__name__
        if not isinstance(model, str) or not model:
            raise ValueError("model must be the model's name on the server (a non-empty str)")
        try:
            url = httpx.URL(base_url.rstrip("/"))
        except (httpx.InvalidURL, TypeError):
            url = httpx.URL()
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"base_url must be an http(s) URL such as {DEFAULT_BASE_URL!r}, "
                             f"got {base_url!r}")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        think_tags, template_kwargs = check_think_options(think_tags, chat_template_kwargs,
                                                          where=kind)
        if accepts is not None and (isinstance(accepts, str) or not all(
                isinstance(p, str) and "/" in p for p in accepts)):
            raise TypeError("accepts must be a collection of MIME patterns such as "
                            "{'text/*', 'image/*', 'application/pdf'}")
        self._accepts = DEFAULT_ACCEPTS if accepts is None else frozenset(accepts)
        clash = sorted(self.reserved.keys() & request_options.keys())
        if clash:
            hints = sorted({self.reserved[name] for name in clash})
            raise TypeError(f"{kind} sets {', '.join(clash)} itself; {'; '.join(hints)}")
        self.model = model
        full = str(url).rstrip("/")
        if full.endswith(self.endpoint):
            full = full[: -len(self.endpoint)]
        # what is sent, credentials in the URL (user:password@) included ...
        self._request_url = full + self.endpoint
        # ... and what is shown (repr, errors, the lane) without them
        self.base_url = str(httpx.URL(full).copy_with(userinfo=b"")) if url.userinfo else full
        self.url = self.base_url + self.endpoint
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.concurrency = concurrency
        self.chat_template_kwargs = template_kwargs
        self.think_tags: ThinkTags = think_tags
        self.request_options: dict[str, Any] = dict(request_options)
        self._extra_headers = dict(headers or {})
        self._api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._ssl_lock = threading.Lock()
        if label is None:
            # a local folder's path (transformers serve) is long: show its last part
            label = model.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] \
                if model.startswith(("/", ".", "~")) or os.path.isabs(model) else model
        self._label = label

    # ------------------------------------------------------------------ Source
    @property
    def label(self) -> str:
        return self._label

    def lane_key(self) -> Hashable:
        return (self.lane_kind, self.base_url, self.model)

    @property
    def accepts(self) -> frozenset[str]:
        """What the server is handed in attachments (see the class docstring)."""
        return self._accepts

    @abstractmethod
    def request_body(self, messages: Sequence[ChatMessage],
                     options: GenerationOptions | None = None,
                     tools: Sequence[ToolSchema] = ()) -> dict[str, Any]:
        """The JSON body sent for ``messages``, with a reply's ``options`` and ``tools``."""

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> Outcome:
        return self.generate_with(messages, emit, cancel, {})

    def generate_with(self, messages: Sequence[ChatMessage], emit: Emit,
                      cancel: threading.Event, options: GenerationOptions,
                      tools: Sequence[ToolSchema] = ()) -> Outcome:
        """Stream the reply to ``messages``: one request, read until the server
        ends it; ``cancel`` closes the connection (see the module docstring)."""
        self.check_tools(tools)
        self.check_attachments(messages)
        self.tool_choice(options, tools)  # a bad choice fails before the request
        if cancel.is_set():
            raise Cancelled()
        ids = CallIds(messages)
        return self._run(
            lambda relayed: self._attempts(messages, relayed, cancel, options, tools, ids),
            emit, cancel)

    def tool_choice(self, options: GenerationOptions | None,
                    tools: Sequence[ToolSchema]) -> ToolChoice | None:
        """The ``tool_choice`` to send for a reply (checked against its tools):
        the reply's own, else one given as a request option."""
        options = options or {}
        if "tool_choice" in options:
            return check_tool_request(tools, options["tool_choice"], self.label)
        check_tool_request(tools, None, self.label)
        return None

    def _option_fields(self, options: GenerationOptions) -> dict[str, Any]:
        """The reply's generation options as request fields (:attr:`option_fields`)."""
        return {key: options[name] for name, key in self.option_fields  # type: ignore[literal-required]
                if name in options}

    def _shown_options(self, options: GenerationOptions) -> tuple[dict[str, Any], dict[str, Any]]:
        """The reply's options in force, in the generic names, and the request fields
        they come from (the reply's over ``request_options``); ``tool_choice`` the
        reply's own, else a request option's."""
        fields = {**self.request_options, **self._option_fields(options)}
        shown = {name: fields[key] for name, key in self.option_fields
                 if fields.get(key) is not None}
        if "tool_choice" in options:
            shown["tool_choice"] = options["tool_choice"]
        elif fields.get("tool_choice") is not None:
            shown["tool_choice"] = fields["tool_choice"]
        return shown, fields

    def __repr__(self) -> str:
        shown = "".join(f", {k}={v!r}" for k, v in sorted(self.request_options.items()))
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r}{shown})"

    # --------------------------------------------------------------- internals
    async def _attempts(self, messages: Sequence[ChatMessage], emit: Emit,
                        cancel: threading.Event, options: GenerationOptions,
                        tools: Sequence[ToolSchema], ids: CallIds) -> Outcome:
        """The request (a subclass may ask again, once, when a server refuses a field)."""
        body = self.request_body(messages, options, tools)
        return await self._request(body, emit, cancel, Progress(), ids)

    @abstractmethod
    async def _read_events(self, response: httpx.Response, body: Mapping[str, Any],
                           emit: Emit, cancel: threading.Event, progress: Progress,
                           ids: CallIds) -> Outcome:
        """Read the response's events (to the request ``body``), emitting pieces;
        how it ended."""

    def _run(self, work: Callable[[Emit], Coroutine[Any, Any, Outcome]], emit: Emit,
             cancel: threading.Event) -> Outcome:
        """Run ``work(relayed_emit)`` on the shared loop and emit what it reads, here
        (the reply's worker thread), in order; its outcome once it ended."""
        loop = shared_loop()
        relay = _Relay(loop)

        async def request() -> Outcome:
            _RELAY.set(relay)  # this task's own context: _events reads it
            return await self._watch(work(relay.put), cancel)

        future = asyncio.run_coroutine_threadsafe(request(), loop)
        future.add_done_callback(lambda _: relay.close())
        try:
            for piece in relay.pieces():
                if cancel.is_set():
                    raise Cancelled()  # what was read before the stop, and not emitted yet
                emit(piece)
        except BaseException:
            # stopped, or the reply's own emit failed: the request ends with it
            future.cancel()
            raise
        return future.result()

    def _ssl_context(self) -> ssl.SSLContext:
        with self._ssl_lock:
            if self._ssl is None:
                if isinstance(self._verify, ssl.SSLContext):
                    self._ssl = self._verify
                elif self.url.startswith("http://"):
                    # never used for plain http, but httpx wants one: skip loading
                    # the CA bundle (~0.1 s); it still verifies, with no CA known
                    self._ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                else:
                    self._ssl = httpx.create_ssl_context(verify=self._verify)
            return self._ssl

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": "text/event-stream",
            "Cache-Control": "no-store",
            "User-Agent": f"nbstream/{__version__}",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        headers.update(self._extra_headers)
        return headers

    async def _watch(self, work: Coroutine[Any, Any, Outcome],
                     cancel: threading.Event) -> Outcome:
        """Run the request as a task; the loop's watcher cancels it as soon as
        ``cancel`` is set (:class:`_CancelWatch`)."""
        task = asyncio.ensure_future(work)
        watch = _CancelWatch.of(asyncio.get_running_loop())
        watch.add(task, cancel)
        try:
            await asyncio.wait({task})
        finally:
            watch.discard(task)
            if not task.done():  # this coroutine was cancelled (the worker gave up)
                task.cancel()
                await asyncio.wait({task})
        if task.cancelled() and cancel.is_set():
            raise Cancelled()  # the watcher closed the response and the connection
        return task.result()  # the request's outcome, Cancelled or SourceError

    async def _request(self, body: dict[str, Any], emit: Emit, cancel: threading.Event,
                       progress: Progress, ids: CallIds) -> Outcome:
        timeout = httpx.Timeout(self.timeout, connect=self.connect_timeout)
        try:
            async with httpx.AsyncClient(timeout=timeout, verify=self._ssl_context()) as client, \
                    client.stream("POST", self._request_url, json=body,
                                  headers=self._headers()) as response:
                progress.connected = True
                await self._check_response(response)
                outcome = await self._read_events(response, body, emit, cancel, progress, ids)
        except (Cancelled, SourceError):
            raise
        except Exception as exc:
            if cancel.is_set():
                raise Cancelled() from exc
            raise self._translate(exc, progress) from exc
        if cancel.is_set():
            raise Cancelled()
        return outcome

    async def _check_response(self, response: httpx.Response) -> None:
        status = response.status_code
        content_type = response.headers.get("content-type", "")
        if status < 400 and "text/event-stream" in content_type:
            return
        raw = await _read_some(response)
        message = _server_message(raw)
        if status >= 400:
            reason = response.reason_phrase or ""
            raise SourceError(
                f"{self.label}: HTTP {status}{' ' + reason if reason else ''} from {self.url}"
                f"{': ' + message if message else ''}",
                status_code=status, body=message or None,
            )
        raise SourceError(
            f"{self.label}: {self.url} answered {content_type or 'without a content type'}, "
            f"not a stream of server-sent events{': ' + message if message else ''}",
            status_code=status, body=message or None,
        )

    async def _events(self, response: httpx.Response, cancel: threading.Event,
                      progress: Progress) -> AsyncIterator[tuple[str, Any]]:
        """``(event name, JSON payload)`` of each event until ``[DONE]`` or the end.

        Blank events (keep-alive) are skipped; a payload that is not JSON is an
        error, except in an ``error`` event (``{"error": text}`` then). Raises
        :class:`Cancelled` once ``cancel`` is set, and a clear error for a
        stream without any event.
        """
        body = cast(httpx.Response, CheckedBody(response))  # what EventSource reads of it
        relay = _RELAY.get(None)
        async for event in EventSource(body).aiter_sse():
            if cancel.is_set():
                raise Cancelled()
            if relay is not None:
                await relay.room()  # the worker is behind: read on once it caught up
            progress.events += 1
            data = event.data
            if data.strip() == "[DONE]":
                progress.marker = True
                break
            if not data.strip():
                continue
            try:
                payload = json.loads(data)
            except json.JSONDecodeError as exc:
                if event.event == "error":  # an error event in plain text
                    payload = {"error": data}
                else:
                    raise SourceError(
                        f"{self.label}: malformed JSON in event {progress.events} from "
                        f"{self.url} ({exc.msg}): {trim(data)!r}"
                    ) from None
            yield event.event, payload
        if cancel.is_set():
            raise Cancelled()
        if not progress.events:
            raise SourceError(
                f"{self.label}: {self.url} answered with an empty stream (no event at all). "
                "The server failed before generating; llama.cpp's Python server does this "
                "when the prompt is longer than the model's context. See the server's log."
            )

    def _splitter(self) -> ThinkSplitter | None:
        if self.think_tags is False:
            return None
        return ThinkSplitter(start_inside=self.think_tags == "opened")

    def _translate(self, exc: Exception, progress: Progress) -> SourceError:
        """A readable SourceError for an exception of httpx or httpx-sse."""
        where = f"{self.label} at {self.base_url}"
        detail = str(exc) or type(exc).__name__
        if isinstance(exc, httpx.ConnectTimeout):
            return SourceError(f"cannot reach {where}: no connection after "
                               f"{self.connect_timeout:g} s")
        if isinstance(exc, httpx.ConnectError):
            return SourceError(f"cannot reach {where}: {_os_error(exc) or detail} "
                               "(is the server running?)")
        if isinstance(exc, httpx.TimeoutException):
            what = "after the request" if not progress.events else \
                f"after {progress.pieces} pieces"
            return SourceError(f"{where} sent nothing for {self.timeout:g} s {what}")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
            return SourceError(f"the connection to {where} was lost after {progress.pieces} "
                               f"pieces (did the server stop?): {detail}")
        if isinstance(exc, (SSEError, BadStream)):
            return SourceError(f"{where}: {detail} (after {progress.pieces} pieces)")
        if isinstance(exc, httpx.HTTPError):
            return SourceError(f"request to {where} failed: {type(exc).__name__}: {detail}")
        return SourceError(f"{where}: {type(exc).__name__}: {detail}")


#: pieces waiting for a reply's worker thread before its request stops reading
RELAY_HIGH = 256

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_loop_pid = 0


def shared_loop() -> asyncio.AbstractEventLoop:
    """The event loop every HTTP reply of this process is read on, running on a
    daemon thread (``nbstream-http``); started on first use (again in a forked
    child, or should the thread have died)."""
    global _loop, _loop_thread, _loop_pid
    with _loop_lock:
        if (_loop is None or _loop_thread is None or not _loop_thread.is_alive()
                or _loop_pid != os.getpid()):
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="nbstream-http",
                                      daemon=True)
            thread.start()
            _loop, _loop_thread, _loop_pid = loop, thread, os.getpid()
        return _loop


class _CancelWatch:
    """The cancel events of the requests in flight on one loop, looked at every
    :data:`_POLL` while there is at least one (no timer while none is); the
    task of each request whose event is set is cancelled. Loop thread only."""

    __slots__ = ("__weakref__", "_handle", "_loop", "_tasks")
    _of: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _CancelWatch]] = \
        weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._tasks: dict[asyncio.Future[Any], threading.Event] = {}
        self._handle: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> _CancelWatch:
        watch = cls._of.get(loop)
        if watch is None:
            watch = cls._of[loop] = cls(loop)
        return watch

    @property
    def watching(self) -> int:
        """How many requests are watched (0: no timer is scheduled)."""
        return len(self._tasks)

    def add(self, task: asyncio.Future[Any], cancel: threading.Event) -> None:
        self._tasks[task] = cancel
        if self._handle is None:
            self._handle = self._loop.call_later(_POLL, self._tick)

    def discard(self, task: asyncio.Future[Any]) -> None:
        self._tasks.pop(task, None)
        if not self._tasks and self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        for task, cancel in list(self._tasks.items()):
            if cancel.is_set() and not task.done():
                task.cancel()  # closes the response and the connection
        self._handle = self._loop.call_later(_POLL, self._tick) if self._tasks else None


#: the relay of the request a task runs (set in that task's own context)
_RELAY: ContextVar[_Relay] = ContextVar("nbstream_sse_relay")

_END = object()


class _Relay:
    """Pieces a request read on the shared loop, on their way to the reply's
    worker thread, which emits them. :meth:`put` and :meth:`room` run on the
    loop's thread, :meth:`pieces` on the worker; ``_waiting`` and ``_paused``
    are shared, under ``_lock``; ``_resume`` is the loop's."""

    __slots__ = ("_lock", "_loop", "_paused", "_queue", "_resume", "_waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting = 0
        self._paused = False
        self._resume: asyncio.Future[None] | None = None

    def put(self, piece: Any) -> None:
        """(loop thread) One piece for the worker to emit."""
        with self._lock:
            self._waiting += 1
            if self._waiting >= RELAY_HIGH:
                self._paused = True
        self._queue.put(piece)

    async def room(self) -> None:
        """(loop thread) Returns once the worker is not too far behind."""
        with self._lock:
            if not self._paused:
                return
            self._resume = self._loop.create_future()
            resume = self._resume
        await resume

    def _took(self) -> None:
        """(worker thread) One piece emitted: maybe let the request read on."""
        with self._lock:
            self._waiting -= 1
            if not self._paused or self._waiting > RELAY_HIGH // 2:
                return
            self._paused = False
            resume, self._resume = self._resume, None
        if resume is not None:
            self._loop.call_soon_threadsafe(_set_result, resume)

    def close(self) -> None:
        """(any thread) The request ended: no more pieces."""
        self._queue.put(_END)

    def pieces(self) -> Iterable[Any]:
        """(worker thread) The pieces in order, until the request ended."""
        while True:
            try:
                piece = self._queue.get(timeout=1.0)
            except queue.Empty:
                if _loop_thread is None or not _loop_thread.is_alive():
                    raise SourceError("nbstream's HTTP thread ended (the interpreter is "
                                      "shutting down?)") from None
                continue
            if piece is _END:
                return
            yield piece
            self._took()


def _set_result(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Progress:
    """How far one request got (for error messages); owned by its task."""

    __slots__ = ("connected", "events", "marker", "pieces")

    def __init__(self) -> None:
        self.connected = False
        self.events = 0
        self.pieces = 0
        #: the stream said it ended: a ``data: [DONE]`` line
        self.marker = False


async def _read_some(response: httpx.Response) -> bytes:
    """At most ``_MAX_ERROR_BODY`` bytes of a response body."""
    parts: list[bytes] = []
    size = 0
    async for part in response.aiter_bytes():
        parts.append(part)
        size += len(part)
        if size >= _MAX_ERROR_BODY:
            break
    return b"".join(parts)[:_MAX_ERROR_BODY]


def trim(text: str, limit: int = _TRIM) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_text(payload: Any) -> str:
    """The message in an error payload of any of the usual shapes, or ''."""
    if isinstance(payload, dict):
        for key in ("error", "detail", "message"):
            if key in payload:
                found = error_text(payload[key])
                if found:
                    return found
        return ""
    if isinstance(payload, str):
        return trim(payload)
    if isinstance(payload, list) and payload:  # FastAPI validation errors
        return trim("; ".join(error_text(p) or json.dumps(p) for p in payload))
    return ""


def token_counts(usage: Mapping[str, Any], *, prompt: str, completion: str) -> dict[str, int]:
    """Token counts of a server's usage object, in the names of ``Outcome.usage``.

    ``prompt`` and ``completion`` are the server's names for the two counts
    (``prompt_tokens`` / ``completion_tokens`` in chat completions,
    ``input_tokens`` / ``output_tokens`` in Responses); their ``<name>_details``
    objects give the cached and the reasoning tokens. Anything not an int is left out.
    """
    out: dict[str, int] = {}

    def put(name: str, value: Any) -> None:
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = value

    put("prompt_tokens", usage.get(prompt))
    put("completion_tokens", usage.get(completion))
    details = usage.get(f"{prompt}_details")
    if isinstance(details, dict):
        put("cached_tokens", details.get("cached_tokens"))
    details = usage.get(f"{completion}_details")
    if isinstance(details, dict):
        put("reasoning_tokens", details.get("reasoning_tokens"))
    return out


def _server_message(raw: bytes) -> str:
    """What an error body says: the JSON error message, or the text trimmed."""
    text = raw.decode("utf-8", "replace")
    try:
        payload = json.loads(text)
    except json.JSONDecodeError:
        if text.lstrip().startswith("<"):  # an HTML error page (a proxy's): its words
            text = _TAG.sub(" ", text)
        return trim(text)
    return error_text(payload) or trim(text)


def _os_error(exc: BaseException) -> str:
    """The message of the OSError under an httpx error ("Connection refused")."""
    chain: list[OSError] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 10:
        if isinstance(cur, OSError):
            chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    for err in chain:  # the one with an errno says it best
        if err.errno:
            return os.strerror(err.errno)
    return str(chain[0]) if chain else ""


# ------------------------------------------------------ reading a body defensively
#: the longest line of an event stream read, in bytes (an event's ``data:`` line
#: is a JSON chunk of a few hundred bytes; the largest seen, a final chunk with
#: usage and timings, about 2 KB)
MAX_LINE_BYTES = 1 << 20
_NEWLINE = re.compile(rb"\r\n|\r|\n")


class BadStream(ValueError):
    """The body is not a readable event stream (said in the message)."""


async def checked_text(response: httpx.Response,
                       max_line: int = MAX_LINE_BYTES) -> AsyncIterator[str]:
    """The body of ``response`` as text, strictly UTF-8, no line over ``max_line`` bytes.

    Raises :class:`BadStream` at the first byte that breaks either rule.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    offset = 0  # bytes of the body before this part
    line = 0  # bytes of the current line so far
    async for part in response.aiter_bytes():
        try:
            text = decoder.decode(part)
        except UnicodeDecodeError as exc:
            # exc.start counts from a character's first bytes carried over from the
            # part before (a failed decode leaves them in the decoder's state)
            carried = len(decoder.getstate()[0])
            raise BadStream(f"the stream is not valid UTF-8 (byte {offset - carried + exc.start})"
                            ) from None
        if line + len(part) <= max_line:  # no line can be too long: where the last one starts
            end = max(part.rfind(b"\n"), part.rfind(b"\r"))
            line = line + len(part) if end < 0 else len(part) - end - 1
        else:
            segments = _NEWLINE.split(part)  # the first continues the current line
            longest = max([line + len(segments[0]), *(len(s) for s in segments[1:])])
            if longest > max_line:
                raise BadStream(f"the stream has a line longer than {max_line:,} bytes "
                                f"(by byte {offset + len(part):,}): not a stream of events")
            line = line + len(part) if len(segments) == 1 else len(segments[-1])
        offset += len(part)
        if text:
            yield text
    try:
        tail = decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise BadStream(f"the stream ends inside a UTF-8 character (byte {offset})") from None
    if tail:
        yield tail


class CheckedBody:
    """What :class:`httpx_sse.EventSource` reads (headers and text) of a response,
    with its text from :func:`checked_text`."""

    def __init__(self, response: httpx.Response, max_line: int = MAX_LINE_BYTES) -> None:
        self.headers = response.headers
        self._response = response
        self._max_line = max_line

    def aiter_text(self) -> AsyncIterator[str]:
        return checked_text(self._response, self._max_line)
