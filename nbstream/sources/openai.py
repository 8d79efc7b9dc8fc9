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

A ``data: [DONE]`` line ends the reply, and so does a body that ends after a
chunk with a finish reason (``transformers serve`` sends no ``[DONE]``). A
body that ends with neither did not finish: the server died or the connection
dropped, so it is an error that keeps the text received, as is a body cut off
mid-way (an incomplete chunked body) and a stream with no event at all
(llama-cpp-python answers a prompt longer than its context with HTTP 200 and
an empty stream; the error is only in its log). Bytes that are not UTF-8 and
a line longer than a megabyte are errors too (:func:`~nbstream.sources.sse.checked_text`).

Tool calls: the reply's tools go into the request as ``tools`` (OpenAI's
function-tool JSON) and its ``tool_choice`` as it is; ``delta.tool_calls``
pieces (an index, the id and name on the first, argument text on any,
possibly interleaved across indexes and after content or reasoning) become
:class:`~nbstream.core.pieces.ToolCallDelta` pieces through
:class:`~nbstream.sources.toolcalls.ToolCallAssembler` (indexes 0, 1, ... in
order of appearance, id and name once even where a server repeats them, an
id made up where a server gives none or one the conversation already has),
and a reply with calls ends with ``finish_reason="tool_calls"`` (also from a
server that says ``stop``). The conversation's assistant ``tool_calls`` and
``tool`` turns are sent back in OpenAI's shape (:func:`chat_message`). Legacy
``delta.function_call`` pieces are read as call 0 where no ``tool_calls``
come.

The request, the events, stopping and errors are :mod:`nbstream.sources.sse`'s
(shared with the Responses API source).

Nothing here keeps the API key anywhere but in the request's header: not in
``repr``, not in error messages.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ..core.pieces import FinishReason, Outcome, Reasoning, ToolCallDelta
from .base import ChatMessage, Emit, SourceError, ToolSchema
from .content_parts import chat_content
from .sse import (
    DEFAULT_ACCEPTS,
    DEFAULT_BASE_URL,
    Progress,
    SSESource,
    error_text,
    token_counts,
    trim,
)
from .think import splitting
from .toolcalls import CallIds, ToolCallAssembler, emit_call

if TYPE_CHECKING:
    import httpx

    from ..generation import GenerationOptions

__all__ = ["DEFAULT_ACCEPTS", "DEFAULT_BASE_URL", "OpenAISource", "SourceError", "chat_message"]

log = logging.getLogger("nbstream.sources.openai")

_ENDPOINT = "/chat/completions"
#: finish reasons as servers spell them -> ours
_FINISH: dict[str, FinishReason] = {
    "stop": "stop", "length": "length", "tool_calls": "tool_calls", "abort": "abort",
    "function_call": "tool_calls", "eos_token": "stop", "eos": "stop",
    "stop_sequence": "stop", "end_turn": "stop", "max_tokens": "length",
}
_USAGE_OPTION = "stream_options"


def chat_message(message: ChatMessage) -> dict[str, Any]:
    """One turn of the conversation as ``/v1/chat/completions`` takes it: role and
    content (a user turn's attachments as content parts:
    :func:`~nbstream.sources.content_parts.chat_content`); an assistant's
    ``tool_calls`` (content may be ""); a tool turn's ``tool_call_id`` (its
    ``name`` is not sent: OpenAI's API has no such field)."""
    out: dict[str, Any] = {"role": message["role"], "content": chat_content(message)}
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["function"]["name"],
                          "arguments": c["function"]["arguments"]}}
            for c in calls]
    if "tool_call_id" in message:
        out["tool_call_id"] = message["tool_call_id"]
    return out


