"""Export and load: ``to_markdown``, ``to_messages``, ``save`` / ``load``, ``messages=[...]``
(in this process; the real-kernel round trip is tests/test_conversation_kernel.py).

The conversation file format and the Markdown are nbstream/conversation/transcript.py; the
fixture tests/data/conversation_markdown.json is checked by js/tests/transcript.test.ts
too, so the view's "Copy all" and ``to_markdown()`` agree.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from _wait import wait_until
from _wire import conversation_of

from nbstream import ChatWidget
from nbstream.conversation.transcript import (
    FORMAT,
    VERSION,
    ConversationFileError,
    StoredMessage,
    Transcript,
    conversation_markdown,
    read,
    write,
)
from nbstream.core.pieces import Reasoning
from nbstream.sources import IteratorSource, ScriptedSource
from nbstream.sources.base import ChatMessage
from nbstream.widgets.widget import StreamingWidget
from nbstream.widgets.wire import HISTORY_SLICE_CHARS, history_slices

FIXTURE = Path(__file__).parent / "data" / "conversation_markdown.json"
CASES = json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4", "reasoning": "Two and two."},
    {"role": "user", "content": "And 3+3?"},
    {"role": "assistant", "content": "It is", "status": "stopped"},
    {"role": "user", "content": "Again?"},
    {"role": "assistant", "content": "", "status": "error", "error": "RuntimeError: down"},
    {"role": "user", "content": "Slowly?"},
    {"role": "assistant", "content": "Well", "status": "timeout",
     "error": "no token for 1 s"},
    {"role": "user", "content": "Long one?"},
    {"role": "assistant", "content": "cut he", "finish_reason": "length"},
]


def recorder(answer: str = "ok") -> tuple[IteratorSource, list[list[ChatMessage]]]:
    """A source that answers ``answer`` and records the messages it was given."""
    seen: list[list[ChatMessage]] = []

    def fn(messages: Sequence[ChatMessage]) -> Iterator[str]:
        seen.append(list(messages))
        yield answer

    return IteratorSource(fn), seen


def shown(chat: ChatWidget) -> list[tuple[str, str, str, str]]:
    """(role, content, reasoning, status) of each message shown."""
    return [(m.role, m.content, m.reasoning, m.status) for m in chat.tree.branch()]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every update message any widget sends from now on (from its construction)."""
    msgs: list[dict[str, Any]] = []
    lock = threading.Lock()

    def capture(self: StreamingWidget, msg: dict[str, Any], buffers: Any = None) -> None:
        with lock:
            msgs.append(msg)

    monkeypatch.setattr(StreamingWidget, "_send", capture)
    return msgs


def model_of(msgs: list[dict[str, Any]]) -> dict[str, Any]:
    """The front-end model the update messages build (key by key)."""
    model: dict[str, Any] = {}
    for m in list(msgs):
        if m.get("method") == "update":
            model.update(m["state"])
    return model


# ------------------------------------------------------------------ Markdown
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_markdown_is_the_fixture_the_view_checks_too(case: dict[str, Any]) -> None:
    messages = [(m["role"], m["text"], m["status"]) for m in case["messages"]]
    assert conversation_markdown(messages) == case["markdown"]
    # and a chat that starts from those messages exports the same
    history = [{"role": m["role"], "content": m["text"], "status": m["status"]}
               for m in case["messages"]]
    chat = ChatWidget(ScriptedSource("x"), messages=history)
    assert chat.to_markdown() == case["markdown"]
    chat.close()


