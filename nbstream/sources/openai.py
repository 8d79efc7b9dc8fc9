"""An OpenAI-compatible server as a source: vLLM, TGI, llama.cpp, Ollama, ``transformers serve``.

Owns one streaming HTTP request per reply: ``POST {base_url}/chat/completions``
with ``"stream": true``, read as server-sent events (httpx, and httpx-sse's
parser); each ``choices[0].delta.content`` becomes an answer piece, each
``delta.reasoning_content`` (llama.cpp, DeepSeek) or ``delta.reasoning``
(vLLM, Ollama ``/v1``) a :class:`~nbstream.core.pieces.Reasoning` piece. Inline
``<think>…</think>`` in the content is split out too (``think_tags``, see
:mod:`nbstream.sources.think`). Role-only and empty chunks and keep-alive
comments are skipped.

How it ended goes into the returned :class:`~nbstream.core.pieces.Outcome`: the
last ``finish_reason`` the server sent (``stop``, ``length``, ``tool_calls``,
vLLM's ``abort``; TGI's ``eos_token`` / ``stop_sequence`` read as ``stop``), or
None when it sent none: a stream that simply ended, or one that sent
``[DONE]`` without a reason (llama-cpp-python's server does that to a stream a
second request cut short). Usage (prompt, completion, reasoning and cached
tokens) comes from the chunk that carries it: the source asks for it with
``stream_options: {"include_usage": true}``; a server that refuses that field
(HTTP 400 or 422 naming it) gets the request again without it, once, and this
source does not send it again. llama.cpp's ``timings`` go into the figures.

A ``data: [DONE]`` line ends the reply, and so does a body that simply ends
(``transformers serve`` sends no ``[DONE]``); a body cut off mid-way (the
server died: an incomplete chunked body) is an error, and so is a stream with
no event at all (llama-cpp-python answers a prompt longer than its context
with HTTP 200 and an empty stream; the error is only in its log).

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
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

try:
    import httpx
    from httpx_sse import EventSource, SSEError
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "OpenAISource needs httpx and httpx-sse: pip install 'nbstream[openai]'"
    ) from exc

from .._version import __version__
from ..core.attachment import RASTER_TYPES
from ..core.pieces import FinishReason, Outcome, Reasoning
from .base import Cancelled, ChatMessage, Emit, Source, SourceError, ToolSchema
from .content_parts import chat_content
from .think import ThinkSplitter, ThinkTags, splitting

if TYPE_CHECKING:
    from ..generation import GenerationOptions

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
#: finish reasons as servers spell them -> ours
_FINISH: dict[str, FinishReason] = {
    "stop": "stop", "length": "length", "tool_calls": "tool_calls", "abort": "abort",
    "function_call": "tool_calls", "eos_token": "stop", "eos": "stop",
    "stop_sequence": "stop", "end_turn": "stop", "max_tokens": "length",
}
_USAGE_OPTION = "stream_options"
#: what OpenAISource hands the server by default: text, and images (as ``image_url``
#: parts with a ``data:`` URL); files (``file`` parts) only where ``accepts`` names them
DEFAULT_ACCEPTS: frozenset[str] = frozenset({"text/*", *RASTER_TYPES})


class OpenAISource(Source):
    """Stream replies from an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    ``model`` is the name the server knows the model by (``transformers
    serve`` with a local folder: the folder's path). ``api_key`` defaults to
    ``$OPENAI_API_KEY`` and is sent as a Bearer token (no header without one).
    ``timeout`` is the longest wait, in seconds, for the server's next bytes
    (the response headers, or the next piece): a stalled server becomes an
    error after it (None: wait for ever; a stop always works). Every other
    keyword (``temperature``, ``max_tokens``, ``stop``, ``seed``,
    ``reasoning_effort``, ...) goes into the request body as it is.

    ``chat_template_kwargs`` (e.g. ``{"enable_thinking": False}``) is sent as
    the request field of that name, which vLLM, SGLang and llama.cpp hand to
    the model's chat template. ``think_tags``: whether ``<think>…</think>``
    written inline in the content is split out as reasoning: None (the
    default) and True split it where it appears (text without tags passes
    through as it is), ``"opened"`` when the server's template opened the
    block so the content starts inside it, False leaves the content as it is.
    Reasoning the server sends apart (``reasoning_content`` / ``reasoning``)
    is always a reasoning part.

    Replies of sources with the same ``base_url`` and ``model`` share one
    lane that runs ``concurrency`` of them at once (servers batch requests).

    Attachments (``chat.send(text, attachments=[...])``) go into the user turn's
    content as parts (:func:`~nbstream.sources.content_parts.chat_content`):
    images as ``image_url`` with a ``data:`` URL, texts (files, tables) as
    ``text`` parts, other files as ``file`` parts. ``accepts`` (MIME patterns)
    says what the server takes: by default text and PNG / JPEG / WebP / GIF images
    (:data:`DEFAULT_ACCEPTS`); add ``"application/pdf"`` for a server that reads
    PDFs (OpenAI's), or pass ``{"text/*"}`` for a text-only model so that the chat
    refuses images at once instead of the server.
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
        chat_template_kwargs: Mapping[str, Any] | None = None,
        think_tags: ThinkTags = None,
        headers: Mapping[str, str] | None = None,
        verify: bool | str | ssl.SSLContext = True,
        label: str | None = None,
        accepts: Iterable[str] | None = None,
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
        if chat_template_kwargs is not None and not isinstance(chat_template_kwargs, Mapping):
            raise TypeError("chat_template_kwargs must be a dict, such as "
                            "{'enable_thinking': False}")
        if not (think_tags is None or isinstance(think_tags, bool) or think_tags == "opened"):
            raise ValueError(f"think_tags must be True, False, None or 'opened', "
                             f"got {think_tags!r}")
        if accepts is not None and (isinstance(accepts, str) or not all(
                isinstance(p, str) and "/" in p for p in accepts)):
            raise TypeError("accepts must be a collection of MIME patterns such as "
                            "{'text/*', 'image/*', 'application/pdf'}")
        self._accepts = DEFAULT_ACCEPTS if accepts is None else frozenset(accepts)
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
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.think_tags: ThinkTags = think_tags
        # set once a server refused stream_options: never sent again by this source
        self._no_usage_option = False
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
        return ("openai", self.base_url, self.model)

    @property
    def accepts(self) -> frozenset[str]:
        """What the server is handed in attachments (see the class docstring)."""
        return self._accepts

    #: per-reply options (``chat.generation``), over ``request_options``;
    #: ``max_new_tokens`` is sent as ``max_tokens``
    generation_options: ClassVar[frozenset[str]] = frozenset(
        {"temperature", "top_p", "max_new_tokens", "stop"})

    def request_body(self, messages: Sequence[ChatMessage],
                     options: GenerationOptions | None = None) -> dict[str, Any]:
        """The JSON body sent for ``messages``, with a reply's ``options``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m["role"], "content": chat_content(m)} for m in messages],
            "stream": True,
        }
        if not self._no_usage_option:
            body[_USAGE_OPTION] = {"include_usage": True}
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        body.update(self.request_options)
        body.update(self._option_fields(options or {}))
        if "max_tokens" in body and (options or {}).get("max_new_tokens") is not None:
            body.pop("max_completion_tokens", None)  # the reply's own limit wins
        return body

    def options_in_force(self, options: GenerationOptions) -> dict[str, Any]:
        """The reply's options over ``request_options``, in the generic names
        (what the server does with a field not sent is its own default)."""
        fields = {**self.request_options, **self._option_fields(options)}
        shown: dict[str, Any] = {}
        for name, key in (("temperature", "temperature"), ("top_p", "top_p"),
                          ("max_new_tokens", "max_tokens"), ("stop", "stop")):
            if fields.get(key) is not None:
                shown[name] = fields[key]
        if "max_new_tokens" not in shown and fields.get("max_completion_tokens") is not None:
            shown["max_new_tokens"] = fields["max_completion_tokens"]
        return shown

    @staticmethod
    def _option_fields(options: GenerationOptions) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for name, key in (("temperature", "temperature"), ("top_p", "top_p"),
                          ("max_new_tokens", "max_tokens"), ("stop", "stop")):
            if name in options:
                fields[key] = options[name]  # type: ignore[literal-required]
        return fields

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> Outcome:
        return self.generate_with(messages, emit, cancel, {})

    def generate_with(self, messages: Sequence[ChatMessage], emit: Emit,
                      cancel: threading.Event, options: GenerationOptions,
                      tools: Sequence[ToolSchema] = ()) -> Outcome:
        self.check_tools(tools)
        self.check_attachments(messages)
        if cancel.is_set():
            raise Cancelled()
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(self._watch(messages, emit, cancel, options))
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

    async def _watch(self, messages: Sequence[ChatMessage], emit: Emit,
                     cancel: threading.Event, options: GenerationOptions) -> Outcome:
        """Run the request as a task; cancel it as soon as ``cancel`` is set."""
        task = asyncio.ensure_future(self._attempts(messages, emit, cancel, options))
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
        return task.result()  # the request's outcome, Cancelled or SourceError

    async def _attempts(self, messages: Sequence[ChatMessage], emit: Emit,
                        cancel: threading.Event, options: GenerationOptions) -> Outcome:
        """The request; once more without ``stream_options`` if the server refused it."""
        body = self.request_body(messages, options)
        try:
            return await self._request(body, emit, cancel, _Progress())
        except SourceError as exc:
            if not (_USAGE_OPTION in body and _USAGE_OPTION not in self.request_options
                    and exc.status_code in (400, 422) and _refuses_usage_option(exc)):
                raise
        self._no_usage_option = True
        body = self.request_body(messages, options)
        return await self._request(body, emit, cancel, _Progress())

    async def _request(self, body: dict[str, Any], emit: Emit, cancel: threading.Event,
                       progress: _Progress) -> Outcome:
        timeout = httpx.Timeout(self.timeout, connect=self.connect_timeout)
        try:
            async with httpx.AsyncClient(timeout=timeout, verify=self._ssl_context()) as client, \
                    client.stream("POST", self._request_url, json=body,
                                  headers=self._headers()) as response:
                progress.connected = True
                await self._check_response(response)
                outcome = await self._read_events(response, emit, cancel, progress)
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

    def _splitter(self) -> ThinkSplitter | None:
        if self.think_tags is False:
            return None
        return ThinkSplitter(start_inside=self.think_tags == "opened")

    async def _read_events(self, response: httpx.Response, emit: Emit,
                           cancel: threading.Event, progress: _Progress) -> Outcome:
        ending = _Ending()
        splitter = self._splitter()
        answer, finish = splitting(emit, splitter) if splitter is not None else (emit, None)
        async for event in EventSource(response).aiter_sse():
            if cancel.is_set():
                raise Cancelled()
            progress.events += 1
            data = event.data
            if data.strip() == "[DONE]":
                break
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
            content, reasoning = self._delta(chunk, progress.events)
            ending.note(chunk)
            if reasoning:
                progress.pieces += 1
                emit(Reasoning(reasoning))
            if content:
                progress.pieces += 1
                answer(content)
        if cancel.is_set():
            raise Cancelled()
        if not progress.events:
            raise SourceError(
                f"{self.label}: {self.url} answered with an empty stream (no event at all). "
                "The server failed before generating; llama.cpp's Python server does this "
                "when the prompt is longer than the model's context. See the server's log."
            )
        if finish is not None:
            finish()
        return ending.outcome()

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
        # vLLM sends "reasoning" (some versions both names, the same text)
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


class _Ending:
    """What the chunks said about the end: finish reason, usage, timings."""

    __slots__ = ("finish", "server_finish", "timings", "usage")

    def __init__(self) -> None:
        self.finish: FinishReason | None = None
        self.server_finish: str | None = None
        self.usage: dict[str, int] = {}
        self.timings: dict[str, float] = {}

    def note(self, chunk: dict[str, Any]) -> None:
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            reason = choices[0].get("finish_reason")
            if isinstance(reason, str) and reason:
                self.server_finish = reason
                self.finish = _FINISH.get(reason, "stop")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage.update(_usage(usage))
        timings = chunk.get("timings")
        if isinstance(timings, dict):
            self.timings.update({k: v for k, v in timings.items()
                                 if isinstance(v, (int, float)) and not isinstance(v, bool)})

    def outcome(self) -> Outcome:
        figures: dict[str, Any] = {}
        if "completion_tokens" in self.usage:
            figures["tokens"] = self.usage["completion_tokens"]
        if self.timings:
            figures["timings"] = dict(self.timings)
        if self.server_finish is not None and self.server_finish not in _FINISH:
            figures["server_finish_reason"] = self.server_finish
        return Outcome(finish_reason=self.finish, usage=dict(self.usage), figures=figures)


def _usage(usage: dict[str, Any]) -> dict[str, int]:
    """Token counts of an OpenAI usage object: prompt, completion, reasoning, cached."""
    out: dict[str, int] = {}

    def put(name: str, value: Any) -> None:
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = value

    put("prompt_tokens", usage.get("prompt_tokens"))
    put("completion_tokens", usage.get("completion_tokens"))
    details = usage.get("completion_tokens_details")
    if isinstance(details, dict):
        put("reasoning_tokens", details.get("reasoning_tokens"))
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        put("cached_tokens", details.get("cached_tokens"))
    return out


def _refuses_usage_option(exc: SourceError) -> bool:
    """Whether an HTTP error says the server does not take ``stream_options``."""
    said = f"{exc.body or ''} {exc}".lower()
    return _USAGE_OPTION in said or "include_usage" in said


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
