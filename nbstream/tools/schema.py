"""A Python function's JSON Schema, as a model is handed a tool.

Built with pydantic (``pydantic.create_model`` over the function's parameters):
a well-kept library that already knows type hints (``int``, ``float``,
``str``, ``bool``, ``list[...]``, ``dict[str, ...]``, ``Literal``, ``Enum``,
``Optional`` / ``X | None``, ``TypedDict``, dataclasses, pydantic models) and
``Annotated`` descriptions (``Annotated[str, "the city"]`` or
``Annotated[str, Field(description="the city")]``). The same model then checks
and converts the model's arguments before the call (a pydantic model parameter
receives an instance, not a dict). transformers' ``get_json_schema`` does the
same for chat templates but costs a 2.8 s import of transformers and knows no
pydantic models; pydantic imports in 0.4 s and needs no torch (measured here).

Descriptions come from the docstring: its first paragraph describes the tool,
and each parameter is described in a Google-style ``Args:`` section
(``city: the city``), a reST ``:param city: the city`` line, or by
``Annotated``. A parameter the model must fill and nobody described, a
parameter with no type hint or a type pydantic cannot express, ``*args`` and
``**kwargs`` raise :class:`ToolDefinitionError` at registration, naming the
function and the parameter.

A parameter annotated :class:`threading.Event` is not the model's: it receives
the call's cancellation signal (set when the user stops the turn or the tool
times out), and is left out of the schema.

Pure functions; any thread.
"""

from __future__ import annotations

import inspect
import re
import threading
import typing
from collections.abc import Callable
from typing import Any

from ..extras import require_tools

__all__ = ["Signature", "ToolDefinitionError", "function_signature"]

#: a tool's name as OpenAI's API accepts it
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: sections of a Google-style docstring that list parameters
_ARGS_HEADERS = ("args:", "arguments:", "parameters:", "params:")
_OTHER_HEADERS = re.compile(
    r"^(returns?|yields?|raises?|examples?|notes?|see also|attributes?|warnings?|references?)"
    r"\s*:\s*$", re.IGNORECASE)
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


class ToolDefinitionError(TypeError):
    """A function that cannot be a tool: what is wrong, naming the function and the parameter."""


class Signature(typing.NamedTuple):
    """What :func:`function_signature` found: the schema and how to call the function."""

    name: str
    description: str
    #: the JSON Schema of the arguments (an object)
    parameters: dict[str, Any]
    #: pydantic model that checks and converts the model's arguments
    model: Any
    #: the parameter that receives the cancellation event, if any
    cancel_param: str | None


def function_signature(fn: Callable[..., Any], name: str | None = None,
                       description: str | None = None) -> Signature:
    """The JSON Schema of ``fn``'s parameters and its description, or a
    :class:`ToolDefinitionError` naming what is missing."""
    require_tools()
    import pydantic

    where = _qualname(fn)
    if not callable(fn):
        raise ToolDefinitionError(f"a tool must be a function, got {type(fn).__name__}")
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    if not isinstance(tool_name, str) or not NAME.match(tool_name):
        raise ToolDefinitionError(
            f"tool {where}: its name {tool_name!r} must be 1-64 letters, digits, '_' or '-' "
            "(give one with name=...)")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"tool {where}: its signature cannot be read ({exc})") from None
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve, ...
        raise ToolDefinitionError(f"tool {where}: its type hints cannot be resolved ({exc})"
                                  ) from None
    summary, param_docs = parse_docstring(inspect.getdoc(fn) or "")
    text = description if description is not None else summary
    if not text.strip():
        raise ToolDefinitionError(
            f"tool {where}: it has no description; the model needs one (write a docstring, "
            "or give description=...)")
    fields: dict[str, Any] = {}
    cancel_param: str | None = None
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {where}: parameter {pname!r}: *args and **kwargs "
                                      "cannot be described to a model; name each parameter")
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(f"tool {where}: parameter {pname!r} is positional-only; "
                                      "the model passes arguments by name")
        hint = hints.get(pname, inspect.Parameter.empty)
        if hint is threading.Event:
            cancel_param = pname
            continue
        if hint is inspect.Parameter.empty:
            raise ToolDefinitionError(f"tool {where}: parameter {pname!r} has no type hint; "
                                      f"the schema needs one (e.g. `{pname}: str`)")
        hint, annotated_doc = _annotated_description(hint)
        doc = annotated_doc or param_docs.get(pname)
        if not doc:
            raise ToolDefinitionError(
                f"tool {where}: parameter {pname!r} has no description; add it to the "
                f"docstring's Args section (`{pname}: what it is`) or annotate it "
                f"(`{pname}: Annotated[{_type_name(hint)}, \"what it is\"]`)")
        try:
            pydantic.TypeAdapter(hint).json_schema()
        except Exception as exc:
            raise ToolDefinitionError(
                f"tool {where}: parameter {pname!r}: its type {_type_name(hint)} cannot be "
                f"expressed as JSON Schema ({type(exc).__name__}: {_first_line(exc)})") from None
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hint, pydantic.Field(default, description=doc))
    try:
        model = pydantic.create_model(f"{tool_name}_arguments", **fields)
        schema = model.model_json_schema()
    except Exception as exc:
        raise ToolDefinitionError(f"tool {where}: its parameters cannot be expressed as JSON "
                                  f"Schema ({type(exc).__name__}: {_first_line(exc)})") from None
    return Signature(tool_name, text.strip(), clean_schema(schema), model, cancel_param)


