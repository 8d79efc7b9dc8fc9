"""TransformersSource and tools: the chat template gets them, the model's calls become parts.

A tiny random-weight Llama and a byte-level BPE trained here, with chat templates in the
shapes of Hermes/Qwen (``<tool_call>`` tags), Mistral (``[TOOL_CALLS]name[ARGS]{...}``,
special tokens) and Llama 3 (JSON ``{"name", "parameters"}``). Random weights write no
calls, so a logits processor makes the model write a given text token by token through
the real ``generate``: the pieces are what the tokenizer and the decoder produce, tags
cut across tokens included. The prompt the model saw is recorded, so the template's use
of the tools and of earlier calls is checked too. The embedded SmolLM2's template takes
no tools: refused, with the reason.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import threading
from typing import Any

import pytest

from nbstream.core.pieces import Outcome, Reasoning, ToolCallDelta
from nbstream.sources import TransformersSource
from nbstream.sources.base import ChatMessage
from nbstream.sources.transformers.toolcalls import call_syntax, tool_support

pytestmark = pytest.mark.transformers  # random-weight models through the real generate()

ASK: list[ChatMessage] = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "Time now",
                                         "parameters": {"type": "object", "properties": {}}}}

HERMES = (
    "{%- if tools %}<|im_start|>system\nTools:\n<tools>\n"
    "{%- for t in tools %}{{ t | tojson }}\n{% endfor %}</tools>\n"
    "Call one as <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call><|im_end|>\n"
    "{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant\n"
    "{%- for c in m.tool_calls %}<tool_call>\n"
    "{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}\n"
    "</tool_call>{% endfor %}<|im_end|>\n"
    "{%- elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n"
    "</tool_response><|im_end|>\n"
    "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MISTRAL = (
    "{%- if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'user' %}[INST]{{ m.content }}[/INST]"
    "{%- elif m.role == 'assistant' and m.tool_calls %}"
    "{%- for c in m.tool_calls %}[TOOL_CALLS]{{ c.function.name }}[ARGS]"
    "{{ c.function.arguments | tojson }}{% endfor %}</s>"
    "{%- elif m.role == 'tool' %}[TOOL_RESULTS]{{ m.content }}[/TOOL_RESULTS]"
    "{%- else %}{{ m.content }}</s>{%- endif %}{%- endfor %}"
)
LLAMA3 = (
    "{%- if tools %}<|im_start|>system\nAnswer a call as JSON {\"name\": function name, "
    "\"parameters\": {...}}. Functions: {{ tools | tojson }}<|im_end|>\n{%- endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{%- if m.tool_calls %}<|python_tag|>{{ m.tool_calls[0].function | tojson }}"
    "{%- else %}{{ m.content }}{% endif %}<|im_end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: takes tools, but in no syntax nbstream knows
UNKNOWN = (
    "{%- if tools %}Tools: {{ tools | tojson }}\n{% endif %}"
    "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{%- if add_generation_prompt %}assistant: {% endif %}"
)
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
#: transformers serve's response template for Qwen 2.5 / 3 (utils._RESPONSE_TEMPLATE_FALLBACKS)
QWEN_RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {"open_pattern": r"\s*<tool_call>", "close": "</tool_call>",
                       "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": "{content}"}},
        "content": {"close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)",
                    "content": "text"},
    },
}
CORPUS = [
    'Let me check the weather. <tool_call>\n{"name": "get_weather", "arguments": '
    '{"city": "Paris"}}\n</tool_call>',
    '{"name": "get_time", "parameters": {}} [TOOL_CALLS] [ARGS] The weather in Paris is sunny.',
    "Sorry, I cannot do that. It is 18 degrees and sunny in Paris today.",
]
VOCAB = 512  # the model's: room for the tokens the tests add


@functools.lru_cache(maxsize=1)
def _base_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=380, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend, bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|im_end|>", unk_token="<|endoftext|>")


def tokenizer(template: str, *, added: tuple[str, ...] = (), special: tuple[str, ...] = ()
              ) -> Any:
    tok = copy.deepcopy(_base_tokenizer())
    tok.chat_template = template
    if added:
        tok.add_tokens(list(added))  # as Qwen has <tool_call>: added, not special
    if special:
        tok.add_tokens(list(special), special_tokens=True)  # as Mistral has [TOOL_CALLS]
    assert len(tok) <= VOCAB
    return tok


@functools.lru_cache(maxsize=1)
def model() -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _base_tokenizer()
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


class Script:
    """A logits processor that makes the model write ``ids`` then end its turn, and
    keeps the prompt it was given."""

    def __init__(self, ids: list[int], eos: int) -> None:
        self.ids = [*ids, eos]
        self.start: int | None = None
        self.prompt: list[int] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.start is None:
            self.start = int(input_ids.shape[1])
            self.prompt = input_ids[0].tolist()
        step = int(input_ids.shape[1]) - self.start
        forced = torch.full_like(scores, -float("inf"))
        forced[:, self.ids[min(step, len(self.ids) - 1)]] = 0.0
        return forced


def writing(text: str, tok: Any, **options: Any) -> tuple[TransformersSource, Script]:
    from transformers import LogitsProcessorList

    script = Script(tok.encode(text, add_special_tokens=False), tok.eos_token_id)
    source = TransformersSource(model(), tok,
                                logits_processor=LogitsProcessorList([script]), **options)
    return source, script


def run(source: TransformersSource, messages: list[ChatMessage] = ASK,
        tools: list[dict[str, Any]] | None = None, **options: Any
        ) -> tuple[list[Any], Outcome]:
    pieces: list[Any] = []
    outcome = source.generate_with(messages, pieces.append, threading.Event(), options,
                                   [WEATHER, TIME] if tools is None else tools)
    return pieces, outcome


def calls_of(pieces: list[Any]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for p in pieces:
        if isinstance(p, ToolCallDelta):
            if p.name is not None:
                assert p.index == len(calls) and p.id
                calls.append({"id": p.id, "name": p.name, "arguments": p.arguments, "n": 1})
            else:
                assert p.id is None and p.index < len(calls)
                calls[p.index]["arguments"] += p.arguments
                calls[p.index]["n"] += 1
    return calls


def answer(pieces: list[Any]) -> str:
    return "".join(p for p in pieces if isinstance(p, str) and not isinstance(p, Reasoning))


TWO_CALLS = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
             '{"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", '
             '"arguments": {}}\n</tool_call>')


@pytest.mark.parametrize("tags", ["split across tokens", "added tokens"])
def test_hermes_two_calls_stream_as_parts(tags: str) -> None:
    tok = tokenizer(HERMES, added=("<tool_call>", "</tool_call>") if tags == "added tokens"
                    else ())
    ids = tok.encode("<tool_call>", add_special_tokens=False)
    assert (len(ids) == 1) == (tags == "added tokens")
    source, script = writing(TWO_CALLS, tok)
    pieces, outcome = run(source)
    assert answer(pieces) == "Let me check."
    calls = calls_of(pieces)
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {})]
    assert calls[0]["n"] > 3  # the arguments streamed as the tokens came
    assert all(re.fullmatch(r"call_[A-Za-z0-9]{24}", c["id"]) for c in calls)
    assert outcome.finish_reason == "tool_calls"
    # the template got the tools: their names and descriptions are in the prompt
    prompt = tok.decode(script.prompt)
    assert "Weather of a city" in prompt and '"name": "get_time"' in prompt


def test_earlier_calls_and_results_go_into_the_prompt() -> None:
    tok = tokenizer(HERMES)
    source, script = writing("It is sunny.", tok)
    conversation: list[ChatMessage] = [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
         "content": "18 C, sunny"}]
    pieces, outcome = run(source, conversation)
    assert answer(pieces) == "It is sunny." and outcome.finish_reason == "stop"
    prompt = tok.decode(script.prompt)
    # the arguments as an object (tojson of a dict), not a JSON text in a string
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}' in prompt
    assert "<tool_response>\n18 C, sunny\n</tool_response>" in prompt


def test_a_malformed_call_is_text_and_a_cut_one_says_length() -> None:
    tok = tokenizer(HERMES)
    text = "<tool_call>\nnot a call at all\n</tool_call> Sorry."
    source, _ = writing(text, tok)
    pieces, outcome = run(source)
    assert calls_of(pieces) == [] and answer(pieces) == text
    assert outcome.finish_reason == "stop"
    # arguments that do not parse, after the name: passed on as written
    source, _ = writing('<tool_call>{"name": "get_weather", "arguments": {"city": Paris}}'
                        '</tool_call>', tok)
    pieces, outcome = run(source)
    assert calls_of(pieces)[0]["arguments"] == '{"city": Paris}'
    assert outcome.finish_reason == "tool_calls"
    # cut by max_new_tokens inside the arguments: "length", nothing hangs
    source, _ = writing(TWO_CALLS, tok, max_new_tokens=24)
    pieces, outcome = run(source)
    assert outcome.finish_reason == "length"
    assert calls_of(pieces)[0]["name"] == "get_weather"


def test_mistral_special_tokens_reach_the_reader() -> None:
    tok = tokenizer(MISTRAL, special=("[TOOL_CALLS]", "[ARGS]"))
    assert call_syntax(tok) == "mistral"
    text = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}'
    assert tok.convert_tokens_to_ids("[TOOL_CALLS]") in tok.encode(text,
                                                                 add_special_tokens=False)
    source, _ = writing(text, tok)
    pieces, outcome = run(source)
    calls = calls_of(pieces)
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {})]
    # Mistral's templates take 9-character ids only
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", c["id"]) for c in calls)
    assert answer(pieces) == "" and outcome.finish_reason == "tool_calls"


def test_llama3_json_calls() -> None:
    tok = tokenizer(LLAMA3)
    assert call_syntax(tok) == "llama3"
    source, _ = writing('{"name": "get_weather", "parameters": {"city": "Paris"}}', tok)
    pieces, outcome = run(source)
    assert [(c["name"], json.loads(c["arguments"])) for c in calls_of(pieces)] == [
        ("get_weather", {"city": "Paris"})]
    assert outcome.finish_reason == "tool_calls"
    # an answer that is not a call is an answer
    source, _ = writing("It is sunny in Paris.", tok)
    pieces, outcome = run(source)
    assert answer(pieces) == "It is sunny in Paris." and outcome.finish_reason == "stop"


def test_the_tokenizers_response_template_reads_whole_calls() -> None:
    tok = tokenizer(HERMES, added=("<tool_call>", "</tool_call>"))
    tok.response_template = QWEN_RESPONSE_TEMPLATE
    assert call_syntax(tok) == "response_template"
    source, _ = writing(TWO_CALLS, tok)
    pieces, outcome = run(source)
    calls = calls_of(pieces)
    assert [(c["name"], json.loads(c["arguments"]), c["n"]) for c in calls] == [
        ("get_weather", {"city": "Paris"}, 1), ("get_time", {}, 1)]  # whole, at the close
    assert answer(pieces).strip() == "Let me check."
    assert outcome.finish_reason == "tool_calls"


def test_tool_choice_named_required_and_none() -> None:
    tok = tokenizer(HERMES)
    # a named tool: the call's start is written after the prompt, the model continues
    source, script = writing('{"city": "Oslo"}}\n</tool_call>', tok)
    pieces, outcome = run(source, tool_choice={"type": "function",
                                               "function": {"name": "get_weather"}})
    assert pieces[0] == ToolCallDelta(0, "", id=pieces[0].id, name="get_weather")
    assert json.loads(calls_of(pieces)[0]["arguments"]) == {"city": "Oslo"}
    assert outcome.finish_reason == "tool_calls"
    assert tok.decode(script.prompt).endswith('<tool_call>\n{"name": "get_weather", '
                                              '"arguments": ')
    # required: the model names the tool
    source, _ = writing('get_time", "arguments": {}}\n</tool_call>', tok)
    pieces, outcome = run(source, tool_choice="required")
    assert [c["name"] for c in calls_of(pieces)] == ["get_time"]
    # none: the template gets no tools and the text is read as text
    source, script = writing("<tool_call>x</tool_call>", tok)
    pieces, outcome = run(source, tool_choice="none")
    assert answer(pieces) == "<tool_call>x</tool_call>" and calls_of(pieces) == []
    assert "Weather of a city" not in tok.decode(script.prompt)
    assert outcome.finish_reason == "stop"
    assert source.options_in_force({"tool_choice": "none"})["tool_choice"] == "none"


def test_a_forced_call_closes_a_thinking_block_the_template_opened() -> None:
    r1 = HERMES.replace("<|im_start|>assistant\n{% endif %}",
                        "<|im_start|>assistant\n<think>\n{% endif %}")
    tok = tokenizer(r1)
    source, script = writing('{"city": "Oslo"}}</tool_call>', tok)
    pieces, outcome = run(source, tool_choice={"type": "function",
                                               "function": {"name": "get_weather"}})
    assert tok.decode(script.prompt).endswith('<think>\n\n</think>\n\n<tool_call>\n'
                                              '{"name": "get_weather", "arguments": ')
    assert not any(isinstance(p, Reasoning) for p in pieces)
    assert [c["name"] for c in calls_of(pieces)] == ["get_weather"]


def test_real_generation_with_a_forced_tool_never_hangs() -> None:
    # no script: the random model writes what it writes after the forced start
    tok = tokenizer(HERMES)
    source = TransformersSource(model(), tok, max_new_tokens=12)
    pieces, outcome = run(source, tool_choice={"type": "function",
                                               "function": {"name": "get_weather"}})
    assert isinstance(pieces[0], ToolCallDelta) and pieces[0].name == "get_weather"
    assert outcome.finish_reason in ("length", "tool_calls", "stop")
    assert outcome.figures["tokens"] <= 12


def test_templates_that_cannot_take_tools_are_refused() -> None:
    chatml = TransformersSource(model(), tokenizer(CHATML))
    assert not chatml.supports_tools
    with pytest.raises(ValueError, match="cannot call tools: its chat template does not "
                                         "take tools"):
        chatml.check_tools([WEATHER])
    chatml.check_tools([])  # no tools: nothing to refuse
    with pytest.raises(ValueError, match="does not take tools"):
        run(chatml)
    pieces, outcome = run(chatml, tools=[], max_new_tokens=4)  # without tools: as ever
    assert outcome.finish_reason in ("stop", "length")
    # a template that takes tools in a syntax nbstream does not know: say which to pick
    unknown = TransformersSource(model(), tokenizer(UNKNOWN))
    with pytest.raises(ValueError, match="tool_call_format="):
        unknown.check_tools([WEATHER])
    chosen = TransformersSource(model(), tokenizer(UNKNOWN), tool_call_format="hermes")
    assert chosen.supports_tools
    assert tool_support(tokenizer(HERMES), None) is None
    with pytest.raises(ValueError, match="tool_call_format must be"):
        TransformersSource(model(), tokenizer(HERMES), tool_call_format="json")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'response_template' but its tokenizer has none"):
        run(TransformersSource(model(), tokenizer(HERMES), tool_call_format="response_template"))
    hermes = TransformersSource(model(), tokenizer(HERMES))
    with pytest.raises(ValueError, match="not among the tools"):
        run(hermes, tool_choice={"type": "function", "function": {"name": "search"}})
    rt = tokenizer(HERMES)
    rt.response_template = QWEN_RESPONSE_TEMPLATE
    with pytest.raises(ValueError, match="use 'auto'"):
        run(TransformersSource(model(), rt), tool_choice="required")


@pytest.mark.model
def test_smollm2_cannot_take_tools_and_says_why() -> None:
    source = TransformersSource()  # the embedded model: only its tokenizer is loaded
    assert not source.supports_tools
    assert source.model is None  # the model itself was not loaded for the check
    with pytest.raises(ValueError, match="SmolLM2-135M-Instruct cannot call tools: its chat "
                                         "template does not take tools"):
        source.check_tools([WEATHER])
