"""Generation options per reply: sampling temperature, token limit, top-p, stop strings.

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
from typing import Any, TypedDict, cast

from .checks import short

__all__ = ["GENERATION_OPTIONS", "GenerationOptions", "check_generation"]


class GenerationOptions(TypedDict, total=False):
    """Options of one reply, for any source that takes them (all optional).

    ``temperature``: 0 is greedy decoding; higher samples more freely.
    ``top_p``: nucleus sampling, in (0, 1]. ``max_new_tokens`` (also spelled
    ``max_tokens``, as in OpenAI's API): the most tokens the reply may have.
    ``stop``: strings that end the reply where they appear.
    """

    temperature: float
    top_p: float
    max_new_tokens: int
    stop: list[str]


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


_CHECKS: dict[str, Callable[[str, object], Any]] = {
    "temperature": _temperature,
    "top_p": _top_p,
    "max_new_tokens": _max_new_tokens,
    "stop": _stop,
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

