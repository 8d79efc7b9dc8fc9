"""The options every widget takes are declared once (nbstream/options.py) and every
widget's signature and help() list them by name, type and default."""

from __future__ import annotations

import inspect
import pydoc
from typing import Any

import pytest

from nbstream import ChatWidget, Compare, StreamView, stream
from nbstream.core.pump import DEFAULT_INTERVAL
from nbstream.options import OPTIONS, Options, StreamOptions

NAMES = ["interval", "first_token_timeout", "stall_timeout", "total_timeout", "max_pending",
         "include_reasoning_in_history", "attachment_limits"]
ENTRY_POINTS: list[Any] = [ChatWidget, StreamView, Compare, stream]


def test_one_declaration() -> None:
    assert [o.name for o in OPTIONS] == NAMES
    assert list(StreamOptions.__annotations__) == NAMES
    assert [f for f in Options.__dataclass_fields__] == NAMES
    assert {o.name: o.default for o in OPTIONS} == {
        f: getattr(Options(), f) for f in NAMES}
    assert Options().interval == DEFAULT_INTERVAL


@pytest.mark.parametrize("fn", ENTRY_POINTS, ids=lambda f: f.__name__)
def test_signatures_list_every_option_as_a_keyword(fn: Any) -> None:
    params = inspect.signature(fn).parameters
    for o in OPTIONS:
        p = params[o.name]
        assert p.kind is inspect.Parameter.KEYWORD_ONLY
        assert p.default == o.default and p.annotation == o.annotation
    assert not [p for p in params.values() if p.kind is inspect.Parameter.VAR_KEYWORD]


@pytest.mark.parametrize("fn", ENTRY_POINTS, ids=lambda f: f.__name__)
def test_help_shows_the_options_with_their_meaning(fn: Any) -> None:
    target = fn.__init__ if isinstance(fn, type) else fn  # what help(cls) lists first
    text = pydoc.render_doc(target, renderer=pydoc.plaintext)
    for o in OPTIONS:
        assert f"{o.name}: '{o.annotation}' = {o.default!r}" in text
        assert f"``{o.name}`` ({o.annotation}, default {o.default!r})" in text


def test_the_widget_uses_what_it_was_given() -> None:
    from nbstream.sources import ScriptedSource

    w = ChatWidget(ScriptedSource("hi there", rate=1000), interval=0.2, stall_timeout=5,
                   max_pending=64)
    assert w.options == Options(interval=0.2, stall_timeout=5, max_pending=64)
    r = w.send("go")
    assert r.wait(10) == "hi there"
    w.close()
