"""TransformersSource with a chat template that uses <think>: the splitter on real decoded pieces.

A tiny random-weight Llama and a byte-level BPE that knows ``<think>`` and ``</think>``
as (non-special) added tokens, with Qwen3-style and DeepSeek-R1-style templates. The
weights are random, so a logits processor makes the model write a given text token by
token: the pieces are what the tokenizer and the incremental decoder really produce.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import pytest

from nbstream.core.pieces import Reasoning
from nbstream.sources import TransformersSource
from nbstream.sources.base import ChatMessage

# the local transformers source and its helpers (torch, transformers, tokenizers:
# tiny random-weight models): not in `make test-fast`
pytestmark = pytest.mark.transformers

HELLO: list[ChatMessage] = [{"role": "user", "content": "Hello"}]

#: Qwen3's shape: the model opens the block itself; enable_thinking=False writes an
#: empty block into the prompt
QWEN3 = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "{{ '<think>\n\n</think>\n\n' }}{% endif %}{% endif %}"
)
#: DeepSeek-R1 distills' shape: the prompt ends inside an opened block
R1 = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n<think>\n' }}{% endif %}"
)
CORPUS = [
    "Let me think about it. The user says hello, so I greet them back.",
    "Hello! How can I help you today? I am fine, thank you.",
    "<think> </think> think thinking",
]


@functools.lru_cache(maxsize=1)
def _think_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=360, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(CORPUS, trainer)
    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend, bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|im_end|>", unk_token="<|endoftext|>")
    tok.add_tokens(["<think>", "</think>"])  # as Qwen3 has them: added, not special
    return tok


def think_tokenizer(template: str) -> Any:
    import copy

    tok = copy.deepcopy(_think_tokenizer())
    tok.chat_template = template
    return tok


@functools.lru_cache(maxsize=1)
def think_model() -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _think_tokenizer()
    config = LlamaConfig(
        vocab_size=-(-len(tok) // 64) * 64, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        max_position_embeddings=512, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


class Script:
    """A logits processor that makes the model write ``ids``, then end its turn."""

    def __init__(self, ids: list[int], eos: int) -> None:
        self.ids = [*ids, eos]
        self.start: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.start is None:
            self.start = int(input_ids.shape[1])
        step = int(input_ids.shape[1]) - self.start
        forced = torch.full_like(scores, -float("inf"))
        forced[:, self.ids[min(step, len(self.ids) - 1)]] = 0.0
        return forced


def writing(text: str, template: str, **options: Any) -> TransformersSource:
    from transformers import LogitsProcessorList

    tok = think_tokenizer(template)
    ids = tok.encode(text, add_special_tokens=False)
    return TransformersSource(
        think_model(), tok,
        logits_processor=LogitsProcessorList([Script(ids, tok.eos_token_id)]), **options)


def run(source: TransformersSource) -> tuple[list[str], Any]:
    pieces: list[str] = []
    outcome = source.generate(HELLO, pieces.append, threading.Event())
    return pieces, outcome


def split(pieces: list[str]) -> tuple[str, str]:
    return ("".join(p for p in pieces if isinstance(p, Reasoning)),
            "".join(p for p in pieces if not isinstance(p, Reasoning)))


def test_the_tags_are_single_tokens_of_the_tokenizer() -> None:
    tok = _think_tokenizer()
    ids = tok.encode("<think>\nhi\n</think>", add_special_tokens=False)
    assert tok.convert_tokens_to_ids("<think>") in ids
    assert tok.convert_tokens_to_ids("</think>") in ids


def test_qwen3_style_the_model_opens_and_closes_the_block() -> None:
    source = writing("<think>\nLet me think. The user says hello.\n</think>\n\nHello! How can I"
                     " help you?", QWEN3)
    pieces, outcome = run(source)
    assert split(pieces) == ("Let me think. The user says hello.", "Hello! How can I help you?")
    kinds = [isinstance(p, Reasoning) for p in pieces]
    assert kinds == sorted(kinds, reverse=True)  # all the reasoning, then the answer
    assert len(pieces) > 6  # streamed token by token, not in one piece at the end
    assert outcome.finish_reason == "stop"
    # every token was generated and counted, tags included
    assert outcome.figures["tokens"] == len(source.last_token_ids)


def test_tags_that_are_special_tokens_still_reach_the_splitter() -> None:
    # some tokenizers register the tags as special tokens, which decoding skips
    tok = think_tokenizer(QWEN3)
    tok.add_tokens(["<think>", "</think>"], special_tokens=True)
    from transformers import LogitsProcessorList

    text = "<think>\nLet me think.\n</think>\n\nHello!"
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.convert_tokens_to_ids("</think>") in ids
    source = TransformersSource(
        think_model(), tok,
        logits_processor=LogitsProcessorList([Script(ids, tok.eos_token_id)]))
    pieces, outcome = run(source)
    assert split(pieces) == ("Let me think.", "Hello!")  # and no end-of-turn text
    assert outcome.finish_reason == "stop"


def test_r1_style_the_template_opened_the_block() -> None:
    source = writing("The user says hello.\n</think>\n\nHello!", R1)
    pieces, outcome = run(source)
    assert split(pieces) == ("The user says hello.", "Hello!")
    assert outcome.finish_reason == "stop"


def test_enable_thinking_false_reaches_the_template() -> None:
    source = writing("Hello!", QWEN3, chat_template_kwargs={"enable_thinking": False})
    pieces, outcome = run(source)
    assert split(pieces) == ("", "Hello!")
    plain = writing("Hello!", QWEN3)
    _, plain_outcome = run(plain)
    # the empty block the template wrote: <think>, \n\n, </think>, \n\n
    assert outcome.usage["prompt_tokens"] > plain_outcome.usage["prompt_tokens"]


def test_cut_at_max_new_tokens_while_thinking_is_length() -> None:
    source = writing("<think>\nLet me think about it. The user says hello, so I greet them"
                     "\n</think>\n\nHello!", QWEN3, max_new_tokens=6)
    pieces, outcome = run(source)
    assert outcome.finish_reason == "length"
    assert outcome.figures["tokens"] == 6
    reasoning, answer = split(pieces)
    assert reasoning and answer == ""  # an unclosed block: reasoning to the end


def test_think_tags_false_leaves_the_text_as_it_is() -> None:
    text = "<think>\nhm\n</think>\n\nHello!"
    pieces, _ = run(writing(text, QWEN3, think_tags=False))
    assert "".join(pieces) == text and not any(isinstance(p, Reasoning) for p in pieces)


def test_a_template_without_think_tags_is_left_alone() -> None:
    text = "<think>\nhm\n</think>\n\nHello!"
    plain = R1.replace("<think>\n", "")
    assert "think" not in plain
    pieces, _ = run(writing(text, plain))
    assert "".join(pieces) == text
    pieces, _ = run(writing(text, plain, think_tags=True))
    assert split(pieces) == ("hm", "Hello!")


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="think_tags"):
        TransformersSource(think_model(), _think_tokenizer(), think_tags="auto")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="chat_template_kwargs"):
        TransformersSource(think_model(), _think_tokenizer(),
                           chat_template_kwargs="enable_thinking")  # type: ignore[arg-type]
