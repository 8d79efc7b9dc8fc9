"""Tool calls for a local transformers model: tools in its chat template, calls read from its text.

What :class:`~nbstream.sources.TransformersSource` does with a reply's tools:

1. **Can the template take tools?** (:func:`tool_support`) The chat template is
   rendered once with a probe tool; a template that never writes the tool
   into the prompt (SmolLM2's, and every template without tool support)
   cannot hand tools to its model: the source refuses them with the reason.
2. **How does the model write a call?** (:func:`call_syntax`) The tokenizer's
   own ``response_template`` where it has one (transformers 5's response
   parsing, :meth:`tokenizer.get_response_parser`); otherwise the syntax the
   chat template teaches, read from its text: ``<tool_call>`` (Hermes,
   Qwen 2.5 / 3, QwQ, SmolLM3), ``[TOOL_CALLS]`` (Mistral, both the JSON-list
   and the ``name[ARGS]{...}`` forms), ``<|python_tag|>`` (Llama 3.1 / 3.2 /
   3.3 JSON calls); ``tool_call_format=`` chooses it by hand. A template that
   takes tools in a syntax none of these read is refused too (say which with
   ``tool_call_format``).
3. **The prompt**: the tools go to ``apply_chat_template(..., tools=...)``; the
   conversation keeps its assistant ``tool_calls`` (arguments as objects, as
   templates write them with ``tojson``) and its tool turns
   (:func:`~nbstream.sources.toolcalls.template_messages`).
4. **The reply's text** goes through a
   :class:`~nbstream.sources.toolcalls.ToolCallSplitter` (after the think
   splitter, so a call written while thinking is thinking), which streams each
   call's arguments as the model writes them; with a response template,
   through transformers' ``ResponseParser``, which gives a call whole when the
   model closes it (its arguments are parsed only then).

``tool_choice``: ``"none"`` gives the template no tools and reads no calls;
``"required"`` and a named function write the start of a call after the
prompt (``<tool_call>\\n{"name": "`` and so on: a prefill the model continues),
so the model must call a tool (that tool); a response template has no known
start, and those choices are refused there.

Threads: everything here runs on the reply's worker thread, but
:func:`tool_support`, which may also run on the thread that registers tools
(the widget's constructor); it only renders the template.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from ...core.pieces import Reasoning, ToolCallDelta, ToolSchema
from ..toolcalls import SYNTAX_TAGS, CallIds, Piece, ToolCallSplitter

if TYPE_CHECKING:
    from ...generation import ToolChoice

__all__ = ["ToolCallFormat", "ToolReply", "call_syntax", "tool_support"]

log = logging.getLogger("nbstream.sources.transformers.toolcalls")

#: How a model writes its calls: a tag syntax, or the tokenizer's ``response_template``.
ToolCallFormat = Literal["hermes", "mistral", "llama3", "response_template"]
TOOL_CALL_FORMATS: tuple[str, ...] = ("hermes", "mistral", "llama3", "response_template")

_PROBE = "nbstream_probe_tool"
_PROBE_TOOL: ToolSchema = {
    "type": "function",
    "function": {
        "name": _PROBE,
        "description": "A probe: is the tool written into the prompt?",
        "parameters": {"type": "object", "properties": {"x": {"type": "string",
                                                                "description": "x"}},
                       "required": ["x"]},
    },
}
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def _template_text(tokenizer: Any) -> str:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates: the tool_use one counts too
        return "\n".join(str(t) for t in template.values())
    return str(template or "")


def call_syntax(tokenizer: Any) -> ToolCallFormat | None:
    """How the model behind ``tokenizer`` writes its calls, or None if unknown."""
    if getattr(tokenizer, "response_template", None):
        return "response_template"
    text = _template_text(tokenizer)
    if "<tool_call>" in text:
        return "hermes"
    if "[TOOL_CALLS]" in text:
        return "mistral"
    if "<|python_tag|>" in text:
        return "llama3"
    return None


def tool_support(tokenizer: Any, fmt: ToolCallFormat | None) -> str | None:
    """Why ``tokenizer``'s chat template cannot hand tools to its model, or None
    when it can (and nbstream can read its calls)."""
    if not getattr(tokenizer, "chat_template", None):
        return "its tokenizer has no chat template"
    try:
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": "Hi"}], tools=[_PROBE_TOOL], tokenize=False,
            add_generation_prompt=True)
    except Exception as exc:  # a template that breaks when given tools
        return f"its chat template fails when given tools ({type(exc).__name__}: {exc})"
    if _PROBE not in str(prompt):
        return ("its chat template does not take tools (it never writes them into the "
                "prompt); use a model whose template does, such as Qwen2.5-Instruct")
    if fmt is None and call_syntax(tokenizer) is None:
        return ("nbstream does not know how its model writes tool calls (no response "
                "template, no <tool_call>, [TOOL_CALLS] or <|python_tag|> in the template); "
                f"give tool_call_format= one of {', '.join(TOOL_CALL_FORMATS)}")
    if fmt == "response_template" and not getattr(tokenizer, "response_template", None):
        return "tool_call_format='response_template' but its tokenizer has none"
    return None


def _prefill(syntax: ToolCallFormat, choice: ToolChoice | None, template: str) -> str:
    """The start of a call written after the prompt, so that the model must call."""
    if choice in (None, "auto", "none"):
        return ""
    name = choice["function"]["name"] if isinstance(choice, dict) else None
    quoted = json.dumps(name) if name is not None else ""
    if syntax == "hermes":
        return '<tool_call>\n{"name": ' + (quoted + ', "arguments": ' if name else '"')
    if syntax == "llama3":
        return '{"name": ' + (quoted + ', "parameters": ' if name else '"')
    if syntax == "mistral":
        if "[ARGS]" in template:
            return "[TOOL_CALLS]" + (f"{name}[ARGS]" if name else "")
        return '[TOOL_CALLS][{"name": ' + (quoted + ', "arguments": ' if name else '"')
    raise ValueError(f"tool_choice {choice!r} needs a known start of a call, and this model's "
                     "calls are read by its tokenizer's response template; use 'auto'")


class ToolReply:
    """One reply's tools: what the template gets, and the reading of the calls.

    ``wrap(emit)`` returns the ``emit`` that reads calls out of answer text
    (:class:`Reasoning` passes through), ``start(emit)`` writes the prefill
    through the whole chain (a forced call's start), ``finish()`` flushes.
    """

    def __init__(self, tokenizer: Any, tools: Sequence[ToolSchema], choice: ToolChoice | None,
                 fmt: ToolCallFormat | None, ids: CallIds) -> None:
        syntax = fmt or call_syntax(tokenizer)
        assert syntax is not None  # tool_support said so
        self.syntax: ToolCallFormat = syntax
        self.choice = choice
        #: the tools the template gets (none for tool_choice "none")
        self.template_tools: list[ToolSchema] = [] if choice == "none" else list(tools)
        self.reading = choice != "none"
        self.prefill = _prefill(syntax, choice, _template_text(tokenizer))
        self._ids = ids
        self._splitter: ToolCallSplitter | None = None
        self._parser: Any = None
        self._response_calls = 0
        self._tokenizer = tokenizer
        self._tools = list(tools)
        if self.reading and syntax != "response_template":
            if syntax == "mistral":
                ids.style = "mistral"  # Mistral's templates take 9-character ids only
            self._splitter = ToolCallSplitter(syntax, ids)

    @property
    def tags(self) -> tuple[str, ...]:
        """Texts the decoder must keep even where they are special tokens."""
        if not self.reading:
            return ()
        if self.syntax == "response_template":
            return ("*",)  # the response template decides; see ``keeps``
        return SYNTAX_TAGS[self.syntax]

    def keeps(self, token_text: str) -> bool:
        """Whether a special token's text is one the reading needs to see."""
        if self.syntax == "response_template":
            template = getattr(self._tokenizer, "response_template", None) or {}
            flat = json.dumps(template).replace("\\\\", "").replace("\\", "")
            return token_text in flat
        return token_text in self.tags

    @property
    def calls(self) -> int:
        """How many calls the reply made."""
        if self._splitter is not None:
            return self._splitter.calls
        return self._response_calls

    @property
    def cut(self) -> bool:
        """Whether the reply ended inside a call whose start was emitted."""
        return self._splitter.cut if self._splitter is not None else False

    def wrap(self, emit: Callable[[str], None], prompt_text: str
             ) -> tuple[Callable[[str], None], Callable[[], None]]:
        """``(emit2, finish)`` reading calls out of the answer text."""
        out = cast(Callable[[Piece], None], emit)  # it takes call pieces too (the contract)
        if not self.reading:
            return emit, lambda: None
        splitter = self._splitter
        if splitter is not None:
            def emit_tags(piece: str) -> None:
                if isinstance(piece, Reasoning):
                    emit(piece)
                    return
                for part in splitter.feed(piece):
                    out(part)

            def finish_tags() -> None:
                for part in splitter.flush():
                    out(part)

            return emit_tags, finish_tags
        parser = self._tokenizer.get_response_parser(prefix=prompt_text, tools=self._tools)

        def emit_parsed(piece: str) -> None:
            if isinstance(piece, Reasoning):
                emit(piece)
                return
            for event in parser.feed(piece):
                self._event(event, out)

        def finish_parsed() -> None:
            try:
                _, events = parser.finalize()
            except ValueError as exc:  # a required field the model never wrote
                log.warning("the response template could not finish the reply: %s", exc)
                return
            for event in events:
                self._event(event, out)

        return emit_parsed, finish_parsed

    def _event(self, event: dict[str, Any], out: Callable[[Piece], None]) -> None:
        kind, field = event.get("type"), event.get("field")
        if kind == "region_chunk" and not event.get("dirty"):
            text = event.get("text") or ""
            if text and field == "content":
                out(text)
            elif text and field in _REASONING_FIELDS:
                out(Reasoning(text))
        elif kind == "region_close" and field == "tool_calls":
            values = event.get("value")
            for value in values if isinstance(values, list) else [values]:
                call = _call_of(value)
                if call is None:
                    log.warning("the response template gave a tool call nbstream cannot "
                                "read: %r", value)
                    continue
                name, arguments = call
                out(ToolCallDelta(self._response_calls, arguments, id=self._ids.fresh(),
                                  name=name))
                self._response_calls += 1


def _call_of(value: Any) -> tuple[str, str] | None:
    """``(name, arguments JSON)`` of a parsed call (``{"function": {...}}`` or flat)."""
    if not isinstance(value, dict):
        return None
    function = value.get("function", value)
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return None
    arguments = function.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return function["name"], arguments

