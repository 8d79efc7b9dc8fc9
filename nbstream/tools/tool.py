"""A tool: a Python function a model may call, with its schema and its rules.

``Tool(fn)`` (or ``@tool``) reads the function's JSON Schema at once
(:mod:`nbstream.tools.schema`: a bad tool fails here, naming the function and
the parameter) and keeps the rules of its calls:

* ``approve``: whether a call runs without asking. **Safe by default:**
  ``False``, a person approves each call (the card's Allow / Always allow /
  Deny, or ``chat.approve(call_id)`` / ``chat.deny(call_id)``) before it runs.
  ``True`` runs every call at once; a function ``approve(args) -> bool`` decides
  per call (True: run at once). A tool that runs code (``runs_code=True``)
  always asks, call by call: ``approve`` must stay False and "Always allow" is
  not offered for it.
* ``timeout``: seconds a call may run (default :data:`DEFAULT_TIMEOUT`); past
  it the call ends with an error the model is told of, its cancellation event
  is set, and its thread is abandoned (a late result is dropped and logged).
* ``main_thread``: run on the kernel's main thread, between cells (or while a
  cell waits in ``reply.wait()``), never beside a cell: for a tool that reads
  or changes the notebook's variables. Every other tool runs on a thread of
  its own, so the notebook stays responsive.

A ``Tool`` is still callable like the function it wraps (``get_weather("Paris")``).
Immutable once made; any thread.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, overload

from ..core.pieces import ToolSchema
from .schema import ToolDefinitionError, function_signature

if TYPE_CHECKING:
    from .mcp import McpServer

__all__ = ["DEFAULT_TIMEOUT", "Approve", "Tool", "ToolArgumentsError", "as_tools", "tool"]

#: seconds a tool call may run unless its tool says otherwise
DEFAULT_TIMEOUT = 60.0

#: a tool's approval policy: True runs calls at once, False asks, a function decides per call
Approve = bool | Callable[[dict[str, Any]], bool]


class ToolArgumentsError(ValueError):
    """The model's arguments do not fit the tool's schema (the model is told why)."""


class Tool:
    """A function the model may call (see the module docstring for the rules)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        approve: Approve = False,
        runs_code: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        main_thread: bool = False,
    ) -> None:
        sig = function_signature(fn, name, description)
        self._init(sig.name, sig.description, sig.parameters, fn, approve=approve,
                   runs_code=runs_code, timeout=timeout, main_thread=main_thread)
        self._model = sig.model
        self._cancel_param = sig.cancel_param
        functools.update_wrapper(self, fn)

    @classmethod
    def remote(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        call: Callable[[dict[str, Any], threading.Event], Any],
        *,
        approve: Approve = False,
        runs_code: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> Tool:
        """A tool described by its schema and run by ``call(args, cancel)`` (an MCP
        server's tool): its arguments are handed over as the model wrote them."""
        self = cls.__new__(cls)
        self._init(name, description, dict(parameters), call, approve=approve,
                   runs_code=runs_code, timeout=timeout, main_thread=False)
        self._model = None
        self._cancel_param = None
        return self

    def _init(self, name: str, description: str, parameters: dict[str, Any],
              fn: Callable[..., Any], *, approve: Approve, runs_code: bool,
              timeout: float | None, main_thread: bool) -> None:
        where = f"tool {name!r}"
        if not (isinstance(approve, bool) or callable(approve)):
            raise ToolDefinitionError(f"{where}: approve must be True, False or a function "
                                      f"args -> bool, got {type(approve).__name__}")
        if runs_code and approve is not False:
            raise ToolDefinitionError(f"{where} runs code: each call needs a person's approval, "
                                      "so approve must stay False")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(
                timeout, (int, float)) or not timeout > 0):
            raise ToolDefinitionError(f"{where}: timeout must be a positive number of seconds "
                                      f"or None, got {timeout!r}")
        self.name = name
        self.description = description
        self.parameters = parameters
        self.fn = fn
        self.approve = approve
        self.runs_code = bool(runs_code)
        self.timeout = None if timeout is None else float(timeout)
        self.main_thread = bool(main_thread)

    # ------------------------------------------------------------------ the model's view
    @property
    def schema(self) -> ToolSchema:
        """OpenAI's function-tool JSON, as a source hands it to its model."""
        return {"type": "function", "function": {"name": self.name,
                                                 "description": self.description,
                                                 "parameters": self.parameters}}

    # ---------------------------------------------------------------------- calls
    def needs_approval(self, args: Mapping[str, Any]) -> bool:
        """Whether a call with ``args`` waits for a person (a raising policy asks)."""
        if self.runs_code or self.approve is False:
            return True
        if self.approve is True:
            return False
        try:
            return not bool(self.approve(dict(args)))
        except Exception:
            return True

    @property
    def always_allowable(self) -> bool:
        """Whether "Always allow" may be chosen for this tool (not for one that runs code)."""
        return not self.runs_code

    def check_arguments(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments converted to the parameters' types; :class:`ToolArgumentsError`
        says what does not fit."""
        if self._model is None:
            return dict(args)
        import pydantic

        try:
            parsed = self._model.model_validate(dict(args))
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()[:5])
            raise ToolArgumentsError(f"the arguments do not fit {self.name}: {problems}"
                                     ) from None
        return {k: getattr(parsed, k) for k in type(parsed).model_fields}

    def invoke(self, args: Mapping[str, Any], cancel: threading.Event) -> Any:
        """Run one call: ``args`` checked, ``cancel`` handed to the parameter that takes it."""
        if self._model is None:
            return self.fn(dict(args), cancel)
        kwargs = self.check_arguments(args)
        if self._cancel_param is not None:
            kwargs[self._cancel_param] = cancel
        return self.fn(**kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        rules = []
        if self.runs_code:
            rules.append("runs_code")
        rules.append(f"approve={'<function>' if callable(self.approve) and not isinstance(self.approve, bool) else self.approve}")  # noqa: E501
        if self.main_thread:
            rules.append("main_thread")
        return f"Tool({self.name!r}, {', '.join(rules)})"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(*, name: str | None = ..., description: str | None = ..., approve: Approve = ...,
         runs_code: bool = ..., timeout: float | None = ..., main_thread: bool = ...,
         ) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, **rules: Any) -> Any:
    """``@tool`` or ``@tool(approve=True, timeout=10)``: the function as a :class:`Tool`."""
    if fn is not None:
        return Tool(fn, **rules)
    return lambda f: Tool(f, **rules)


def as_tools(items: Iterable[Any] | None, where: str) -> tuple[Tool, ...]:
    """``tools=[...]`` of a widget, checked: each a :class:`Tool`, a function (made a
    Tool, approval required) or an :class:`~nbstream.tools.mcp.McpServer` (its tools);
    names unique. Raises naming ``where`` and the item."""
    if items is None:
        return ()
    if callable(items) or isinstance(items, (str, bytes, Tool)):
        raise TypeError(f"{where}(tools=...) takes a list of tools, got "
                        f"{type(items).__name__}; write tools=[{getattr(items, '__name__', 'f')}]")
    out: list[Tool] = []
    for i, item in enumerate(items):
        if isinstance(item, Tool):
            out.append(item)
        elif _is_mcp(item):
            out.extend(item.tools())
        elif callable(item):
            out.append(Tool(item))
        else:
            raise TypeError(f"{where}(tools=...): item {i} must be a function, a Tool or an "
                            f"McpServer, got {type(item).__name__}")
    seen: set[str] = set()
    for t in out:
        if t.name in seen:
            raise ValueError(f"{where}(tools=...): two tools are named {t.name!r}; give one "
                             "another name with Tool(fn, name=...)")
        seen.add(t.name)
    return tuple(out)


def _is_mcp(item: object) -> McpServer | None:
    from .mcp import McpServer  # no import of mcp itself unless one is used

    return item if isinstance(item, McpServer) else None
