"""A server's Responses API as a source: OpenAI, vLLM, ``transformers serve``, Ollama, ...

Owns one streaming request per reply: ``POST {base_url}/responses`` with
``"stream": true``. The request carries the whole conversation each time (it
keeps nothing on the server: no ``previous_response_id``, no ``store``): the
leading system turn becomes ``instructions``, every other turn input items
(:func:`response_items`): a message ``{"role", "content"}``, an assistant's
tool calls as ``function_call`` items, a tool turn as a
``function_call_output`` item. Generation options: ``temperature``, ``top_p``,
``max_new_tokens`` (sent as ``max_output_tokens``) and ``tool_choice`` (a
named function in the Responses shape, ``{"type": "function", "name": ...}``);
the reply's tools go in the Responses shape too (``{"type": "function",
"name", "description", "parameters", "strict"}``, ``strict`` false unless a
tool says otherwise, so a schema made from any Python function is accepted).

The events, dispatched on their ``type`` (the SSE event name where a server
sends no type):

* ``response.output_text.delta`` (and ``response.refusal.delta``): answer text;
  inline ``<think>…</think>`` is split out as for ``OpenAISource`` (``think_tags``);
* ``response.reasoning_text.delta`` (the reasoning itself: vLLM, gpt-oss,
  ``transformers serve``) and ``response.reasoning_summary_text.delta``
  (OpenAI's summaries; parts of one summary are separated by a blank line):
  :class:`~nbstream.core.pieces.Reasoning` pieces;
* ``response.output_item.added`` with a ``function_call`` item (its
  ``call_id`` is the call's id, its name, maybe all its arguments at once as
  ``transformers serve`` sends them), ``response.function_call_arguments.delta``
  and ``.done``, ``response.output_item.done``: the call's
  :class:`~nbstream.core.pieces.ToolCallDelta` pieces, each argument text
  emitted once whichever of these carries it;
* ``response.completed``: usage (input, output, cached and reasoning tokens)
  and the end: ``tool_calls`` when the reply called tools, ``length`` when a
  server that never says ``incomplete`` (``transformers serve``) used all of
  ``max_output_tokens``, ``stop`` otherwise; ``response.incomplete``:
  ``length`` for ``max_output_tokens``, ``stop`` for another reason (kept in
  the figures as ``server_finish_reason``); ``response.failed`` and ``error``
  events: a :class:`~nbstream.sources.base.SourceError` with the server's
  code and message. A stream that ends without any of these did not finish
  (``finish_reason`` None).

The request, stopping (a stop closes the HTTP stream) and the errors are
:mod:`nbstream.sources.sse`'s, shared with ``OpenAISource``. Threads: as
there, the request is read on the process's one HTTP event loop thread
(``nbstream-http``) and :meth:`ResponsesSource.generate_with` emits its pieces
on the reply's worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ..core.pieces import FinishReason, Outcome, Reasoning
from .base import ChatMessage, Emit, SourceError, ToolSchema
from .content_parts import responses_content
from .sse import DEFAULT_BASE_URL, Progress, SSESource, token_counts, trim
from .think import splitting
from .toolcalls import CallIds, ToolCallAssembler, emit_call

if TYPE_CHECKING:
    import httpx

    from ..generation import GenerationOptions

__all__ = ["ResponsesSource", "SourceError", "response_items", "response_tool"]

_ENDPOINT = "/responses"


def response_items(message: ChatMessage) -> list[dict[str, Any]]:
    """One turn of the conversation as Responses API input items: a message
    ``{"role", "content"}`` (a user turn's attachments as ``input_text``,
    ``input_image`` and ``input_file`` items:
    :func:`~nbstream.sources.content_parts.responses_content`; none for an
    assistant turn that only called tools), a ``function_call`` item per tool
    call, a ``function_call_output`` item for a tool turn."""
    role = message["role"]
    if role == "tool":
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id", ""),
                 "output": message["content"]}]
    items: list[dict[str, Any]] = []
    calls = message.get("tool_calls") or []
    if message["content"] or not calls or message.get("attachments"):
        items.append({"role": role, "content": responses_content(message)})
    for call in calls:
        items.append({"type": "function_call", "call_id": call["id"],
                      "name": call["function"]["name"],
                      "arguments": call["function"]["arguments"]})
    return items


def response_tool(tool: ToolSchema) -> dict[str, Any]:
    """A tool (OpenAI's chat function-tool JSON) in the Responses API's flat shape."""
    function = tool["function"]
    out: dict[str, Any] = {"type": "function", "name": function["name"]}
    if function.get("description"):
        out["description"] = function["description"]
    out["parameters"] = function.get("parameters") or {"type": "object", "properties": {}}
    out["strict"] = bool(function.get("strict", False))
    return out


class ResponsesSource(SSESource):
    """Stream replies from a server's Responses API (``/v1/responses``).

    The arguments are :class:`~nbstream.sources.openai.OpenAISource`'s:
    ``model`` as the server knows it, ``base_url`` (``.../v1``; a full
    ``.../v1/responses`` URL is accepted), ``api_key`` (default
    ``$OPENAI_API_KEY``), ``timeout``, ``connect_timeout``, ``concurrency``,
    ``chat_template_kwargs``, ``think_tags``, ``headers``, ``verify``,
    ``label``; every other keyword (``reasoning={"effort": "low", "summary":
    "auto"}``, ``max_output_tokens``, ``store``, ...) goes into the request body
    as it is. The system prompt is sent as ``instructions``.
    """

    endpoint: ClassVar[str] = _ENDPOINT
    lane_kind: ClassVar[str] = "responses"
    reserved: ClassVar[Mapping[str, str]] = {
        "model": "pass the model as the first argument",
        "input": "the conversation is the widget's",
        "instructions": "the system prompt is sent as instructions",
        "stream": "it always streams",
        "tools": "give the widget the tools (ChatWidget(source, tools=[...])): it runs "
                 "the model's calls",
    }

    #: per-reply options (``chat.generation``), over ``request_options``;
    #: ``max_new_tokens`` is sent as ``max_output_tokens`` (the API has no stop strings)
    generation_options: ClassVar[frozenset[str]] = frozenset(
        {"temperature", "top_p", "max_new_tokens", "tool_choice"})
    option_fields: ClassVar[tuple[tuple[str, str], ...]] = (
        ("temperature", "temperature"), ("top_p", "top_p"),
        ("max_new_tokens", "max_output_tokens"))

    def __init__(self, model: str, base_url: str = DEFAULT_BASE_URL,
                 api_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(model, base_url, api_key, **kwargs)

    def request_body(self, messages: Sequence[ChatMessage],
                     options: GenerationOptions | None = None,
                     tools: Sequence[ToolSchema] = ()) -> dict[str, Any]:
        """The JSON body sent for ``messages``, with a reply's ``options`` and ``tools``."""
        instructions: list[str] = []
        start = 0
        while start < len(messages) and messages[start]["role"] == "system":
            instructions.append(messages[start]["content"])
            start += 1
        items = [item for m in messages[start:] for item in response_items(m)]
        body: dict[str, Any] = {"model": self.model, "input": items, "stream": True}
        if any(instructions):
            body["instructions"] = "\n\n".join(t for t in instructions if t)
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        body.update(self.request_options)
        body.update(self._option_fields(options or {}))
        if tools:
            body["tools"] = [response_tool(t) for t in tools]
        choice = self.tool_choice(options, tools)
        if choice is not None:
            body["tool_choice"] = ({"type": "function", "name": choice["function"]["name"]}
                                   if isinstance(choice, dict) else choice)
        elif not tools:
            body.pop("tool_choice", None)
        return body

    def options_in_force(self, options: GenerationOptions) -> dict[str, Any]:
        """The reply's options over ``request_options``, in the generic names."""
        return self._shown_options(options)[0]

    # --------------------------------------------------------------- internals
    async def _read_events(self, response: httpx.Response, body: Mapping[str, Any],
                           emit: Emit, cancel: threading.Event, progress: Progress,
                           ids: CallIds) -> Outcome:
        splitter = self._splitter()
        answer, finish = splitting(emit, splitter) if splitter is not None else (emit, None)
        calls = ToolCallAssembler(ids)
        state = _Reading(calls)
        async for name, event in self._events(response, cancel, progress):
            if not isinstance(event, dict):
                raise SourceError(f"{self.label}: event {progress.events} from {self.url} is "
                                  f"not a JSON object: {trim(str(event))!r}")
            typed = event.get("type")
            kind = typed if isinstance(typed, str) else name
            if kind == "error" or (kind == "message" and "error" in event):
                raise SourceError(f"{self.label}: the server reported an error after "
                                  f"{progress.pieces} pieces: {_error(event)}",
                                  body=_error(event))
            if kind == "response.failed":
                said = _error(event.get("response"))
                raise SourceError(f"{self.label}: the response failed after "
                                  f"{progress.pieces} pieces: {said}", body=said)
            for piece in state.read(kind, event):
                progress.pieces += 1
                if isinstance(piece, str):
                    if isinstance(piece, Reasoning):
                        emit(piece)
                    else:
                        answer(piece)
                else:
                    emit_call(emit, piece)
            if state.ended:
                break
        if not state.ended:
            raise SourceError(
                f"{self.label}: the stream from {self.url} ended after {progress.pieces} "
                "pieces with no response.completed or response.incomplete: the answer is "
                "incomplete (did the server stop or lose its connection?)")
        if finish is not None:
            finish()
        nameless = calls.nameless()
        if nameless:
            raise SourceError(f"{self.label}: {self.url} sent function call(s) "
                              f"{', '.join(map(str, nameless))} without a name")
        return state.outcome(body.get("max_output_tokens"))


class _Reading:
    """What one reply's events said so far; owned by its request task."""

    def __init__(self, calls: ToolCallAssembler) -> None:
        self.calls = calls
        self.ended = False
        self.status: str | None = None
        self.reason: str | None = None
        self.usage: dict[str, int] = {}
        self._summary: tuple[Any, Any] | None = None

    def read(self, kind: str, event: dict[str, Any]) -> list[Any]:
        """The pieces (answer text, :class:`Reasoning`, :class:`ToolCallDelta`) of one event."""
        out: list[Any] = []
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = _text(event.get("delta"))
            if delta:
                out.append(delta)
        elif kind == "response.reasoning_text.delta":
            delta = _text(event.get("delta"))
            if delta:
                out.append(Reasoning(delta))
        elif kind == "response.reasoning_summary_text.delta":
            delta = _text(event.get("delta"))
            part = (event.get("item_id"), event.get("summary_index"))
            if delta:
                if self._summary is not None and part != self._summary:
                    delta = "\n\n" + delta  # the next part of a summary
                self._summary = part
                out.append(Reasoning(delta))
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                key = self._key(item.get("id"), event.get("output_index"))
                if kind.endswith("added"):
                    call = self.calls.add(key, call_id=item.get("call_id") or item.get("id"),
                                           name=item.get("name"),
                                           arguments=item.get("arguments") or "")
                else:
                    call = self.calls.done(key, item.get("arguments"),
                                           call_id=item.get("call_id") or item.get("id"),
                                           name=item.get("name"))
                if call is not None:
                    out.append(call)
        elif kind == "response.function_call_arguments.delta":
            key = self._key(event.get("item_id"), event.get("output_index"))
            call = self.calls.add(key, arguments=_text(event.get("delta")))
            if call is not None:
                out.append(call)
        elif kind == "response.function_call_arguments.done":
            key = self._key(event.get("item_id"), event.get("output_index"))
            call = self.calls.done(key, event.get("arguments"), name=event.get("name"))
            if call is not None:
                out.append(call)
        elif kind in ("response.completed", "response.incomplete"):
            response = event.get("response")
            response = response if isinstance(response, dict) else {}
            self.status = response.get("status") or kind.rsplit(".", 1)[-1]
            details = response.get("incomplete_details")
            if isinstance(details, dict) and isinstance(details.get("reason"), str):
                self.reason = details["reason"]
            usage = response.get("usage")
            if isinstance(usage, dict):
                self.usage = token_counts(usage, prompt="input_tokens", completion="output_tokens")
            self.ended = True
        return out

    def _key(self, item_id: object, output_index: object) -> Hashable:
        """A call's key: its item id, else its place in the output."""
        if isinstance(item_id, str) and item_id:
            return item_id
        return ("output", output_index)

    def outcome(self, limit: object) -> Outcome:
        figures: dict[str, Any] = {}
        if "completion_tokens" in self.usage:
            figures["tokens"] = self.usage["completion_tokens"]
        finish: FinishReason | None
        if self.status is None:
            finish = None  # the stream ended without saying how
        elif self.status == "incomplete":
            finish = "length" if self.reason in (None, "max_output_tokens") else "stop"
            if self.reason not in (None, "max_output_tokens"):
                figures["server_finish_reason"] = self.reason
        elif self.calls.count:
            finish = "tool_calls"
        elif (isinstance(limit, int) and "completion_tokens" in self.usage
              and self.usage["completion_tokens"] >= limit):
            finish = "length"  # a server that says "completed" at the limit
        else:
            finish = "stop"
        if self.status not in (None, "completed", "incomplete"):
            figures["server_status"] = self.status
        return Outcome(finish_reason=finish, usage=dict(self.usage), figures=figures)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _error(payload: object) -> str:
    """``code: message`` of an error event or a failed response."""
    if not isinstance(payload, dict):
        return trim(str(payload)) if payload else "no reason given"
    error = payload.get("error", payload)
    if isinstance(error, str):
        return trim(error)
    if not isinstance(error, dict):
        return trim(str(error))
    message = error.get("message")
    code = error.get("code")
    text = str(message) if message else "no reason given"
    return trim(f"{code}: {text}" if code else text)


