"""An OpenAI-compatible server as a source: vLLM, TGI, llama.cpp, Ollama, ``transformers serve``.

Owns one streaming HTTP request per reply: ``POST {base_url}/chat/completions``
with ``"stream": true``, read as server-sent events (httpx, and httpx-sse's
parser); each ``choices[0].delta.content`` becomes a piece. Role-only and
empty chunks, usage chunks and keep-alive comments are skipped;
``reasoning_content`` (``reasoning`` on some servers) is dropped unless
``include_reasoning=True``. A ``data: [DONE]`` line ends the reply, and so does
a body that simply ends (``transformers serve`` sends no ``[DONE]``); a body
cut off mid-way (the server died: an incomplete chunked body) is an error.

Threads: :meth:`OpenAISource.generate` runs on the source's worker thread, on
a private asyncio event loop made for that one reply. The request runs as one
task; beside it a watcher looks at the ``cancel`` event every 50 ms and, once
it is set, cancels the task, which closes the response and its connection at
once, whether the task waits for a connection, for the response headers or
for the next bytes of a stalled stream. The server sees the connection close
(vLLM, TGI and ``transformers serve`` then abort the generation). Why not a
plain blocking read: a thread blocked in ``recv`` cannot be woken from another
thread by closing its socket (not on Linux), a task can be cancelled. An
async client belongs to the loop it ran on, so each reply gets a fresh client
and connection (no keep-alive between replies; the TLS context, the costly
part, is built once per source).

Errors become :class:`SourceError` with a message a person can act on: the
server cannot be reached, an HTTP error (status and the server's own message,
trimmed), a malformed chunk, an error event mid-stream, a lost connection, no
data for ``timeout`` seconds. The widget turns it into a reply error and keeps
the text received before.

Nothing here keeps the API key anywhere but in the request's header: not in
``repr``, not in error messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

try:
    import httpx
    from httpx_sse import EventSource, SSEError
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "OpenAISource needs httpx and httpx-sse: pip install 'nbstream[openai]'"
    ) from exc

from .._version import __version__
from .base import Cancelled, ChatMessage, Emit, Source, SourceError

__all__ = ["DEFAULT_BASE_URL", "OpenAISource", "SourceError"]

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
API_KEY_ENV = "OPENAI_API_KEY"
_ENDPOINT = "/chat/completions"
#: request fields the source sets itself
_RESERVED = frozenset({"model", "messages", "stream"})
#: how often the watcher looks at the cancel event (seconds)
_POLL = 0.05
#: longest server message quoted in an error, and most bytes read of an error body
_TRIM = 240
_MAX_ERROR_BODY = 64 * 1024
_TAG = re.compile(r"<[^>]*>")


class OpenAISource(Source):
    """Stream replies from an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    ``model`` is the name the server knows the model by (``transformers
    serve`` with a local folder: the folder's path). ``api_key`` defaults to
    ``$OPENAI_API_KEY`` and is sent as a Bearer token (no header without one).
    ``timeout`` is the longest wait, in seconds, for the server's next bytes
    (the response headers, or the next piece): a stalled server becomes an
    error after it (None: wait for ever; a stop always works). Every other
    keyword (``temperature``, ``max_tokens``, ``stop``, ``seed``, ...) goes
    into the request body as it is.

    Replies of sources with the same ``base_url`` and ``model`` share one
    lane that runs ``concurrency`` of them at once (servers batch requests).
    """

    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        *,
        timeout: float | None = 300.0,
        connect_timeout: float = 10.0,
        concurrency: int = 4,
        include_reasoning: bool = False,
        headers: Mapping[str, str] | None = None,
        verify: bool | str | ssl.SSLContext = True,
        label: str | None = None,
        **request_options: Any,
    ) -> None:
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
        clash = sorted(_RESERVED & request_options.keys())
        if clash:
            raise TypeError(f"OpenAISource sets {', '.join(clash)} itself; "
                            "pass the model as the first argument")
        self.model = model
        full = str(url).rstrip("/")
        if full.endswith(_ENDPOINT):
            full = full[: -len(_ENDPOINT)]
        # what is sent, credentials in the URL (user:password@) included ...
        self._request_url = full + _ENDPOINT
        # ... and what is shown (repr, errors, the lane) without them
        self.base_url = str(httpx.URL(full).copy_with(userinfo=b"")) if url.userinfo else full
        self.url = self.base_url + _ENDPOINT
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.concurrency = concurrency
        self.include_reasoning = include_reasoning
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
        # figures of the reply that ran last on each worker thread (replies of
        # this source run on several threads at once, see concurrency)
        self._local = threading.local()

    # ------------------------------------------------------------------ Source
    @property
    def label(self) -> str:
        return self._label

    def lane_key(self) -> Hashable:
        return ("openai", self.base_url, self.model)

    @property
    def last_stats(self) -> dict[str, Any] | None:
        """``{"tokens": n, "prompt_tokens": m}`` of the latest reply on this thread,
        when the server reported its usage (None otherwise).

        Thread-local: read it on the thread that ran :meth:`generate`, after it.
        Servers report usage in the last chunk (transformers serve always; vLLM,
        llama.cpp and OpenAI with ``stream_options={"include_usage": True}``).
        """
        stats: dict[str, Any] | None = getattr(self._local, "stats", None)
        return stats

    @last_stats.setter
    def last_stats(self, value: dict[str, Any] | None) -> None:
        self._local.stats = value

    def request_body(self, messages: Sequence[ChatMessage]) -> dict[str, Any]:
        """The JSON body sent for ``messages``."""
        return {
            "model": self.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "stream": True,
            **self.request_options,
        }

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> None:
        self.last_stats = None
        if cancel.is_set():
            raise Cancelled()
        body = self.request_body(messages)
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._watch(body, emit, cancel))
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def __repr__(self) -> str:
        shown = "".join(f", {k}={v!r}" for k, v in sorted(self.request_options.items()))
        return f"OpenAISource({self.model!r}, base_url={self.base_url!r}{shown})"

    # --------------------------------------------------------------- internals
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

    async def _watch(self, body: dict[str, Any], emit: Emit, cancel: threading.Event) -> None:
        """Run the request as a task; cancel it as soon as ``cancel`` is set."""
        progress = _Progress()
        task = asyncio.ensure_future(self._request(body, emit, cancel, progress))
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=_POLL)
                if cancel.is_set() and not task.done():
                    task.cancel()  # closes the response and the connection
                    await asyncio.wait({task})
                    raise Cancelled()
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        task.result()  # the request's outcome: None, Cancelled or SourceError

    async def _request(self, body: dict[str, Any], emit: Emit, cancel: threading.Event,
                       progress: _Progress) -> None:
        timeout = httpx.Timeout(self.timeout, connect=self.connect_timeout)
        try:
            async with httpx.AsyncClient(timeout=timeout, verify=self._ssl_context()) as client, \
                    client.stream("POST", self._request_url, json=body,
                                  headers=self._headers()) as response:
                progress.connected = True
                await self._check_response(response)
                await self._read_events(response, emit, cancel, progress)
        except (Cancelled, SourceError):
            raise
        except Exception as exc:
            if cancel.is_set():
                raise Cancelled() from exc
            raise self._translate(exc, progress) from exc
        if cancel.is_set():
            raise Cancelled()

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

    async def _read_events(self, response: httpx.Response, emit: Emit,
                           cancel: threading.Event, progress: _Progress) -> None:
        in_reasoning = False
        async for event in EventSource(response).aiter_sse():
            if cancel.is_set():
                raise Cancelled()
            progress.events += 1
            data = event.data
            if data.strip() == "[DONE]":
                return
            if not data.strip():
                continue
            try:
                chunk = json.loads(data)
            except json.JSONDecodeError as exc:
                if event.event == "error":  # an error event in plain text
                    chunk = {"error": data}
                else:
                    raise SourceError(
                        f"{self.label}: malformed JSON in event {progress.events} from "
                        f"{self.url} ({exc.msg}): {_trim(data)!r}"
                    ) from None
            if event.event == "error" or (isinstance(chunk, dict) and "error" in chunk):
                message = _error_text(chunk) or _trim(data)
                raise SourceError(f"{self.label}: the server reported an error after "
                                  f"{progress.pieces} pieces: {message}", body=message)
            usage = chunk.get("usage") if isinstance(chunk, dict) else None
            if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                self.last_stats = {"tokens": usage["completion_tokens"],
                                   "prompt_tokens": usage.get("prompt_tokens")}
            content, reasoning = self._delta(chunk, progress.events)
            if reasoning and self.include_reasoning:
                in_reasoning = True
                progress.pieces += 1
                emit(reasoning)
            if content:
                if in_reasoning:
                    in_reasoning = False
                    emit("\n\n")
                progress.pieces += 1
                emit(content)

    def _delta(self, chunk: Any, n: int) -> tuple[str | None, str | None]:
        """(content, reasoning) of one chunk; (None, None) for chunks without text."""
        if not isinstance(chunk, dict):
            raise SourceError(f"{self.label}: event {n} from {self.url} is not a JSON object: "
                              f"{_trim(json.dumps(chunk))!r}")
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list):
            return None, None  # e.g. the usage chunk at the end
        choice = choices[0]
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            return None, None
        content = delta.get("content")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        for name, value in (("content", content), ("reasoning", reasoning)):
            if value is not None and not isinstance(value, str):
                raise SourceError(f"{self.label}: event {n} from {self.url} has a {name} "
                                  f"that is not a string: {_trim(json.dumps(value))!r}")
        return content, reasoning

    def _translate(self, exc: Exception, progress: _Progress) -> SourceError:
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
        if isinstance(exc, SSEError):
            return SourceError(f"{where}: {detail}")
        if isinstance(exc, httpx.HTTPError):
            return SourceError(f"request to {where} failed: {type(exc).__name__}: {detail}")
        return SourceError(f"{where}: {type(exc).__name__}: {detail}")


class _Progress:
    """How far one request got (for error messages); owned by its task."""

    __slots__ = ("connected", "events", "pieces")

    def __init__(self) -> None:
        self.connected = False
        self.events = 0
        self.pieces = 0


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


def _trim(text: str, limit: int = _TRIM) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_text(payload: Any) -> str:
    """The message in an error payload of any of the usual shapes, or ''."""
    if isinstance(payload, dict):
        for key in ("error", "detail", "message"):
            if key in payload:
                found = _error_text(payload[key])
                if found:
                    return found
        return ""
    if isinstance(payload, str):
        return _trim(payload)
    if isinstance(payload, list) and payload:  # FastAPI validation errors
        return _trim("; ".join(_error_text(p) or json.dumps(p) for p in payload))
    return ""


def _server_message(raw: bytes) -> str:
    """What an error body says: the JSON error message, or the text trimmed."""
    text = raw.decode("utf-8", "replace")
    try:
        payload = json.loads(text)
    except json.JSONDecodeError:
        if text.lstrip().startswith("<"):  # an HTML error page (a proxy's): its words
            text = _TAG.sub(" ", text)
        return _trim(text)
    return _error_text(payload) or _trim(text)


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