class OpenAISource(SSESource):
    """Stream replies from an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    ``model`` is the name the server knows the model by (``transformers
    serve`` with a local folder: the folder's path). ``api_key`` defaults to
    ``$OPENAI_API_KEY`` and is sent as a Bearer token (no header without one).
    ``timeout`` is the longest wait, in seconds, for the server's next bytes
    (the response headers, or the next piece): a stalled server becomes an
    error after it (None: wait for ever; a stop always works). Every other
    keyword (``temperature``, ``max_tokens``, ``stop``, ``seed``,
    ``reasoning_effort``, ``parallel_tool_calls``, ...) goes into the request
    body as it is.

    ``chat_template_kwargs`` (e.g. ``{"enable_thinking": False}``) is sent as
    the request field of that name, which vLLM, SGLang and llama.cpp hand to
    the model's chat template. ``think_tags``: whether ``<think>…</think>``
    written inline in the content is split out as reasoning: None (the
    default) and True split it where it appears (text without tags passes
    through as it is), ``"opened"`` when the server's template opened the
    block so the content starts inside it, False leaves the content as it is.
    Reasoning the server sends apart (``reasoning_content`` / ``reasoning``)
    is always a reasoning part.

    Tools are given per reply (the widget's ``tools``), never here; whether
    the server's model can call them is the server's affair (vLLM needs
    ``--enable-auto-tool-choice`` and a tool parser, llama.cpp ``--jinja``).

    Replies of sources with the same ``base_url`` and ``model`` share one
    lane that runs ``concurrency`` of them at once (servers batch requests).
    """

    endpoint: ClassVar[str] = _ENDPOINT
    lane_kind: ClassVar[str] = "openai"
    reserved: ClassVar[Mapping[str, str]] = {
        "model": "pass the model as the first argument",
        "messages": "the conversation is the widget's",
        "stream": "it always streams",
        "tools": "give the widget the tools (ChatWidget(source, tools=[...])): it runs "
                 "the model's calls",
    }

    #: per-reply options (``chat.generation``), over ``request_options``;
    #: ``max_new_tokens`` is sent as ``max_tokens``
    generation_options: ClassVar[frozenset[str]] = frozenset(
        {"temperature", "top_p", "max_new_tokens", "stop", "tool_choice"})
    option_fields: ClassVar[tuple[tuple[str, str], ...]] = (
        ("temperature", "temperature"), ("top_p", "top_p"), ("max_new_tokens", "max_tokens"),
        ("stop", "stop"))

    def __init__(self, model: str, base_url: str = DEFAULT_BASE_URL,
                 api_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(model, base_url, api_key, **kwargs)
        # set once a server refused stream_options: never sent again by this source
        self._no_usage_option = False

    def request_body(self, messages: Sequence[ChatMessage],
                     options: GenerationOptions | None = None,
                     tools: Sequence[ToolSchema] = ()) -> dict[str, Any]:
        """The JSON body sent for ``messages``, with a reply's ``options`` and ``tools``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [chat_message(m) for m in messages],
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
        if tools:
            body["tools"] = [dict(t) for t in tools]
        choice = self.tool_choice(options, tools)
        if choice is not None:
            body["tool_choice"] = choice
        elif not tools:
            body.pop("tool_choice", None)  # a request option's choice, without tools
        return body

    def options_in_force(self, options: GenerationOptions) -> dict[str, Any]:
        """The reply's options over ``request_options``, in the generic names
        (what the server does with a field not sent is its own default)."""
        shown, fields = self._shown_options(options)
        if "max_new_tokens" not in shown and fields.get("max_completion_tokens") is not None:
            shown["max_new_tokens"] = fields["max_completion_tokens"]
        return shown

    # --------------------------------------------------------------- internals
    async def _attempts(self, messages: Sequence[ChatMessage], emit: Emit,
                        cancel: threading.Event, options: GenerationOptions,
                        tools: Sequence[ToolSchema], ids: CallIds) -> Outcome:
        """The request; once more without ``stream_options`` if the server refused it."""
        body = self.request_body(messages, options, tools)
        try:
            return await self._request(body, emit, cancel, Progress(), ids)
        except SourceError as exc:
            if not (_USAGE_OPTION in body and _USAGE_OPTION not in self.request_options
                    and exc.status_code in (400, 422) and _refuses_usage_option(exc)):
                raise
        self._no_usage_option = True
        body = self.request_body(messages, options, tools)
        return await self._request(body, emit, cancel, Progress(), ids)

    async def _read_events(self, response: httpx.Response, body: Mapping[str, Any],
                           emit: Emit, cancel: threading.Event, progress: Progress,
                           ids: CallIds) -> Outcome:
        ending = _Ending()
        splitter = self._splitter()
        answer, finish = splitting(emit, splitter) if splitter is not None else (emit, None)
        calls = ToolCallAssembler(ids)
        async for name, chunk in self._events(response, cancel, progress):
            if name == "error" or (isinstance(chunk, dict) and "error" in chunk):
                message = error_text(chunk) or trim(str(chunk))
                raise SourceError(f"{self.label}: the server reported an error after "
                                  f"{progress.pieces} pieces: {message}", body=message)
            content, reasoning, tool_calls = self._delta(chunk, progress.events)
            ending.note(chunk)
            if reasoning:
                progress.pieces += 1
                emit(Reasoning(reasoning))
            if content:
                progress.pieces += 1
                answer(content)
            for piece in tool_calls:
                delta = self._call_piece(calls, piece, progress.events)
                if delta is not None:
                    progress.pieces += 1
                    emit_call(emit, delta)
        if not (progress.marker or ending.server_finish is not None):
            raise SourceError(
                f"{self.label}: the stream from {self.url} ended after {progress.pieces} "
                "pieces with neither a finish reason nor [DONE]: the answer is incomplete "
                "(did the server stop or lose its connection?)")
        if finish is not None:
            finish()
        nameless = calls.nameless()
        if nameless:
            raise SourceError(f"{self.label}: {self.url} sent tool call(s) "
                              f"{', '.join(map(str, nameless))} without a name")
        return ending.outcome(calls=calls.count)

    def _delta(self, chunk: Any, n: int) -> tuple[str | None, str | None, list[Any]]:
        """(content, reasoning, tool-call pieces) of one chunk."""
        if not isinstance(chunk, dict):
            raise SourceError(f"{self.label}: event {n} from {self.url} is not a JSON object: "
                              f"{trim(str(chunk))!r}")
        choices = chunk.get("choices")
        if not choices:
            return None, None, []  # e.g. the usage chunk at the end
        choice = choices[0] if isinstance(choices, list) else None
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if delta is None and isinstance(choice, dict):
            return None, None, []  # a choice with only a finish reason
        if not isinstance(delta, dict):
            raise SourceError(f"{self.label}: event {n} from {self.url} is not a chat "
                              "completion chunk (choices[0].delta is missing or not an "
                              f"object): {trim(str(chunk))!r}")
        content = delta.get("content")
        # vLLM sends "reasoning" (some versions both names, the same text)
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        for name, value in (("content", content), ("reasoning", reasoning)):
            if value is not None and not isinstance(value, str):
                raise SourceError(f"{self.label}: event {n} from {self.url} has a {name} "
                                  f"that is not a string: {trim(str(value))!r}")
        tool_calls = delta.get("tool_calls")
        if tool_calls is None and isinstance(delta.get("function_call"), dict):
            tool_calls = [{"index": 0, "function": delta["function_call"]}]  # legacy
        if tool_calls is None:
            tool_calls = []
        if not isinstance(tool_calls, list):
            raise SourceError(f"{self.label}: event {n} from {self.url} has tool_calls that "
                              f"are not a list: {trim(str(tool_calls))!r}")
        return content, reasoning, tool_calls

    def _call_piece(self, calls: ToolCallAssembler, piece: Any, n: int
                    ) -> ToolCallDelta | None:
        """One entry of ``delta.tool_calls`` through the assembler."""
        if not isinstance(piece, dict):
            raise SourceError(f"{self.label}: event {n} from {self.url} has a tool call that "
                              f"is not an object: {trim(str(piece))!r}")
        function = piece.get("function")
        if not isinstance(function, dict):
            function = {}
        call_id = piece.get("id")
        index = piece.get("index")
        key: Hashable
        if isinstance(index, int) and not isinstance(index, bool):
            key = index
        elif isinstance(call_id, str) and call_id:
            key = ("id", call_id)  # a server that numbers nothing (one call per id)
        else:
            key = calls.last_key() if calls.count else 0
        return calls.add(key, call_id=call_id, name=function.get("name"),
                         arguments=function.get("arguments"))


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
            counts = token_counts(usage, prompt="prompt_tokens", completion="completion_tokens")
            self.usage.update(counts)
        timings = chunk.get("timings")
        if isinstance(timings, dict):
            self.timings.update({k: v for k, v in timings.items()
                                 if isinstance(v, (int, float)) and not isinstance(v, bool)})

    def outcome(self, calls: int = 0) -> Outcome:
        figures: dict[str, Any] = {}
        if "completion_tokens" in self.usage:
            figures["tokens"] = self.usage["completion_tokens"]
        if self.timings:
            figures["timings"] = dict(self.timings)
        if self.server_finish is not None and self.server_finish not in _FINISH:
            figures["server_finish_reason"] = self.server_finish
        finish = self.finish
        if calls and finish == "stop":
            # a reply that called tools ends with them, whatever the server said
            figures.setdefault("server_finish_reason", self.server_finish)
            finish = "tool_calls"
        return Outcome(finish_reason=finish, usage=dict(self.usage), figures=figures)




def _refuses_usage_option(exc: SourceError) -> bool:
    """Whether an HTTP error says the server does not take ``stream_options``."""
    said = f"{exc.body or ''} {exc}".lower()
    return _USAGE_OPTION in said or "include_usage" in said