# ----------------------------------------------------------- messages=[...]
def test_a_chat_starts_from_a_history_and_the_model_sees_it() -> None:
    source, seen = recorder("10")
    chat = ChatWidget(source, messages=HISTORY)
    assert chat.system_prompt == "Be brief."
    assert [(m["role"], m["content"], m["status"]) for m in chat.messages] == [
        ("user", "What is 2+2?", "done"), ("assistant", "4", "done"),
        ("user", "And 3+3?", "done"), ("assistant", "It is", "stopped"),
        ("user", "Again?", "done"), ("assistant", "", "error"),
        ("user", "Slowly?", "done"), ("assistant", "Well", "timeout"),
        ("user", "Long one?", "done"), ("assistant", "cut he", "done"),
    ]
    replies = chat.replies
    assert replies[0].reasoning == "Two and two." and replies[0].finish_reason == "stop"
    assert replies[1].finish_reason == "cancelled"
    assert replies[2].reason == "RuntimeError: down" and replies[2].finish_reason == "error"
    assert replies[3].reason == "no token for 1 s"
    assert replies[4].finish_reason == "length"
    # the next question goes to the model with the history (alternating; the failed,
    # empty answer and its prompt are left out, as for a live chat)
    assert chat.send("And 5+5?").wait(10) == "10"
    assert seen == [[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"}, {"role": "assistant", "content": "It is"},
        {"role": "user", "content": "Slowly?"}, {"role": "assistant", "content": "Well"},
        {"role": "user", "content": "Long one?"}, {"role": "assistant", "content": "cut he"},
        {"role": "user", "content": "And 5+5?"},
    ]]
    chat.close()


def test_continue_works_on_a_loaded_cut_reply() -> None:
    source, seen = recorder(" more")
    chat = ChatWidget(source, messages=HISTORY[1:])
    assert chat.continue_().wait(10) == " more"
    assert seen[0][-2:] == [{"role": "assistant", "content": "cut he"},
                            {"role": "user", "content": ChatWidget.CONTINUE_PROMPT}]
    chat.close()


def test_history_messages_reach_the_view_through_the_message_keys(
    sent: list[dict[str, Any]],
) -> None:
    chat = ChatWidget(ScriptedSource("x"), messages=HISTORY)
    # sent by the pump right after construction: the metas and the deltas, in one update
    wait_until(lambda: model_of(sent).get("last_id") == 10, message="the history's keys")
    view = conversation_of(model_of(sent))
    assert [(e["id"], e["role"], e["text"], e["reasoning"], e["status"]) for e in view] == [
        ("m1", "user", "What is 2+2?", "", "done"),
        ("m2", "assistant", "4", "Two and two.", "done"),
        ("m3", "user", "And 3+3?", "", "done"),
        ("m4", "assistant", "It is", "", "stopped"),
        ("m5", "user", "Again?", "", "done"),
        ("m6", "assistant", "", "", "error"),
        ("m7", "user", "Slowly?", "", "done"),
        ("m8", "assistant", "Well", "", "timeout"),
        ("m9", "user", "Long one?", "", "done"),
        ("m10", "assistant", "cut he", "", "done"),
    ]
    metas = model_of(sent)
    assert metas["m2"]["finish_reason"] == "stop" and metas["m2"]["stats"] == {}
    assert metas["m6"]["error"] == "RuntimeError: down"
    assert metas["m10"]["finish_reason"] == "length"
    # a view created later (get_state) gets the same
    assert conversation_of(chat.get_state()) == view
    chat.close()


def test_a_long_history_reaches_the_view_in_slices_newest_first(
    sent: list[dict[str, Any]],
) -> None:
    # 400 messages of model-shaped Markdown, ~0.3 MB: no one update carries it all
    body = ("## Step {i}\n\nSome **bold** text, `code`, and a list:\n\n- one\n- two\n\n"
            "```python\nprint({i})\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
            "数学 $e^{{i\\pi}}+1=0$ 🎉\n") * 6
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": f"Question {i}?" if i % 2 == 0 else body.format(i=i)}
               for i in range(400)]
    chat = ChatWidget(ScriptedSource("x"), messages=history)
    wait_until(lambda: all(f"m{i}" in model_of(sent) for i in range(1, 401)),
               message="the whole history's keys")
    updates = [m["state"] for m in list(sent) if m.get("method") == "update"
               and any(k[1:].isdigit() for k in m["state"])]
    metas = [sorted(int(k[1:]) for k in u if k[1:].isdigit()) for u in updates]
    assert len(metas) >= 4  # in slices, each about HISTORY_SLICE_CHARS
    assert all(len(json.dumps(u)) < 2 * HISTORY_SLICE_CHARS for u in updates)
    # newest first: the first update names every id and carries the end; each later
    # one the run just above the one before
    assert updates[0]["last_id"] == 400 and metas[0][-1] == 400
    for newer, older in itertools.pairwise(metas):
        assert older[-1] == newer[0] - 1
    assert metas[-1][0] == 1
    assert sorted(i for m in metas for i in m) == list(range(1, 401))
    # each reply's text with its meta, whole: the view builds the conversation
    view = conversation_of(model_of(sent))
    assert [e["text"] for e in view] == [m["content"] for m in history]
    assert view == conversation_of(chat.get_state())
    chat.close()


