"""The front end travels once per kernel: a shared runtime widget, a small loader per widget.

Sizes, not times. The saved-notebook bound (each widget beyond the first adds at
most 30 KB beyond its text) is checked on a notebook that nbclient executes
with ``store_widget_state=True``, as benchmarks/saved_notebook.py measures it.
That the saved notebook still renders with no kernel (reopened in JupyterLab,
and as nbconvert HTML) is tests/test_browser_flow.py's saved-state test.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _wait import wait_until
from _wire import send_from_view

import nbstream.widgets.runtime as rt_mod
from nbstream import ChatWidget, tool
from nbstream.core.pieces import Reasoning
from nbstream.sources import IteratorSource, ScriptedSource, call
from nbstream.widgets.runtime import Runtime, runtime_ref, shared_runtime, widget_esm

REPO = Path(__file__).resolve().parents[1]
STATIC = REPO / "nbstream" / "static"
needs_bundle = pytest.mark.skipif(
    not (STATIC / "widget.js").exists() or not (STATIC / "loader.js").exists(),
    reason="the front end is not built (npm run build in js/)",
)


def test_every_widget_names_the_one_runtime() -> None:
    a, b = ChatWidget(ScriptedSource("x")), ChatWidget(ScriptedSource("y"))
    try:
        rt = shared_runtime()
        assert a._runtime == b._runtime == f"IPY_MODEL_{rt.model_id}" == runtime_ref()
        assert isinstance(rt, Runtime) and rt.version and len(rt.version) == 16
    finally:
        a.close()
        b.close()


def test_a_closed_runtime_is_replaced() -> None:
    first = shared_runtime()
    first.close()
    w = ChatWidget(ScriptedSource("x"))
    try:
        assert shared_runtime() is not first
        assert w._runtime == f"IPY_MODEL_{shared_runtime().model_id}"
    finally:
        w.close()


@needs_bundle
def test_each_widget_carries_a_small_loader_and_no_css() -> None:
    w = ChatWidget(ScriptedSource("x"))
    try:
        assert len(str(w._esm)) <= 4096  # the loader, not the ~230 KB bundle
        assert str(w._esm) == widget_esm() == (STATIC / "loader.js").read_text()
        assert not w.has_trait("_css") or w._css == ""
        rt = shared_runtime()
        assert rt.bundle == (STATIC / "widget.js").read_text()
        assert rt.css == (STATIC / "widget.css").read_text()
    finally:
        w.close()


@needs_bundle
@pytest.mark.kernel  # nbclient runs the notebooks in real kernels
def test_saved_notebook_stores_the_bundle_once() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import saved_notebook as sn

    one = sn.measure(sn.execute(sn.cells("nbstream", 1)))
    eight = sn.measure(sn.execute(sn.cells("nbstream", 8)))
    per = sn.per_widget_beyond_text(eight)
    assert len(per) == 8
    assert max(per) <= 30 * 1024, per
    # 7 more widgets, each within the bound (their text counted apart)
    text = sum(m["bytes"] - m["beyond_text"] for m in eight["models"] if m["has_conversation"])
    text_one = sum(m["bytes"] - m["beyond_text"] for m in one["models"] if m["has_conversation"])
    growth = eight["file_bytes"] - one["file_bytes"] - (text - text_one)
    assert growth <= 7 * 30 * 1024, growth
    # the bundle is in the file once
    bundle_models = [m for m in eight["models"] if m["bytes"] > 100 * 1024]
    assert len(bundle_models) == 1, bundle_models


@needs_bundle
def test_in_marimo_each_widget_carries_the_whole_front_end(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeMarimo:
        @staticmethod
        def running_in_notebook() -> bool:
            return True

    monkeypatch.setitem(sys.modules, "marimo", FakeMarimo)
    assert rt_mod.standalone()
    # the whole front end, every chunk included (standalone.ts)
    assert rt_mod.widget_esm() == (STATIC / "standalone.js").read_text()
    assert rt_mod.widget_css() == (STATIC / "widget.css").read_text()
    assert rt_mod.widget_runtime_ref() == ""


@needs_bundle
def test_the_script_parsed_at_first_render_keeps_its_budget() -> None:
    # what a page parses before a chat first paints: the loader and the bundle; the
    # heavy renderers are chunks (js/build.mjs prints the figure with --sizes)
    first = sum((STATIC / name).stat().st_size for name in ("loader.js", "widget.js"))
    assert first <= 200 * 1024, f"{first / 1024:.1f} KB"
    for name in rt_mod.CHUNKS:  # each a module of its own, sent when needed
        assert (STATIC / f"{name}.js").exists(), name


# ------------------------------------------------------------------ chunks
@pytest.mark.parametrize(("text", "chunks"), [
    ("Plain **text**, a list:\n\n- a\n- b\n", set()),
    ("It costs $5 and $10, or $6.", set()),
    ("Euler: $e^{i\\pi} + 1 = 0$.", {"math"}),
    ("Display:\n\n$$\\int_0^1 x\\,dx$$\n", {"math"}),
    ("Also \\(a^2\\) and \\[b\\].", {"math"}),
    ("```python\nprint(1)\n```\n", {"highlight"}),
    ("~~~ rust\nfn main() {}\n~~~\n", {"highlight"}),
    ("```\nno language\n```\n\n    indented code\n", set()),
    ("Both: $x$\n\n```js\nf()\n```", {"math", "highlight"}),
    # the names the bundle decodes itself need nothing; a rarer one needs the table
    ("Fish &amp; chips &lt;3 &gt; &quot;a&quot; &apos;b&apos; a&nbsp;b", set()),
    ("Wait&hellip; &rarr; &alpha;", {"entities"}),
    ("&AMP; and &ampx; are not the common ones", {"entities"}),
    ("& alone, &; and &1x; are no names", set()),
    # what linkify-it may link (js/src/linkify.ts MAYBE_LINK): a scheme, //, an address
    ("See https://example.org/a?b=1.", {"linkify"}),
    ("HTTP://X.ORG, ftp://f.org/x and mailto:me@x.org", {"linkify"}),
    ("A protocol-relative //cdn.example.org/x.js", {"linkify"}),
    ("Write to ada.lovelace@example.org", {"linkify"}),
    ("A decorator, @property, and 1 @ 2: no address", set()),
    ("http without a colon, a/b, x:y and ratio 3:4", set()),
])
def test_the_chunks_a_text_needs(text: str, chunks: set[str]) -> None:
    assert rt_mod.needed_chunks(text) == chunks


def test_the_kernel_looks_for_links_as_the_view_does() -> None:
    # runtime._LINK mirrors js/src/linkify.ts MAYBE_LINK: were the kernel's narrower,
    # a view would have to ask for the chunk (a round trip, late while a cell runs)
    ts = (REPO / "js" / "src" / "linkify.ts").read_text()
    m = re.search(r"export const MAYBE_LINK = /(.+)/i;", ts)
    assert m is not None
    assert m.group(1).replace("\\/", "/") == rt_mod._LINK.pattern
    assert rt_mod._LINK.flags & re.IGNORECASE


def test_the_markdown_of_a_delta_is_its_text_and_its_tool_results_displays() -> None:
    # a tool call's arguments are JSON, shown plain: no chunk for a "$" in them
    args = [["tool", '{"price": "$5 and $x$", "code": "```py"}', 0], ["round", "", 1]]
    assert rt_mod.needed_chunks(rt_mod.markdown_of(args)) == set()  # type: ignore[arg-type]
    body = [["reasoning", "think &rarr;"], ["answer", "So $x$."], *args,
            ["tool_result", "told", 0, {"text/markdown": "```python\nx = 1\n```"}]]
    text = rt_mod.markdown_of(body)  # type: ignore[arg-type]
    assert "So $x$." in text and "```python" in text and "price" not in text
    assert rt_mod.needed_chunks(text) == {"math", "highlight", "entities"}
    assert rt_mod.markdown_of("plain $y$") == "plain $y$"


@needs_bundle
@pytest.mark.parametrize(("reply", "expected"), [
    ("Just text, **bold**, a table:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n", []),
    ("A formula: $\\frac{a}{b}$, and more.", ["math"]),
    ("Code:\n\n```python\nx = 1\n```\n", ["highlight"]),
    ("And so on&hellip;", ["entities"]),
    ("The docs: https://example.org/docs", ["linkify"]),
])
def test_the_runtime_carries_a_chunk_only_once_a_reply_needs_it(
        reply: str, expected: list[str]) -> None:
    rt = shared_runtime()
    rt.close()  # a fresh runtime: no chunk sent yet
    chat = ChatWidget(ScriptedSource(reply, rate=100_000))
    try:
        rt = shared_runtime()
        assert rt.chunks == {}
        chat.send("go").wait(30)
        for name in expected:  # the pump sends the chunk with the delta that needs it
            wait_until(lambda name=name: name in rt.chunks, timeout=10,
                       message=f"the {name} chunk was not sent")
        assert sorted(rt.chunks) == expected
        for name in expected:
            assert rt.chunks[name] == (STATIC / f"{name}.js").read_text()
    finally:
        chat.close()


def test_a_tool_part_is_any_run_of_the_tool_loop() -> None:
    # what the view's buffer.ts takes out of a reply's text into its tool parts
    assert not rt_mod.has_tool_part("plain $x$")
    assert not rt_mod.has_tool_part([["reasoning", "hm"], ["answer", "so"]])  # type: ignore[list-item]
    for run in (["tool", "{", 0], ["tool_result", "18", 0, {}], ["round", "", 1]):
        assert rt_mod.has_tool_part([["answer", "Let me look. "], run])  # type: ignore[list-item]


def _weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city
    """
    return f"18 °C in {city}"


