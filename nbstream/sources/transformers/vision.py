"""Vision models through their processor: a conversation with images into a model's inputs.

A :class:`~nbstream.sources.transformers.TransformersSource` is a *vision* source
when it has a processor: given (``processor=``, with a model object), or found
in a model folder (a ``preprocessor_config.json`` or ``processor_config.json``
beside its ``config.json``), then loaded with ``AutoProcessor`` and the model with
``AutoModelForImageTextToText`` (LLaVA, Idefics3 / SmolVLM, Qwen2-VL, Gemma 3...).

:func:`conversation` turns the messages a source is handed into what a
processor's chat template reads: every content a list of parts, an image
attachment an ``{"type": "image", "image": <PIL image>}`` part before the text
(where models were trained to find it), a text attachment a text part
(:func:`~nbstream.core.attachment.text_block`). :func:`inputs` runs the
processor's chat template and returns tensors on the model's device, the
pixel values in the model's dtype.

Runs on the source's worker thread (like the rest of generation).
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...core.attachment import Attachment, text_block
from ...core.pieces import ChatMessage

__all__ = ["PROCESSOR_FILES", "conversation", "inputs", "is_vision_folder"]

#: a model folder holding one of these has a processor (images, audio...)
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")


def is_vision_folder(location: str | os.PathLike[str]) -> bool:
    """Whether a model folder has a processor (so its model reads images)."""
    folder = Path(location)
    return folder.is_dir() and any((folder / name).is_file() for name in PROCESSOR_FILES)


def image_of(att: Attachment) -> Any:
    """An image attachment as a PIL image (RGB: what image processors expect)."""
    from PIL import Image

    with Image.open(io.BytesIO(att.data)) as im:
        im.seek(0)
        return im.convert("RGB")


def conversation(messages: Sequence[ChatMessage],
                 system_prompt: str | None = None) -> list[dict[str, Any]]:
    """``messages`` as a processor's chat template reads them (see the module docstring);
    ``system_prompt`` first when the conversation has no system turn."""
    out: list[dict[str, Any]] = []
    if system_prompt is not None and not (messages and messages[0]["role"] == "system"):
        out.append({"role": "system", "content": [{"type": "text", "text": system_prompt}]})
    for m in messages:
        parts: list[dict[str, Any]] = []
        atts = m.get("attachments", ())
        parts += [{"type": "image", "image": image_of(a)} for a in atts if a.kind == "image"]
        if m["content"]:
            parts.append({"type": "text", "text": m["content"]})
        parts += [{"type": "text", "text": text_block(a)} for a in atts if a.kind == "text"]
        out.append({"role": m["role"], "content": parts})
    return out


def inputs(processor: Any, model: Any, turns: list[dict[str, Any]],
           chat_template_kwargs: dict[str, Any]) -> Any:
    """The model's inputs for ``turns`` (from :func:`conversation`): token ids,
    attention mask and the processor's image tensors, on the model's device."""
    if not getattr(processor, "chat_template", None):
        raise ValueError(f"the processor {type(processor).__name__} has no chat template; "
                         "set processor.chat_template")
    batch = processor.apply_chat_template(
        turns,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        return_tensors="pt",
        **chat_template_kwargs,
    )
    batch = batch.to(model.device)
    dtype = getattr(model, "dtype", None)
    for key in ("pixel_values", "pixel_values_videos"):
        value = batch.get(key)
        if value is not None and dtype is not None and value.is_floating_point():
            batch[key] = value.to(dtype)
    return batch