def _annotated_description(hint: Any) -> tuple[Any, str | None]:
    """``Annotated[T, "doc"]`` -> (``T``, "doc"); a Field description stays in the hint."""
    if typing.get_origin(hint) is typing.Annotated:
        base, *meta = typing.get_args(hint)
        docs = [m for m in meta if isinstance(m, str)]
        rest = [m for m in meta if not isinstance(m, str)]
        described = next((getattr(m, "description", None) for m in rest
                          if getattr(m, "description", None)), None)
        hint = typing.Annotated[(base, *rest)] if rest else base
        return hint, docs[0] if docs else described
    return hint, None


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(the description, {parameter: description}) of a Google-style or reST docstring.

    The description is everything before the first section header or ``:param``
    line; a parameter's description may continue on indented lines.
    """
    lines = doc.expandtabs().splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    i = 0
    in_summary = True
    current: str | None = None
    args_indent: int | None = None
    section = ""
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        i += 1
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            in_summary, section = False, "sphinx"
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if stripped.lower() in _ARGS_HEADERS:
            in_summary, section, current, args_indent = False, "args", None, None
            continue
        if _OTHER_HEADERS.match(stripped) or (stripped.startswith(":")
                                              and stripped.count(":") >= 2):
            in_summary, section, current = False, "other", None
            continue
        if in_summary:
            summary.append(line)
            continue
        if not stripped:
            continue
        if section == "args":
            m = re.match(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if m and (args_indent is None or indent <= args_indent):
                args_indent = indent
                current = m.group(1).lstrip("*")
                params[current] = m.group(2).strip()
            elif current is not None:
                params[current] = (params[current] + " " + stripped).strip()
        elif section == "sphinx" and current is not None and indent > 0:
            params[current] = (params[current] + " " + stripped).strip()
    text = "\n".join(summary).strip()
    return text, params


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without pydantic's ``title`` noise, with ``$ref``s inlined where they
    are not recursive (servers and chat templates handle ``$defs`` unevenly)."""
    defs = schema.get("$defs", {})

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                key = ref.removeprefix("#/$defs/")
                if key in defs and key not in seen:
                    merged = {**defs[key], **{k: v for k, v in node.items() if k != "$ref"}}
                    return walk(merged, (*seen, key))
                return node
            return {k: walk(v, seen) for k, v in node.items()
                    if not (k == "title" and isinstance(v, str)) and k != "$defs"}
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        return node

    out = walk(schema, ())
    if _has_ref(out):  # recursive: keep the definitions it needs
        out["$defs"] = {k: walk(v, ()) for k, v in defs.items()}
    out.setdefault("properties", {})
    out["type"] = "object"
    return out  # type: ignore[no-any-return]


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


def _qualname(fn: object) -> str:
    return str(getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn))))


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else repr(hint).replace("typing.", "")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]