@needs_bundle
def test_the_runtime_sends_the_tools_chunk_with_a_reply_first_tool_part() -> None:
    shared_runtime().close()  # a fresh runtime: no chunk sent yet
    sent: list[str] = []
    chat = ChatWidget(ScriptedSource(rounds=[["Let me check. ", call("weather", city="Oslo")],
                                             "It is 18 °C."], rate=100_000),
                      tools=[tool(_weather, name="weather")])  # asks for approval
    try:
        rt = shared_runtime()
        assert rt.chunks == {}
        # the chunk goes before the update that shows the call (the pump notes the
        # bodies first): when the reply's first tool part leaves, the runtime holds it
        real_send = chat._wire._send

        def send(msg: dict[str, Any], buffers: list[bytes] | None) -> None:
            state = msg.get("state", {})
            if any(isinstance(b, list) and rt_mod.has_tool_part(b) for b in state.values()):
                sent.append("tools" if "tools" in rt.chunks else "none")
            real_send(msg, buffers)

        chat._wire._send = send
        reply = chat.send("weather?")
        wait_until(lambda: len(chat.pending_approvals) == 1, timeout=10,
                   message="the call did not come to ask for approval")
        assert rt.chunks["tools"] == (STATIC / "tools.js").read_text()
        assert sent and set(sent) == {"tools"}, sent
        chat.approve(reply.tool_calls[0].id)
        assert reply.wait(30) == "Let me check. It is 18 °C."
        assert sorted(rt.chunks) == ["tools"]
        assert rt.provide("tools") is False  # sent once
    finally:
        chat.close()


