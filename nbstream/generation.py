"""Generation options per reply: sampling temperature, token limit, top-p, stop strings,
and whether the model may, must or must not call tools (``tool_choice``).

A widget holds one set of :class:`GenerationOptions` (``chat.generation``);
each new reply takes a copy when it is asked, hands it to its source
(:meth:`~nbstream.sources.Source.generate_with`) and shows the options in
force on its status line. The names are the same for every source; each
source maps them to its own (``max_new_tokens`` is ``max_tokens`` in an
OpenAI request, ``stop`` is ``stop_strings`` for transformers).

:func:`check_generation` validates a mapping in the caller's thread, so a
bad name or value raises in the caller's cell, naming the key. Pure
functions and immutable data: any thread.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal, TypedDict, cast

from .checks import short

__all__ = ["GENERATION_OPTIONS", "GenerationOptions", "NamedToolChoice", "ToolChoice",
           "check_generation", "check_tool_choice", "tool_choice_name"]


class _NamedFunction(TypedDict):
    name: str


class NamedToolChoice(TypedDict):
    """``tool_choice`` that makes the model call one tool: OpenAI's
    ``{"type": "function", "function": {"name": "get_weather"}}``."""

    type: Literal["function"]
    function: _NamedFunction


#: Whether the model may call tools in a reply: ``"auto"`` (it decides),
#: ``"none"`` (it must answer in text), ``"required"`` (it must call at least
#: one), or a :class:`NamedToolChoice` (it must call that tool).
ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice
_TOOL_CHOICE_WORDS = ("auto", "none", "required")


class GenerationOptions(TypedDict, total=False):
    """Options of one reply, for any source that takes them (all optional).

    ``temperature``: 0 is greedy decoding; higher samples more freely.
    ``top_p``: nucleus sampling, in (0, 1]. ``max_new_tokens`` (also spelled
    ``max_tokens``, as in OpenAI's API): the most tokens the reply may have.
    ``stop``: strings that end the reply where they appear.
    ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` or
    ``{"type": "function", "function": {"name": ...}}`` (see :data:`ToolChoice`;
    the Responses API's ``{"type": "function", "name": ...}`` is read as the same).
    """

    temperature: float
    top_p: float
    max_new_tokens: int
    stop: list[str]
    tool_choice: ToolChoice


#: the accepted names (``max_tokens`` is read as ``max_new_tokens``)
GENERATION_OPTIONS: tuple[str, ...] = tuple(GenerationOptions.__annotations__)
_ALIASES = {"max_tokens": "max_new_tokens"}


def _temperature(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: 'temperature' must be a number, got "
                        f"{type(value).__name__} {short(value)}")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}: 'temperature' must be a finite number >= 0 "
                         f"(0: greedy), got {value!r}")
    return float(value)


def _top_p(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: 'top_p' must be a number, got "
                        f"{type(value).__name__} {short(value)}")
    if not 0 < value <= 1:
        raise ValueError(f"{where}: 'top_p' must be in (0, 1], got {value!r}")
    return float(value)


def _max_new_tokens(where: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: 'max_new_tokens' must be an int, got "
                        f"{type(value).__name__} {short(value)}")
    if value < 1:
        raise ValueError(f"{where}: 'max_new_tokens' must be at least 1, got {value!r}")
    return value


def _stop(where: str, value: object) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(
            isinstance(s, str) and s for s in items):
        raise TypeError(f"{where}: 'stop' must be a non-empty str or a list of them, got "
                        f"{short(value)}")
    return list(items)


def _tool_choice(where: str, value: object) -> ToolChoice:
    return check_tool_choice(value, where)


_FORCE_HINT = "{'type': 'function', 'function': {'name': 'get_weather'}}"


def check_tool_choice(value: object, where: str = "tool_choice") -> ToolChoice:
    """``value`` as a :data:`ToolChoice`: one of the words, or a named function
    normalized to ``{"type": "function", "function": {"name": ...}}``.

    Raises :class:`ValueError` for an unknown word (suggesting the closest) and
    :class:`TypeError` for anything else, each message starting with ``where``.
    """
    if isinstance(value, str):
        if value in _TOOL_CHOICE_WORDS:
            return cast(ToolChoice, value)
        close = difflib.get_close_matches(value, _TOOL_CHOICE_WORDS, n=1)
        hint = (f"; did you mean {close[0]!r}?" if close else
                f"; to make the model call one tool, give {_FORCE_HINT} with its name")
        raise ValueError(f"{where}: 'tool_choice' must be 'auto', 'none', 'required' or a "
                         f"named function, got {value!r}{hint}")
    if isinstance(value, Mapping):
        name: object = None
        if value.get("type", "function") == "function":
            function = value.get("function")
            if isinstance(function, Mapping):
                name = function.get("name")
            elif function is None:
                name = value.get("name")  # the Responses API's flat shape
        if isinstance(name, str) and name:
            return {"type": "function", "function": {"name": name}}
        raise TypeError(f"{where}: a named 'tool_choice' must look like {_FORCE_HINT}, got "
                        f"{short(value)}")
    raise TypeError(f"{where}: 'tool_choice' must be 'auto', 'none', 'required' or "
                    f"{_FORCE_HINT}, got {type(value).__name__} {short(value)}")


def tool_choice_name(choice: ToolChoice | None) -> str | None:
    """The tool a :data:`ToolChoice` names, or None for the words (and None)."""
    if isinstance(choice, dict):
        return choice["function"]["name"]
    return None


_CHECKS: dict[str, Callable[[str, object], Any]] = {
    "temperature": _temperature,
    "top_p": _top_p,
    "max_new_tokens": _max_new_tokens,
    "stop": _stop,
    "tool_choice": _tool_choice,
}
assert set(_CHECKS) == set(GENERATION_OPTIONS)


def check_generation(options: object, where: str, *, label: str = "this source",
                     supported: Collection[str] | None = None) -> GenerationOptions:
    """``options`` (a mapping, or None for none) validated and normalized.

    Raises :class:`TypeError` for something that is not a mapping, an unknown
    name (suggesting the closest) or a value of the wrong type;
    :class:`ValueError` for an out-of-range value, both names given
    (``max_tokens`` and ``max_new_tokens``), or a name the source does not
    take (``supported``, named ``label``). Each message starts with ``where``.
    """
    if options is None:
        return GenerationOptions()
    if not isinstance(options, Mapping):
        raise TypeError(f"{where} must be a dict such as {{'temperature': 0.2, "
                        f"'max_new_tokens': 200}}, got {type(options).__name__} "
                        f"{short(options)}")
    out: dict[str, Any] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise TypeError(f"{where}: option names are str, got {short(key)}")
        name = _ALIASES.get(key, key)
        check = _CHECKS.get(name)
        if check is None:
            close = difflib.get_close_matches(key, [*GENERATION_OPTIONS, *_ALIASES], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{where}: unknown option {key!r}{hint} (accepted: "
                            f"{', '.join(GENERATION_OPTIONS)}, max_tokens)")
        if name in out:
            raise ValueError(f"{where}: give either 'max_tokens' or 'max_new_tokens', "
                             "not both")
        if supported is not None and name not in supported:
            takes = ", ".join(n for n in GENERATION_OPTIONS if n in supported) or "none"
            raise ValueError(f"{where}: {label} does not take {key!r} (it takes: {takes})")
        out[name] = check(where, value)
    return cast(GenerationOptions, out)

