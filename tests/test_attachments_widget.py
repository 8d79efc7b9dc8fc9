"""Attachments through the widgets (#21), in process: what a source sees, what is refused
at send (and that nothing changes then), the per-message keys and their binary previews
(sent once), the view's Send with buffers (checked again: the view is not trusted),
edit / to_messages / save / load, Compare and stream()."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from _wait import wait_until
from _wire import Wire, meta_ids, send_from_view
from ipywidgets.widgets.widget import _remove_buffers
from PIL import Image

from nbstream import (
    AttachmentLimits,
    ChatWidget,
    Compare,
    attach,
    stream,
)
from nbstream.core.attachment import (
    AttachmentTooLarge,
    ChatTooLarge,
    TooManyAttachments,
    UnsupportedAttachment,
)
from nbstream.sources import ChatMessage, IteratorSource, ScriptedSource, Source
from nbstream.sources.base import Emit


def png(size: tuple[int, int] = (40, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buf, "PNG")
    return buf.getvalue()


class TextOnly(Source):
    """A source that takes text only (the default ``accepts``)."""

    def __init__(self) -> None:
        self.seen: list[list[ChatMessage]] = []

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> None:
        self.seen.append(list(messages))
        emit("ok")


class Recording(IteratorSource):
    """Answers "ok", keeping every conversation it was handed."""

    def __init__(self) -> None:
        self.seen: list[list[ChatMessage]] = []

        def answer(messages: Sequence[ChatMessage]) -> list[str]:
            self.seen.append(list(messages))
            return ["ok"]

        super().__init__(answer, label="Recording")


@pytest.fixture
def figure() -> Any:
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 3, 2])
    yield fig
    plt.close(fig)


# ------------------------------------------------------------ from Python
def test_the_source_sees_the_attachments_with_the_question_and_in_the_history(
        figure: Any) -> None:
    src = Recording()
    chat = ChatWidget(src)
    df = pd.DataFrame({"a": [1, 2]})
    chat.send("What does this show?", attachments=[figure, df]).wait(10)
    chat.send("And then?").wait(10)
    first, second = src.seen
    (asked,) = first
    assert asked["content"] == "What does this show?"
    assert [(a.name, a.mime) for a in asked["attachments"]] == [
        ("figure.png", "image/png"), ("table.csv", "text/csv")]
    assert asked["attachments"][1].text == "a\n1\n2\n"
    # turn 2: the history holds turn 1 with its attachments, the new turn has none
    assert second[0]["attachments"] == asked["attachments"]
    assert "attachments" not in second[2]
    shown = chat.messages
    assert shown[0]["attachments"] == list(asked["attachments"])
    assert "attachments" not in shown[2]


def test_a_text_only_source_refuses_an_image_at_send_and_nothing_changes(figure: Any) -> None:
    src = TextOnly()
    chat = ChatWidget(src)
    wire = Wire(chat)
    with pytest.raises(UnsupportedAttachment, match=r"TextOnly takes no images \(it takes "
                       r"text/\*\); 'figure\.png' \(image/png\) cannot be sent"):
        chat.send("What does this plot show?", attachments=[figure])
    assert chat.messages == [] and chat.replies == []
    assert wire.msgs == [] and src.seen == []
    # a text file goes into the prompt of a text-only source
    chat.send("Sum it", attachments=[pd.DataFrame({"x": [1, 2]})]).wait(10)
    (asked,) = src.seen[0]
    assert asked["attachments"][0].text == "x\n1\n2\n"


def test_the_embedded_model_refuses_an_image_with_a_clear_error(figure: Any) -> None:
    from nbstream.sources import TransformersSource

    chat = ChatWidget(TransformersSource())  # nothing is loaded before a question
    with pytest.raises(UnsupportedAttachment, match="SmolLM2-135M-Instruct takes no images"):
        chat.send("What does this plot show?", attachments=[figure])
    assert chat.messages == []
    assert chat.attachment_policy["accepts"] == [["text/*"]]


def test_bad_items_are_refused_at_send_naming_them(tmp_path: Path) -> None:
    chat = ChatWidget(Recording())
    with pytest.raises(TypeError, match=r"send\(attachments=\.\.\.\): item 1: cannot attach"):
        chat.send("q", attachments=[png(), object()])
    with pytest.raises(FileNotFoundError, match="no such file"):
        chat.send("q", attachments=str(tmp_path / "missing.csv"))
    assert chat.messages == []


def test_each_limit_is_checked_at_send_with_its_own_error() -> None:
    chat = ChatWidget(Recording(), attachment_limits=AttachmentLimits(
        max_count=2, max_bytes=2000, max_message_bytes=100_000, max_chat_bytes=2500))
    with pytest.raises(TooManyAttachments):
        chat.send("q", attachments=[png(), png((5, 5)), png((6, 6))])
    with pytest.raises(AttachmentTooLarge):
        chat.send("q", attachments=[attach("x" * 3000, mime="text/plain")])
    chat.send("one", attachments=[attach("a" * 1500, mime="text/plain")]).wait(10)
    with pytest.raises(ChatTooLarge, match=r"the conversation holds 1\.5 KB of attachments"):
        chat.send("two", attachments=[attach("b" * 1500, mime="text/plain")])
    # the same content again costs nothing more (it is held once)
    chat.send("again", attachments=[attach("a" * 1500, mime="text/plain")]).wait(10)
    assert len(chat.messages) == 4


# ------------------------------------------------------------ on the wire
def test_a_preview_travels_once_as_a_binary_buffer_under_the_message_keys(figure: Any) -> None:
    chat = ChatWidget(Recording())
    wire = Wire(chat)
    chat.send("look", attachments=[figure, pd.DataFrame({"a": [1]})]).wait(10)
    wait_until(lambda: wire.shown() and wire.shown()[-1].get("status") == "done")
    for k in range(3):
        chat.send(f"more {k}").wait(10)
    with_buffers = [(m, b) for m, b in zip(wire.msgs, wire.buffers) if b]
    assert len(with_buffers) == 1  # one update, once, whatever came after
    msg, bufs = with_buffers[0]
    assert msg["buffer_paths"] == [["m1.a1"]]
    preview = Image.open(io.BytesIO(bufs[0]))
    assert preview.format == "PNG" and max(preview.size) <= 384
    meta = msg["state"]["m1"]
    fig_meta, table_meta = meta["attachments"]
    assert fig_meta["name"] == "figure.png" and fig_meta["kind"] == "image"
    assert fig_meta["preview"] == {"key": "m1.a1", "mime": "image/png",
                                   "width": preview.size[0], "height": preview.size[1]}
    assert table_meta == {"name": "table.csv", "mime": "text/csv", "size": 4, "kind": "text",
                          "note": "1 row × 1 column", "excerpt": "a\n1\n"}
    # the whole attachment stays in the kernel: the view gets the preview only
    assert sum(len(b) for b in bufs) < chat.messages[0]["attachments"][0].size
    # a meta sent again (a branch switch names it) carries no buffer
    sent = len(wire.msgs)
    chat.switch_to("m1")
    wait_until(lambda: any("m1" in meta_ids(m) for m in wire.msgs[sent:]))
    assert sum(1 for b in wire.buffers if b) == 1
    # a view created later gets the preview in the state (ipywidgets splits it off)
    state = chat.get_state()
    assert isinstance(state["m1.a1"], bytes)
    _, paths, buffers = _remove_buffers(state)
    assert ["m1.a1"] in paths and bytes(buffers[paths.index(["m1.a1"])]) == bufs[0]
    # Clear empties the keys (a saved notebook keeps no trace)
    chat.clear()
    wait_until(lambda: wire.model.get("m1.a1", b"") is None)
    assert wire.model["m1"] is None


# ------------------------------------------------------------ from the view
def view_send(chat: ChatWidget, text: str, files: list[tuple[str, bytes]],
              draft: int = 1) -> None:
    """A Send from the view: descriptors in the message, the bytes as its buffers."""
    content = {"kind": "send", "text": text, "draft": draft,
               "attachments": [{"name": n, "size": len(b)} for n, b in files]}
    send_from_view(chat, content, [b for _, b in files])


def refusals(wire: Wire) -> list[dict[str, Any]]:
    return [m["content"] for m in wire.msgs if m.get("method") == "custom"
            and m["content"].get("kind") == "refused"]


def test_a_view_send_with_files_is_checked_again_in_the_kernel() -> None:
    src = Recording()
    chat = ChatWidget(src)
    wire = Wire(chat)
    view_send(chat, "what is it?", [("../../home/me/shot.png", png()),
                                    ("data.csv", b"a,b\n1,2\n")])
    wait_until(lambda: len(src.seen) == 1)
    (asked,) = src.seen[0]
    assert [(a.name, a.mime) for a in asked["attachments"]] == [
        ("shot.png", "image/png"), ("data.csv", "text/csv")]
    assert refusals(wire) == []
    # content that is not what its name says is refused, the view told why (its draft back)
    view_send(chat, "and this?", [("photo.png", b"<html><script>x()</script></html>")],
              draft=7)
    (refused,) = refusals(wire)
    assert refused["draft"] == 7 and "named as an image" in refused["reason"]
    assert len(chat.messages) == 2  # nothing added


def test_a_view_send_the_source_cannot_take_is_refused_with_the_reason() -> None:
    chat = ChatWidget(TextOnly())
    wire = Wire(chat)
    view_send(chat, "what is it?", [("shot.png", png())], draft=3)
    (refused,) = refusals(wire)
    assert refused["draft"] == 3 and "TextOnly takes no images" in refused["reason"]
    assert chat.messages == []


def test_a_view_send_over_the_limits_is_refused() -> None:
    chat = ChatWidget(Recording(), attachment_limits=AttachmentLimits(max_count=1))
    wire = Wire(chat)
    view_send(chat, "q", [("a.txt", b"a"), ("b.txt", b"b")])
    assert "2 attachments; a message takes at most 1" in refusals(wire)[0]["reason"]
    assert chat.messages == []


def _send(attachments: object) -> dict[str, Any]:
    return {"kind": "send", "text": "q", "draft": 1, "attachments": attachments}


@pytest.mark.parametrize("content,buffers,reason", [
    (_send([{"name": "a", "size": 1}]), [], "0 buffers for 1 attachments"),  # no bytes
    ({"kind": "send", "text": "q"}, [b"x"], "1 buffers for 0 attachments"),  # no descriptor
    (_send([{"name": "a", "size": 2}]), [b"x"], "size is not its buffer's"),
    (_send("a.png"), [b"x"], "Expected `array`"),
    (_send([{"name": 5, "size": 1}]), [b"x"], "Expected `str`"),
    (_send([{"name": "a"}]), [b"x"], "missing required field `size`"),
    (_send([{"name": "", "size": 1}]), [b"x"], "length >= 1"),
    (_send([{"name": "x" * 5000, "size": 1}]), [b"x"], "length <= 1000"),
    (_send([{"name": "a", "size": 0}] * 1001), [b""] * 1001, "length <= 1000"),
    ({"kind": "stop"}, [b"x"], "1 buffers for 0 attachments"),  # buffers on another kind
])
def test_a_malformed_upload_is_ignored(content: dict[str, Any], buffers: list[bytes],
                                       reason: str) -> None:
    # checked against protocol.py's SendMsg at the kernel boundary (wire.parse_view_msg),
    # before any handler: not the user's doing, so ignored and logged, never shown
    chat = ChatWidget(Recording())
    wire = Wire(chat)
    send_from_view(chat, content, buffers)
    assert chat.messages == [] and refusals(wire) == []
    assert chat._ignored.count == 1
    (logged,) = chat._ignored.reasons
    assert reason in logged


# -------------------------------------------------------- with tool calls (#20)
def test_a_question_keeps_its_attachments_through_the_tool_rounds(tmp_path: Path) -> None:
    from nbstream import tool
    from nbstream.sources import call

    def count_rows(n: int) -> str:
        """Count rows.

        Args:
            n: how many
        """
        return f"{n} rows"

    seen: list[list[ChatMessage]] = []

    def second(messages: Sequence[ChatMessage]) -> str:
        seen.append(list(messages))
        return "two rows"

    chat = ChatWidget(ScriptedSource(rounds=[[call("count_rows", n=2)], second], rate=5000),
                      tools=[tool(count_rows, approve=True)])
    assert chat.send("how many?", attachments=[pd.DataFrame({"a": [1, 2]})]).wait(10) == \
        "two rows"
    (asked,) = seen  # round 2: the question with its table, the call, its result
    assert [m["role"] for m in asked] == ["user", "assistant", "tool"]
    assert [a.name for a in asked[0]["attachments"]] == ["table.csv"]
    assert asked[2]["content"] == "2 rows"
    # saved together (version 3), they load together
    loaded = ChatWidget.load(chat.save(tmp_path / "both.json"), Recording())
    assert loaded.messages[0]["attachments"] == chat.messages[0]["attachments"]
    assert [c["state"] for c in loaded.messages[1]["tool_calls"]] == ["done"]
    assert loaded.to_messages() == chat.to_messages()


# -------------------------------------------------------- edit, export, files
def test_edit_keeps_the_attachments_unless_others_are_given(figure: Any) -> None:
    src = Recording()
    chat = ChatWidget(src)
    chat.send("first", attachments=[figure]).wait(10)
    chat.edit(0, "second").wait(10)
    assert [a.name for a in src.seen[-1][0]["attachments"]] == ["figure.png"]
    chat.edit(0, "third", attachments=[]).wait(10)
    assert "attachments" not in src.seen[-1][0]


def test_to_messages_gives_openai_content_parts_and_reads_back(figure: Any) -> None:
    chat = ChatWidget(Recording())
    df = pd.DataFrame({"a": [1]})
    pdf = attach(b"%PDF-1.4 x", name="r.pdf")
    chat.send("what?", attachments=[figure, df]).wait(10)
    out = chat.to_messages()
    parts = out[0]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text"]
    assert parts[0] == {"type": "text", "text": "what?"}
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert parts[2]["text"].startswith('<attachment name="table.csv" type="text/csv"')
    assert out[1] == {"role": "assistant", "content": "ok"}
    json.dumps(out)  # plain JSON: ready for any OpenAI client
    again = ChatWidget(Recording(), messages=out)
    (a, b) = again.messages[0]["attachments"]
    assert a.data == chat.messages[0]["attachments"][0].data and a.mime == "image/png"
    assert (b.name, b.text) == ("table.csv", "a\n1\n")
    # a file part reads back too; a remote URL is refused (nothing is fetched)
    with_file = [{"role": "user", "content": [
        {"type": "text", "text": "x"},
        {"type": "file", "file": {"filename": "r.pdf", "file_data": pdf.data_url()}}]}]
    assert ChatWidget(Recording(), messages=with_file).messages[0]["attachments"][0].data == \
        pdf.data
    with pytest.raises(ValueError, match=r"item 0 part 1: only base64 data: URLs are read"):
        ChatWidget(Recording(), messages=[{"role": "user", "content": [
            {"type": "text", "text": "x"},
            {"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/x.png"}}]}])


def test_save_and_load_keep_attachments_once_each(tmp_path: Path, figure: Any) -> None:
    chat = ChatWidget(Recording())
    chat.send("first", attachments=[figure, pd.DataFrame({"a": [1]})]).wait(10)
    chat.edit(0, "edited").wait(10)  # the same attachments in two branches
    path = chat.save(tmp_path / "chat.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == 3 and len(data["attachments"]) == 2  # stored once
    refs = [m["attachments"] for m in data["messages"] if "attachments" in m]
    assert len(refs) == 2 and refs[0] == refs[1]
    loaded = ChatWidget.load(path, Recording())
    assert loaded.messages[0]["attachments"] == chat.messages[0]["attachments"]
    assert [m.content for m in loaded.tree.messages] == [m.content for m in chat.tree.messages]
    state = loaded.get_state()  # the loaded questions' previews, for the view
    assert state["m1.a1"][:8] == state["m3.a1"][:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------ other widgets
def test_compare_sends_attachments_to_every_pane_and_each_must_take_them(figure: Any) -> None:
    a, b = Recording(), Recording()
    cmp = Compare([a, b])
    cmp.send("which?", attachments=[figure])
    cmp.wait(10)
    assert a.seen[0][0]["attachments"] == b.seen[0][0]["attachments"]
    assert cmp.attachment_policy["accepts"] == [["*/*"], ["*/*"]]
    mixed = Compare([Recording(), TextOnly()])
    with pytest.raises(UnsupportedAttachment, match="TextOnly takes no images"):
        mixed.send("which?", attachments=[figure])
    assert mixed.attachment_policy["accepts"] == [["*/*"], ["text/*"]]


def test_stream_takes_attachments_with_its_prompt(figure: Any) -> None:
    src = Recording()
    view = stream(src, "describe", attachments=[figure])
    view.wait(10)
    assert [a.name for a in src.seen[0][0]["attachments"]] == ["figure.png"]
    with pytest.raises(ValueError, match="go with a prompt"):
        stream(src, attachments=[figure])
    with pytest.raises(UnsupportedAttachment):
        stream(TextOnly(), "describe", attachments=[figure])


def test_the_policy_tells_the_view_what_it_may_attach() -> None:
    chat = ChatWidget(ScriptedSource("x"), attachment_limits=AttachmentLimits(max_count=3))
    assert chat.attachment_policy == {
        "accepts": [["*/*"]], "max_count": 3, "max_bytes": 8 << 20,
        "max_message_bytes": 8 << 20, "max_chat_bytes": 64 << 20, "max_image_side": 2048}
    with pytest.raises(TypeError, match="attachment_limits must be an nbstream AttachmentLimits"):
        ChatWidget(ScriptedSource("x"), attachment_limits={"max_count": 3})  # type: ignore[arg-type]