def test_history_slices_cover_every_message_once_newest_first() -> None:
    chat = ChatWidget(ScriptedSource("x"), messages=[
        {"role": "user" if i % 2 == 0 else "assistant",
         "content": "x" * (10 if i != 5 else 5_000)} for i in range(12)])
    entries = chat._history.path()
    slices = history_slices(entries, budget=100)
    ids = [e.id for e in entries]
    flat = [i for replies, others in slices for i in sorted(replies + others,
                                                            key=lambda m: int(m[1:]))]
    order = [i for s in reversed(slices) for i in sorted(s[0] + s[1], key=lambda m: int(m[1:]))]
    assert sorted(flat, key=lambda m: int(m[1:])) == ids and order == ids
    assert slices[0][0] + slices[0][1] and ids[-1] in slices[0][0] + slices[0][1]
    big = ids[5]  # a message over the budget travels alone
    assert ([big], []) in slices
    assert all(len(r) + len(o) <= 10 for r, o in slices)
    assert history_slices(entries) == [([i for i in ids if int(i[1:]) % 2 == 0][::-1],
                                        [i for i in ids if int(i[1:]) % 2 == 1][::-1])]
    chat.close()


def test_to_messages_with_and_without_reasoning_reads_back() -> None:
    chat = ChatWidget(ScriptedSource("x"), messages=HISTORY[:5])
    plain = chat.to_messages()
    assert plain == [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "What is 2+2?"},
                     {"role": "assistant", "content": "4"},
                     {"role": "user", "content": "And 3+3?"},
                     {"role": "assistant", "content": "It is"}]
    thinking = chat.to_messages(include_reasoning=True)
    assert thinking[2] == {"role": "assistant",
                           "content": "<think>\nTwo and two.\n</think>\n\n4"}
    # what the model is sent with include_reasoning_in_history=True is that same form
    assert thinking[2]["content"] == chat.replies[0].history_content(True)
    again = ChatWidget(ScriptedSource("x"), messages=thinking)
    assert again.replies[0].reasoning == "Two and two." and again.replies[0].text == "4"
    chat.close()
    again.close()


def test_to_messages_and_markdown_of_a_live_chat() -> None:
    chat = ChatWidget(IteratorSource(lambda m: iter([Reasoning("hm"), "Paris."])))
    chat.send("Capital of France?").wait(10)
    assert chat.to_messages(include_reasoning=True) == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "<think>\nhm\n</think>\n\nParis."}]
    assert chat.to_markdown() == "## You\n\nCapital of France?\n\n## Assistant\n\nParis.\n"
    chat.close()


@pytest.mark.parametrize(
    ("messages", "error", "words"),
    [
        ("hi", TypeError, "ChatWidget(messages=...) must be a list"),
        ({"role": "user", "content": "x"}, TypeError, "must be a list"),
        ([{"role": "user", "content": "x"}, "hi"], TypeError, "item 1 must be a dict"),
        ([{"content": "x"}], TypeError, "item 0 needs a str 'role'"),
        ([{"role": "user", "content": 3}], TypeError, "item 0 needs a str 'content', got int"),
        ([{"role": "assistant", "content": None}], TypeError, "item 0 needs a str 'content'"),
        ([{"role": "tool", "content": "x"}], ValueError,
         "item 0 is a 'tool' message with no assistant 'tool_calls' before it"),
        ([{"role": "user", "content": "x"}, {"role": "system", "content": "s"}], ValueError,
         "item 1 is a 'system' message; only the first"),
        ([{"role": "assistant", "content": "x", "status": "running"}], ValueError,
         "item 0 'status' must be one of"),
        ([{"role": "assistant", "content": "x", "reasoning": 1}], TypeError,
         "item 0 'reasoning' must be a str"),
        ([{"role": "assistant", "content": "x", "finish_reason": "because"}], ValueError,
         "item 0 'finish_reason' must be null or one of"),
    ],
)
def test_a_bad_history_raises_naming_the_argument_and_item(
    messages: Any, error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as info:
        ChatWidget(ScriptedSource("x"), messages=messages)
    assert words in str(info.value)


def test_a_system_prompt_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="give the system prompt once"):
        ChatWidget(ScriptedSource("x"), system_prompt="a",
                   messages=[{"role": "system", "content": "b"}])