@needs_bundle
def test_a_plain_chat_of_a_thinking_model_gets_no_tools_chunk() -> None:
    shared_runtime().close()

    def model(_messages: Any) -> Iterator[Any]:
        yield Reasoning("Let me think. ")
        yield "Just text."

    chat = ChatWidget(IteratorSource(model), tools=[tool(_weather, name="weather")])
    try:
        rt = shared_runtime()
        assert chat.send("hi").wait(30) == "Just text."
        assert chat.last is not None and chat.last.reasoning == "Let me think. "
        assert rt.chunks == {}  # tools offered, none called: no card, no chunk
    finally:
        chat.close()


@needs_bundle
def test_a_loaded_history_with_tool_calls_sends_the_tools_chunk() -> None:
    first = ChatWidget(ScriptedSource(rounds=[[call("weather", city="Oslo")], "It is 18 °C."],
                                      rate=100_000),
                       tools=[tool(_weather, name="weather", approve=True)])  # runs at once
    try:
        first.send("weather?").wait(30)
        msgs = first.to_messages()
    finally:
        first.close()
    shared_runtime().close()
    chat = ChatWidget(ScriptedSource("x"), messages=msgs)
    try:
        rt = shared_runtime()
        wait_until(lambda: "tools" in rt.chunks, timeout=10,
                   message="the tools chunk was not sent")
    finally:
        chat.close()


@needs_bundle
def test_a_loaded_history_sends_its_chunks_and_a_view_may_ask() -> None:
    shared_runtime().close()
    chat = ChatWidget(ScriptedSource("x"), messages=[
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "$$x^2$$"}])
    try:
        rt = shared_runtime()
        wait_until(lambda: "math" in rt.chunks, timeout=10, message="the math chunk was not sent")
        assert "highlight" not in rt.chunks
        # a view that meets a code block asks; an unknown chunk, a wrong shape or
        # another kind of message is ignored (checked by wire.parse_view_msg) and counted
        send_from_view(rt, {"kind": "chunk", "name": "nope"})
        send_from_view(rt, ["chunk"])
        send_from_view(rt, {"kind": "send", "text": "hi"})
        assert "highlight" not in rt.chunks
        assert rt._ignored.count == 3
        send_from_view(rt, {"kind": "chunk", "name": "highlight"})
        assert rt.chunks["highlight"] == (STATIC / "highlight.js").read_text()
        assert rt._ignored.count == 3
        with pytest.raises(ValueError, match="unknown chunk"):
            rt.provide("nope")
        assert rt.provide("math") is False  # sent once
    finally:
        chat.close()


@needs_bundle
def test_a_saved_notebook_with_one_plain_chat_is_light_and_holds_no_chunk() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import saved_notebook as sn

    def runtime_states(nb: dict[str, object]) -> list[dict[str, object]]:
        state = nb["metadata"]["widgets"][sn.WIDGET_STATE]["state"]  # type: ignore[index]
        return [m["state"] for m in state.values() if "bundle" in m["state"]]

    plain = sn.execute(sn.cells("nbstream", 1))
    assert sn.measure(plain)["file_bytes"] <= 250 * 1024
    assert [rt["chunks"] for rt in runtime_states(plain)] == [{}]
    rich = sn.execute(sn.cells("nbstream", 2, sn.REPLY_RICH))
    runtimes = runtime_states(rich)
    assert len(runtimes) == 1 and sorted(runtimes[0]["chunks"]) == ["highlight", "math"]  # type: ignore[arg-type]
    assert runtimes[0]["chunks"] == {  # type: ignore[comparison-overlap]
        name: (STATIC / f"{name}.js").read_text() for name in ("math", "highlight")}
