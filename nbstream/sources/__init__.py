"""Sources of text pieces: one module per kind.

``TransformersSource`` is imported on first use, so that ``import nbstream``
does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Cancelled, ChatMessage, Emit, Source
from .iterator import IteratorSource
from .scripted import ScriptedFailure, ScriptedSource

if TYPE_CHECKING:
    from .transformers import TransformersSource

__all__ = [
    "Cancelled",
    "ChatMessage",
    "Emit",
    "IteratorSource",
    "ScriptedFailure",
    "ScriptedSource",
    "Source",
    "TransformersSource",
]


def __getattr__(name: str) -> Any:
    if name == "TransformersSource":
        from .transformers import TransformersSource

        return TransformersSource
    raise AttributeError(f"module 'nbstream.sources' has no attribute {name!r}")
