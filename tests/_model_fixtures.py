"""Shared builders for the model tests (a plain module, imported by the tests).

* :func:`tiny_tokenizer` / :func:`tiny_model`: a byte-level BPE trained in
  memory and a random-weight two-layer Llama sized to it; built in well under a
  second, no files, for the generic generation paths. Every linear layer's
  width is a multiple of 64, so bitsandbytes can pack it in 4 bit on any CPU
  (on AVX-512-BF16 ones it packs inputs in blocks of 64, see
  ``nbstream.sources.transformers.devices.check_packable``).
* :func:`smollm2_tokenizer` / :func:`smollm2`: the embedded SmolLM2-135M-Instruct,
  converted once into the nbstream cache (``$NBSTREAM_CACHE_DIR`` or the user
  cache directory) and loaded from there; cached for the session.
"""

from __future__ import annotations

import functools
from typing import Any

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_CORPUS = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "Streaming text from a language model into a notebook, one token at a time.",
    "Hello world! How are you today? I am fine, thank you.",
    "日本語のテキスト、한국어 텍스트, 中文文本 and emoji 😀🎉👨‍👩‍👧",
]


@functools.lru_cache(maxsize=1)
def tiny_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_CORPUS, trainer)
    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
    )
    tok.chat_template = CHATML
    return tok


#: every linear layer of :func:`tiny_model` is this wide or a multiple of it
TINY_WIDTH = 64


def tiny_model(seed: int = 0, width: int = TINY_WIDTH) -> Any:
    """A random two-layer Llama; ``width`` is its hidden size (heads of 32)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=2,
        num_attention_heads=width // 32,
        num_key_value_heads=width // 32,
        max_position_embeddings=1024,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    model: Any = LlamaForCausalLM(config)
    return model.eval()


@functools.lru_cache(maxsize=1)
def smollm2() -> tuple[Any, Any]:
    from nbstream.sources.transformers import default_model

    return default_model.load_default()


def smollm2_tokenizer() -> Any:
    """The SmolLM2 tokenizer alone (loads the converted folder's tokenizer.json)."""
    return _smollm2_tokenizer()


@functools.lru_cache(maxsize=1)
def _smollm2_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from nbstream.sources.transformers import default_model

    return AutoTokenizer.from_pretrained(default_model.default_model_path(), local_files_only=True)


#: a chat template that places image parts (``{"type": "image"}``) as ``<image>`` tokens
VISION_CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<image>' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tiny_vision(seed: int = 0) -> tuple[Any, Any]:
    """A random-weight LLaVA (a one-layer CLIP vision tower, a two-layer Llama) and its
    processor, assembled in code from the tiny tokenizer (with an ``<image>`` token)
    and a CLIP image processor for 32-pixel images: no file, no download."""
    import copy

    import torch
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    try:  # transformers >= 5: the PIL backend, without torchvision
        from transformers import CLIPImageProcessorPil as ImageProcessor
    except ImportError:  # pragma: no cover - older transformers
        from transformers import CLIPImageProcessor as ImageProcessor

    tok = copy.deepcopy(tiny_tokenizer())
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    image_id = tok.convert_tokens_to_ids("<image>")
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                              num_attention_heads=2, image_size=32, patch_size=8,
                              projection_dim=32)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                       num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                       max_position_embeddings=1024, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_id,
                         vision_feature_layer=-1, vision_feature_select_strategy="default")
    torch.manual_seed(seed)
    model: Any = LlavaForConditionalGeneration(config).eval()
    images = ImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = LlavaProcessor(image_processor=images, tokenizer=tok, patch_size=8,
                               vision_feature_select_strategy="default",
                               num_additional_image_tokens=1, chat_template=VISION_CHATML)
    return model, processor
