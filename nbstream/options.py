"""The options every widget takes, declared once: rate, time limits, buffer size.

``ChatWidget``, ``StreamView``, ``Compare`` and :func:`~nbstream.stream` all
accept the same keyword arguments. They are declared here, in one table
(:data:`OPTIONS`: name, type, default, meaning, check), and nowhere else:

* :class:`StreamOptions` is the ``TypedDict`` that type checkers and IDEs read
  (``**options: Unpack[StreamOptions]`` in each constructor); an import-time
  check keeps it equal to the table;
* :func:`with_options` gives each constructor an explicit signature and a
  docstring section built from the table, so ``help()``, Jupyter's Shift-Tab
  and ``inspect.signature`` list the options by name with their defaults;
* :func:`parse_options` validates a call's options (in the caller's thread, so
  a bad value raises in the caller's cell) and rejects unknown keyword
  arguments with a suggestion (``system=`` -> ``system_prompt``).

Pure functions and immutable data: any thread may use this module.
"""

from __future__ import annotations

import difflib
import inspect
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

from .core.attachment import AttachmentLimits
from .core.defaults import DEFAULT_INTERVAL, DEFAULT_MAX_PENDING
from .core.stream import Limits

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover
    from typing_extensions import Unpack

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_MAX_PENDING", "OPTIONS", "Option", "Options",
           "StreamOptions", "Unpack", "parse_options", "with_options"]

#: the attachment limits of a widget given none (AttachmentLimits' own defaults)
DEFAULT_ATTACHMENT_LIMITS = AttachmentLimits()


class StreamOptions(TypedDict, total=False):
    """The keyword options of every nbstream widget (see :data:`OPTIONS`)."""

    interval: float
    first_token_timeout: float | None
    stall_timeout: float | None
    total_timeout: float | None
    max_pending: int
    include_reasoning_in_history: bool
    attachment_limits: AttachmentLimits


def _a_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


def _positive_seconds(name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "a number of seconds or None" if optional else "a number of seconds"
        raise TypeError(f"{name} must be {kind}, got {type(value).__name__} {value!r}")
    if not (value > 0 and math.isfinite(value)):
        hint = " (None: no limit)" if optional else ""
        raise ValueError(f"{name} must be a positive, finite number of seconds{hint}, "
                         f"got {value!r}")


def _attachment_limits(name: str, value: object) -> None:
    if not isinstance(value, AttachmentLimits):
        raise TypeError(f"{name} must be an nbstream AttachmentLimits(...), got "
                        f"{type(value).__name__} {value!r}")


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int (characters), got {type(value).__name__} "
                        f"{value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive number of characters, got {value!r}")


@dataclass(frozen=True)
class Option:
    """One widget option: its name, type (as shown), default and meaning."""

    name: str
    annotation: str
    default: Any
    doc: str
    check: Callable[[str, object], None]


#: every option, in the order signatures list them
OPTIONS: tuple[Option, ...] = (
    Option("interval", "float", DEFAULT_INTERVAL,
           "flush interval in seconds: at most one message per interval per reply "
           "(the first piece is sent at once)",
           lambda n, v: _positive_seconds(n, v, optional=False)),
    Option("first_token_timeout", "float | None", None,
           "end a reply with status ``timeout`` when its first piece takes longer "
           "(seconds from the start of generation, model loading excluded)",
           lambda n, v: _positive_seconds(n, v, optional=True)),
    Option("stall_timeout", "float | None", None,
           "end a reply with status ``timeout`` when no piece comes for this long",
           lambda n, v: _positive_seconds(n, v, optional=True)),
    Option("total_timeout", "float | None", None,
           "end a reply with status ``timeout`` when it has not ended after this long",
           lambda n, v: _positive_seconds(n, v, optional=True)),
    Option("max_pending", "int", DEFAULT_MAX_PENDING,
           "bound of the unsent buffer in characters; a faster producer waits "
           "(backpressure) instead of growing memory",
           _positive_int),
    Option("include_reasoning_in_history", "bool", False,
           "keep earlier replies' reasoning (in ``<think>`` tags before the answer) in the "
           "history sent back to the model; by default it is left out, as servers and chat "
           "templates expect",
           _a_bool),
    Option("attachment_limits", "AttachmentLimits", DEFAULT_ATTACHMENT_LIMITS,
           "what a message and the conversation may carry in attachments (count and bytes "
           "per message, bytes per attachment and per chat) and how they are bounded "
           "(image side, text length, table rows); see ``nbstream.AttachmentLimits``",
           _attachment_limits),
)

_BY_NAME = {o.name: o for o in OPTIONS}
if set(_BY_NAME) != set(StreamOptions.__annotations__):  # pragma: no cover - a dev error
    raise AssertionError("StreamOptions and OPTIONS must declare the same options")


@dataclass(frozen=True)
class Options:
    """A validated set of widget options (build it with :func:`parse_options`)."""

    interval: float = DEFAULT_INTERVAL
    first_token_timeout: float | None = None
    stall_timeout: float | None = None
    total_timeout: float | None = None
    max_pending: int = DEFAULT_MAX_PENDING
    include_reasoning_in_history: bool = False
    attachment_limits: AttachmentLimits = DEFAULT_ATTACHMENT_LIMITS

    @property
    def limits(self) -> Limits:
        """The time limits of one reply."""
        return Limits(self.first_token_timeout, self.stall_timeout, self.total_timeout)


def parse_options(where: Callable[..., Any], options: Mapping[str, object]) -> Options:
    """Validate ``options`` given to ``where`` (a constructor or function).

    Raises :class:`TypeError` for an unknown keyword argument (naming the
    closest accepted one) or a value of the wrong type, :class:`ValueError`
    for an out-of-range value; each message names the argument.
    """
    name = getattr(where, "__qualname__", getattr(where, "__name__", "this call"))
    name = name.removesuffix(".__init__")
    for key, value in options.items():
        option = _BY_NAME.get(key)
        if option is None:
            raise TypeError(_unknown(name, key, where))
        option.check(key, value)
    return Options(**options)  # type: ignore[arg-type]


def _unknown(name: str, key: str, where: Callable[..., Any]) -> str:
    try:
        accepted = [p for p in inspect.signature(where).parameters
                    if p not in ("self", "options", "kwargs")]
    except (TypeError, ValueError):  # pragma: no cover - builtins
        accepted = []
    accepted += [o.name for o in OPTIONS if o.name not in accepted]
    close = difflib.get_close_matches(key, accepted, n=1, cutoff=0.5)
    if not close:  # a prefix or part of a name: system -> system_prompt
        close = [a for a in accepted if key in a or a in key][:1]
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (f"{name}() got an unexpected keyword argument {key!r}{hint} "
            f"(it accepts: {', '.join(accepted)})")


F = TypeVar("F", bound=Callable[..., Any])


def with_options(fn: F) -> F:
    """Give ``fn`` (which takes ``**options: Unpack[StreamOptions]``) a signature
    and a docstring section that list every option by name, type and default."""
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    params += [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default,
                                 annotation=o.annotation) for o in OPTIONS]
    fn.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    fn.__doc__ = (fn.__doc__ or "").rstrip() + "\n\n" + options_doc()
    return fn


def options_doc(indent: str = "        ") -> str:
    """The options as a docstring section."""
    lines = [f"{indent}Options (keyword only, the same for every nbstream widget):", ""]
    for o in OPTIONS:
        lines.append(f"{indent}``{o.name}`` ({o.annotation}, default {o.default!r})")
        lines.append(f"{indent}    {o.doc}.")
    return "\n".join(lines)