# --------------------------------------------------------------- save / load
def test_save_then_load_gives_the_same_messages_and_statuses(tmp_path: Path) -> None:
    chat = ChatWidget(ScriptedSource("x"), title="saved", messages=HISTORY)
    path = chat.save(tmp_path / "chat.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == FORMAT and data["version"] == VERSION == 3
    assert "attachments" not in data  # none: the file is a version 1 file but for its number
    assert data["title"] == "saved" and data["system_prompt"] == "Be brief."
    ids = [m["id"] for m in data["messages"]]
    assert [m["parent"] for m in data["messages"]] == [None, *ids[:-1]]  # a chain
    assert data["current"] == ids[-1]
    loaded = ChatWidget.load(path, ScriptedSource("y"))
    assert shown(loaded) == shown(chat)
    assert loaded.messages == chat.messages
    assert loaded.title == "saved" and loaded.system_prompt == "Be brief."
    assert [(r.finish_reason, r.reason) for r in loaded.replies] == [
        (r.finish_reason, r.reason) for r in chat.replies]
    assert loaded.to_markdown() == chat.to_markdown()
    # saved again, the file is the same
    assert loaded.save(tmp_path / "again.json").read_text() == path.read_text()
    # the title and system prompt can be replaced when loading
    other = ChatWidget.load(path, ScriptedSource("y"), title="t", system_prompt="s",
                            interval=0.1)
    assert (other.title, other.system_prompt) == ("t", "s")
    for w in (chat, loaded, other):
        w.close()


def test_save_during_a_reply_saves_it_as_stopped(tmp_path: Path) -> None:
    gate = threading.Event()

    def fn(messages: Sequence[ChatMessage]) -> Iterator[str]:
        yield "partial"
        gate.wait(30)
        yield " rest"

    chat = ChatWidget(IteratorSource(fn))
    reply = chat.send("go")
    wait_until(lambda: reply.text == "partial", message="the first piece")
    chat.save(tmp_path / "live.json")
    gate.set()
    reply.wait(10)
    saved = read(tmp_path / "live.json")
    assert [(m.role, m.content, m.status, m.finish_reason) for m in saved.messages] == [
        ("user", "go", "done", None), ("assistant", "partial", "stopped", "cancelled")]
    chat.close()


def test_a_written_tree_reads_back_with_its_branch(tmp_path: Path) -> None:
    t = Transcript((
        StoredMessage("a", None, "user", "Q"),
        StoredMessage("b", "a", "assistant", "first answer", finish_reason="stop"),
        StoredMessage("c", "a", "assistant", "second answer", "why", finish_reason="stop"),
        StoredMessage("d", "c", "user", "follow-up"),
    ), current="c", system_prompt=None, title="tree")
    back = read(write(tmp_path / "t.json", t))
    assert back == t
    assert [m.id for m in back.branch()] == ["a", "c"]


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def _good() -> dict[str, Any]:
    return {"format": FORMAT, "version": 1, "messages": [
        {"id": "m1", "parent": None, "role": "user", "content": "Q", "status": "done"},
        {"id": "m2", "parent": "m1", "role": "assistant", "content": "A", "status": "done"}]}


def test_malformed_json_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n "format": "nbstream-conversation",\n "version": 1,\n "messages": [\n'
                    '  {"id": "m1",}\n ]\n}\n', encoding="utf-8")
    with pytest.raises(ConversationFileError) as info:
        ChatWidget.load(path, ScriptedSource("x"))
    assert str(path) in str(info.value) and "line 5" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_an_unknown_version_is_refused_clearly(tmp_path: Path) -> None:
    data = _good() | {"version": 4}
    with pytest.raises(ConversationFileError, match=r"unknown version 4; this nbstream reads "
                       r"versions 1, 2, 3 \(written by a newer nbstream"):
        ChatWidget.load(_write(tmp_path / "v4.json", data), ScriptedSource("x"))
    with pytest.raises(ConversationFileError, match="'version' must be an int"):
        read(_write(tmp_path / "v.json", _good() | {"version": "1"}))
    with pytest.raises(ConversationFileError, match="not a conversation file"):
        read(_write(tmp_path / "list.json", [1, 2]))
    with pytest.raises(ConversationFileError, match="'format' is 'x'"):
        read(_write(tmp_path / "fmt.json", _good() | {"format": "x"}))


def test_files_of_every_version_load_and_this_one_keeps_calls_and_attachments(
        tmp_path: Path) -> None:
    # version 2 was two formats, built apart: tool calls' rounds (#20) and attachments
    # (#21); version 3 holds both. Each loads; a version-1 file too.
    import base64
    import hashlib

    text = b"a,b\n1,2\n"
    digest = hashlib.sha256(text).hexdigest()
    user = {"id": "m1", "parent": None, "role": "user", "content": "Q", "status": "done"}
    with_file = user | {"attachments": [{"name": "t.csv", "mime": "text/csv", "size": len(text),
                                         "sha256": digest}]}
    rounds = [{"reasoning": "", "content": "", "tool_calls": [
                  {"id": "c1", "name": "f", "arguments": "{}", "state": "done",
                   "result": "1", "display": {}, "error": None, "ms": 1.0}]},
              {"reasoning": "", "content": "A", "tool_calls": []}]
    reply = {"id": "m2", "parent": "m1", "role": "assistant", "content": "A", "status": "done",
             "finish_reason": "stop"}
    contents = {digest: base64.b64encode(text).decode()}
    files = {
        "v2-tools": {"version": 2, "messages": [user, reply | {"rounds": rounds}]},
        "v2-attachments": {"version": 2, "messages": [with_file, reply],
                           "attachments": contents},
        "v3": {"version": 3, "messages": [with_file, reply | {"rounds": rounds}],
               "attachments": contents},
    }
    for name, body in files.items():
        got = read(_write(tmp_path / f"{name}.json", {"format": FORMAT, **body}))
        q, a = got.messages
        assert [x.name for x in q.attachments] == (["t.csv"] if "attachments" in body else [])
        assert q.attachments == () or q.attachments[0].data == text
        assert (a.rounds is not None) == ("rounds" in body["messages"][1]), name
    # what this version writes holds both, and reads back whole
    both = read(_write(tmp_path / "v3.json", {"format": FORMAT, **files["v3"]}))
    again = read(write(tmp_path / "again.json", both))
    assert again == both
    assert json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))["version"] == 3


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"role": "robot"}, "'role' must be 'user' or 'assistant', got 'robot'"),
        ({"content": 5}, "needs a str 'content', got int"),
        ({"status": "running"}, "'status' must be one of"),
        ({"parent": "m9"}, "'parent' must be null or the id of an earlier message"),
        ({"id": "m1"}, "id 'm1' is used twice"),
        ({"finish_reason": "why"}, "'finish_reason' must be null or one of"),
    ],
)
def test_a_bad_entry_names_the_file_the_entry_and_its_line(
    tmp_path: Path, change: dict[str, Any], words: str
) -> None:
    data = _good()
    data["messages"][1].update(change)
    path = _write(tmp_path / "bad.json", data)
    with pytest.raises(ConversationFileError) as info:
        read(path)
    text = str(info.value)
    assert text.startswith(f"{path}: messages[1] (id "), text
    assert words in text
    # the line of messages[1]'s id (the second "id" of the file, whatever it says)
    line = [i for i, s in enumerate(path.read_text().splitlines(), 1) if '"id":' in s][1]
    assert f", line {line}):" in text, text


def test_current_must_name_a_message(tmp_path: Path) -> None:
    with pytest.raises(ConversationFileError, match="'current' must be the id of a message"):
        read(_write(tmp_path / "c.json", _good() | {"current": "m7"}))


def test_save_and_load_arguments_are_checked(tmp_path: Path) -> None:
    chat = ChatWidget(ScriptedSource("x"))
    with pytest.raises(TypeError, match=r"save\(path\) takes a file path"):
        chat.save(3)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        ChatWidget.load(tmp_path / "missing.json", ScriptedSource("x"))
    with pytest.raises(TypeError, match="unexpected keyword argument 'intervall'"):
        ChatWidget.load(chat.save(tmp_path / "e.json"), ScriptedSource("x"),
                        intervall=1)  # type: ignore[call-arg]
    chat.close()
