"""The sources' shared tool-call reading (nbstream/sources/toolcalls.py) and tool_choice checks.

* :class:`ToolCallSplitter`: a model's tool-call syntax in streamed text (Hermes tags,
  Mistral, Llama 3 JSON). Any split of a text into pieces gives the same answer text and
  the same calls as the whole text in one piece (hypothesis), a call's first piece alone
  carries its id and name, malformed calls come back as text and never hang.
* :class:`ToolCallAssembler`: a server's pieces of calls (OpenAI deltas, Responses events).
* :class:`CallIds`, :func:`check_tool_request` and ``tool_choice`` in generation options.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbstream.core.pieces import Reasoning, ToolCallDelta
from nbstream.generation import check_generation, check_tool_choice, tool_choice_name
from nbstream.sources.toolcalls import (
    CallIds,
    ToolCallAssembler,
    ToolCallSplitter,
    ToolCallSyntax,
    check_tool_request,
    template_messages,
    tool_splitting,
)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {}}}}


def read(syntax: ToolCallSyntax, pieces: list[str], ids: CallIds | None = None
         ) -> tuple[str, list[dict[str, Any]], ToolCallSplitter, list[Any]]:
    """(answer text, calls, the splitter, every piece) of ``pieces``."""
    splitter = ToolCallSplitter(syntax, ids)
    out: list[Any] = []
    for piece in pieces:
        out += splitter.feed(piece)
    out += splitter.flush()
    assert all(p for p in out if isinstance(p, str)), "no empty text pieces"
    text = "".join(p for p in out if isinstance(p, str))
    calls: list[dict[str, Any]] = []
    for p in out:
        if isinstance(p, ToolCallDelta):
            if p.name is not None:
                assert p.index == len(calls), "calls are numbered 0, 1, ... in order"
                assert p.id, "the first piece carries an id"
                calls.append({"id": p.id, "name": p.name, "arguments": p.arguments,
                              "pieces": 1})
            else:
                assert p.id is None, "the id comes once"
                assert p.index < len(calls), "no piece before the call's first"
                calls[p.index]["arguments"] += p.arguments
                calls[p.index]["pieces"] += 1
    return text, calls, splitter, out


def summary(calls: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(c["name"], json.loads(c["arguments"])) for c in calls]


HERMES_TWO = ('Let me check.\n\n<tool_call>\n{"name": "get_weather", "arguments": '
              '{"city": "Zürich", "note": "a } and a \\" and </tool"}}\n</tool_call>\n'
              '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')

CASES: list[tuple[ToolCallSyntax, str, str, list[tuple[str, Any]]]] = [
    # Hermes / Qwen: text before, two calls, braces and quotes inside strings
    ("hermes", HERMES_TWO, "Let me check.",
     [("get_weather", {"city": "Zürich", "note": 'a } and a " and </tool'}),
      ("get_time", {})]),
    # no call: the text as it is (angle brackets, a partial tag at the end)
    ("hermes", "Use <b>bold</b> and a < sign <tool_ca", "Use <b>bold</b> and a < sign <tool_ca",
     []),
    # arguments before the name; arguments as a JSON text in a string; no arguments
    ("hermes", '<tool_call>{"arguments": {"a": [1, {"b": null}]}, "name": "f"}</tool_call>',
     "", [("f", {"a": [1, {"b": None}]})]),
    ("hermes", '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>', "",
     [("f", {"a": 1})]),
    ("hermes", '<tool_call>{"name": "f"}</tool_call> Done.', "Done.", [("f", {})]),
    # Mistral: a JSON list after [TOOL_CALLS], and the name[ARGS]{...} form
    ("mistral", '[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, '
                '{"name": "b", "arguments": {"y": [1, 2]}}]',
     "", [("a", {"x": 1}), ("b", {"y": [1, 2]})]),
    ("mistral", 'Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
                '[TOOL_CALLS]get_time[ARGS]{}',
     "Sure.", [("get_weather", {"city": "Paris"}), ("get_time", {})]),
    # Llama 3: the reply is the JSON call ("parameters"), after <|python_tag|> or not
    ("llama3", '  {"name": "get_weather", "parameters": {"city": "Paris"}}', "",
     [("get_weather", {"city": "Paris"})]),
    ("llama3", '<|python_tag|>{"name": "a", "parameters": {}}; '
               '{"type": "function", "name": "b", "parameters": {"q": "x;y"}}',
     "", [("a", {}), ("b", {"q": "x;y"})]),
    # Llama 3: JSON that is no call, and text that merely contains one, stay text
    ("llama3", '{"answer": 42} is the JSON you asked for.',
     '{"answer": 42} is the JSON you asked for.', []),
    ("llama3", 'Write {"name": "x"} like this.', 'Write {"name": "x"} like this.', []),
]


@pytest.mark.parametrize(("syntax", "text", "answer", "calls"), CASES)
def test_whole_and_character_by_character_give_the_same(
        syntax: ToolCallSyntax, text: str, answer: str, calls: list[tuple[str, Any]]) -> None:
    for pieces in ([text], list(text)):
        got_text, got_calls, splitter, _ = read(syntax, pieces)
        assert got_text == answer
        assert summary(got_calls) == calls
        assert splitter.calls == len(calls)
        assert not splitter.cut


def test_arguments_stream_as_the_model_writes_them() -> None:
    _, calls, _, out = read("hermes", list(HERMES_TWO))
    assert calls[0]["pieces"] > 10  # not one piece at the end
    first = next(i for i, p in enumerate(out) if isinstance(p, ToolCallDelta))
    assert out[first].name == "get_weather"  # the name as soon as it is complete ...
    assert out[first].arguments == ""  # ... before any argument text


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_split_gives_the_same_text_and_calls(data: st.DataObject) -> None:
    syntax, text, _, _ = data.draw(st.sampled_from(CASES))
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=12)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    whole_text, whole_calls, _, _ = read(syntax, [text])
    got_text, got_calls, _, _ = read(syntax, pieces)
    assert got_text == whole_text
    assert [(c["name"], c["arguments"]) for c in got_calls] == \
        [(c["name"], c["arguments"]) for c in whole_calls]


@pytest.mark.parametrize("text", [
    "<tool_call>not json at all</tool_call> Sorry.",
    '<tool_call>{"answer": 1}</tool_call> Sorry.',
    "<tool_call></tool_call> Sorry.",
    '<tool_call>{"arguments": {}}</tool_call> Sorry.',  # no name
])
def test_a_call_that_is_not_one_comes_back_as_text(text: str) -> None:
    for pieces in ([text], list(text)):
        got_text, calls, splitter, _ = read("hermes", pieces)
        assert calls == []
        assert got_text == text  # what the model wrote, tags included
        assert splitter.calls == 0


def test_a_call_cut_at_the_end_is_said_so_and_never_hangs() -> None:
    # the name was emitted, the arguments are incomplete: the widget reports them
    text, calls, splitter, _ = read("hermes", list('<tool_call>{"name": "f", "arguments": '
                                                   '{"city": "Par'))
    assert text == "" and calls[0]["name"] == "f" and calls[0]["arguments"] == '{"city": "Par'
    assert splitter.cut
    # cut before the name: given back as text
    text, calls, splitter, _ = read("hermes", ['<tool_call>{"na'])
    assert text == '<tool_call>{"na' and calls == [] and not splitter.cut
    # no closing tag at the end, but a complete call: read (models that skip it)
    _, calls, splitter, _ = read("hermes", ['<tool_call>{"name": "f", "arguments": {}}'])
    assert summary(calls) == [("f", {})] and not splitter.cut


def test_malformed_arguments_after_the_name_are_passed_on_as_written() -> None:
    _, calls, _, _ = read("hermes", ['<tool_call>{"name": "f", "arguments": {"a": 1,,}}'
                                     '</tool_call>'])
    assert calls[0]["name"] == "f" and calls[0]["arguments"] == '{"a": 1,,}'


def test_ids_are_made_up_unique_in_the_conversation_or_the_models_own() -> None:
    messages = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "abc", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "abc", "content": "1"}]
    ids = CallIds(messages)
    text = ('[TOOL_CALLS] [{"name": "a", "arguments": {}, "id": "abc"}, '
            '{"id": "xyz123456", "name": "b", "arguments": {}}]')
    _, calls, _, _ = read("mistral", [text], ids)
    assert calls[0]["id"] != "abc"  # taken by the conversation: a fresh one
    assert calls[1]["id"] == "xyz123456"  # the model's own, fresh
    made = [CallIds().fresh() for _ in range(50)]
    assert len(set(made)) == 50 and all(re.fullmatch(r"call_[A-Za-z0-9]{24}", i) for i in made)
    assert re.fullmatch(r"[A-Za-z0-9]{9}", CallIds(style="mistral").fresh())
    # a mistral splitter makes Mistral-shaped ids
    _, calls, _, _ = read("mistral", ["[TOOL_CALLS]f[ARGS]{}"])
    assert re.fullmatch(r"[A-Za-z0-9]{9}", calls[0]["id"])


def test_tool_splitting_passes_reasoning_through() -> None:
    out: list[Any] = []
    emit, finish = tool_splitting(out.append, ToolCallSplitter("hermes"))
    emit(Reasoning("hmm"))
    emit("Hi <tool_")
    emit('call>{"name": "f", "arguments": {}}</tool_call>')
    finish()
    assert out[0] == Reasoning("hmm") and out[1] == "Hi"
    assert [p.name for p in out[2:] if isinstance(p, ToolCallDelta)] == ["f", None]


def test_template_messages_give_arguments_as_objects() -> None:
    turns = template_messages([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "oops"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "18 C"}])
    assert turns[1]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    assert turns[1]["tool_calls"][1]["function"]["arguments"] == "oops"  # kept as written
    assert turns[2] == {"role": "tool", "content": "18 C", "tool_call_id": "c1",
                        "name": "get_weather"}


# ------------------------------------------------------------------ assembler
def test_the_assembler_keeps_the_contract() -> None:
    calls = ToolCallAssembler(CallIds([{"role": "tool", "tool_call_id": "dup",
                                        "content": ""}]))
    out = [calls.add(7, call_id="s1", name="f", arguments="{"),  # a server's index 7
           calls.add(3, arguments='{"q"'),  # args before the name: held
           calls.add(7, call_id="s1", name="f", arguments='"a": 1}'),  # id/name repeated
           calls.add(3, call_id="dup", name="g", arguments=": 2}"),  # an id already used
           calls.done(3, '{"q": 2}'),  # all was streamed: nothing more
           calls.done(7, '{"a": 1}, "b": 2}')]  # the rest of the text
    assert out[0] == ToolCallDelta(0, "{", id="s1", name="f")
    assert out[1] is None
    assert out[2] == ToolCallDelta(0, '"a": 1}')
    assert out[3] is not None and out[3].index == 1 and out[3].name == "g"
    assert out[3].arguments == '{"q": 2}' and out[3].id not in ("dup", None)
    assert out[4] is None
    assert out[5] == ToolCallDelta(0, ', "b": 2}')
    assert calls.count == 2 and calls.nameless() == []
    # a whole call at once (done with no pieces before), arguments as an object
    assert calls.done("x", {"k": "é"}, call_id="s9", name="h") == \
        ToolCallDelta(2, '{"k": "é"}', id="s9", name="h")
    calls.add("nameless", arguments="{}")
    assert calls.nameless() == [3]


# ---------------------------------------------------------------- tool_choice
def test_tool_choice_is_checked_at_once() -> None:
    assert check_generation({"tool_choice": "required"}, "g") == {"tool_choice": "required"}
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert check_tool_choice(named) == named
    assert check_tool_choice({"type": "function", "name": "get_weather"}) == named
    assert tool_choice_name(named) == "get_weather" and tool_choice_name("auto") is None
    with pytest.raises(ValueError, match="did you mean 'required'"):
        check_generation({"tool_choice": "requird"}, "ChatWidget.generation")
    with pytest.raises(ValueError, match="named function"):
        check_generation({"tool_choice": "get_weather"}, "g")
    with pytest.raises(TypeError, match="'type': 'function'"):
        check_generation({"tool_choice": {"function": {}}}, "g")
    with pytest.raises(TypeError, match="tool_choice"):
        check_generation({"tool_choice": 3}, "g")
    with pytest.raises(ValueError, match="does not take 'tool_choice'"):
        check_generation({"tool_choice": "auto"}, "g", supported={"temperature"})


def test_check_tool_request() -> None:
    named = check_tool_choice({"type": "function", "function": {"name": "get_time"}})
    assert check_tool_request([WEATHER, TIME], named, "src") == named
    assert check_tool_request([WEATHER], None, "src") is None
    assert check_tool_request([], "auto", "src") is None  # nothing to send
    assert check_tool_request([], "none", "src") is None
    with pytest.raises(ValueError, match="needs tools"):
        check_tool_request([], "required", "src")
    with pytest.raises(ValueError, match="'get_time', which is not among the tools"):
        check_tool_request([WEATHER], named, "src")
    with pytest.raises(ValueError, match="two tools are named"):
        check_tool_request([WEATHER, WEATHER], None, "src")
    with pytest.raises(ValueError, match="tool 0 is not a function tool"):
        check_tool_request([{"name": "bare"}], None, "src")
