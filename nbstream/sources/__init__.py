"""Sources of text pieces: one module per kind.

``TransformersSource`` is imported on first use, so that ``import nbstream``
does not import torch; so are ``OpenAISource`` and ``ResponsesSource``, so
that httpx (the ``openai`` extra) is needed only by those who use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import (
    Cancelled,
    ChatMessage,
    Emit,
    Outcome,
    Reasoning,
    Source,
    SourceError,
    ToolCallDelta,
    ToolSchema,
    report_loading,
)
from .iterator import IteratorSource
from .replay import RecordedOutcome, Recorder, Recording, RecordingError, ReplaySource, record
from .scripted import ScriptedCall, ScriptedFailure, ScriptedSource, call
from .think import ThinkSplitter, ThinkTags

if TYPE_CHECKING:
    from .openai import OpenAISource
    from .responses import ResponsesSource
    from .transformers import TransformersSource

__all__ = [
    "Cancelled",
    "ChatMessage",
    "Emit",
    "IteratorSource",
    "OpenAISource",
    "Outcome",
    "Reasoning",
    "RecordedOutcome",
    "Recorder",
    "Recording",
    "RecordingError",
    "ReplaySource",
    "ResponsesSource",
    "ScriptedCall",
    "ScriptedFailure",
    "ScriptedSource",
    "Source",
    "SourceError",
    "ThinkSplitter",
    "ThinkTags",
    "ToolCallDelta",
    "ToolSchema",
    "TransformersSource",
    "call",
    "record",
    "report_loading",
]


def __getattr__(name: str) -> Any:
    if name == "TransformersSource":
        from .transformers import TransformersSource

        return TransformersSource
    if name == "OpenAISource":
        from . import openai

        return getattr(openai, name)
    if name == "ResponsesSource":
        from . import responses

        return getattr(responses, name)
    raise AttributeError(f"module 'nbstream.sources' has no attribute {name!r}")
