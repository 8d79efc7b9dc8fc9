"""Edit and branches: ``chat.edit(index, text)`` and Regenerate keep the old messages as
alternatives, ``chat.messages`` is the branch shown, ``chat.tree`` (and the saved file)
has every branch, a reply streaming in another branch keeps streaming to its own
message, and the view's switch / edit commands (in this process; nbstream/conversation/branches.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from _wait import wait_until
from _wire import Wire, send_from_view

from nbstream import ChatWidget
from nbstream.conversation.branches import Branches
from nbstream.sources import IteratorSource
from nbstream.sources.base import ChatMessage


def echo() -> tuple[IteratorSource, list[list[ChatMessage]]]:
    """A source answering "re: <question>" that records what it was given."""
    seen: list[list[ChatMessage]] = []

    def fn(messages: Sequence[ChatMessage]) -> Iterator[str]:
        seen.append(list(messages))
        yield f"re: {messages[-1]['content']}"

    return IteratorSource(fn), seen


def shown(chat: ChatWidget) -> list[tuple[str, str]]:
    return [(m["id"], m["content"]) for m in chat.messages]


# ------------------------------------------------------------------ Branches
def test_branches_remember_the_child_last_shown() -> None:
    b = Branches()
    b.add("q", None)
    b.add("a1", "q")
    b.add("f", "a1")  # a follow-up below the first answer
    b.add("a2", "q")  # a regenerated answer: shown, the first one stays
    assert b.current == "a2" and b.path() == ["q", "a2"]
    assert b.siblings("a1") == ["a1", "a2"] == b.siblings("a2")
    assert b.show("a1") == "f"  # back to the first answer: with what followed it
    assert b.path() == ["q", "a1", "f"]
    assert b.show("q") == "f"  # from above: the path last shown
    assert b.show("a2") == "a2" and b.show("q") == "a2"
    with pytest.raises(ValueError, match="unknown parent"):
        b.add("x", "nope")
    with pytest.raises(KeyError):
        b.show("nope")
    b.clear()
    assert b.current is None and b.path() == []


# ---------------------------------------------------------------------- edit
def test_edit_starts_a_branch_and_switching_goes_back() -> None:
    source, seen = echo()
    chat = ChatWidget(source)
    chat.send("one").wait(5)
    chat.send("two").wait(5)
    assert shown(chat) == [("m1", "one"), ("m2", "re: one"), ("m3", "two"), ("m4", "re: two")]
    reply = chat.edit(2, "TWO")
    assert reply.wait(5) == "re: TWO"
    # the new branch: the model saw the path to the edited question only
    assert shown(chat) == [("m1", "one"), ("m2", "re: one"), ("m5", "TWO"), ("m6", "re: TWO")]
    assert seen[-1] == [{"role": "user", "content": "one"},
                        {"role": "assistant", "content": "re: one"},
                        {"role": "user", "content": "TWO"}]
    # every message is in the tree; the edited question is an alternative to the old one
    tree = chat.tree
    assert [(m.id, m.parent) for m in tree.messages] == [
        ("m1", None), ("m2", "m1"), ("m3", "m2"), ("m4", "m3"), ("m5", "m2"), ("m6", "m5")]
    assert tree.current == "m6"
    # back to the old branch, with its answer
    assert [m["id"] for m in chat.switch_to("m3")] == ["m1", "m2", "m3", "m4"]
    assert chat.tree.current == "m4"
    # a question now follows the branch shown
    chat.send("three").wait(5)
    assert seen[-1][-3:] == [{"role": "user", "content": "two"},
                             {"role": "assistant", "content": "re: two"},
                             {"role": "user", "content": "three"}]
    assert [m["id"] for m in chat.switch_to("m5")] == ["m1", "m2", "m5", "m6"]
    # editing the first question: a new root
    chat.edit(0, "ONE").wait(5)
    assert shown(chat) == [("m9", "ONE"), ("m10", "re: ONE")]
    assert chat.tree.messages[-2].parent is None
    chat.close()


@pytest.mark.parametrize(
    ("index", "text", "error", "words"),
    [
        ("0", "x", TypeError, "index must be an int"),
        (True, "x", TypeError, "index must be an int"),
        (5, "x", IndexError, "the chat shows 2 messages"),
        (-3, "x", IndexError, "the chat shows 2 messages"),
        (1, "x", ValueError, "only a question (a user message) can be edited"),
        (0, "  ", ValueError, "edit(text) needs a non-empty prompt"),
        (0, 3, TypeError, "edit(text) takes the prompt as a str"),
    ],
)
def test_edit_checks_its_arguments(index: Any, text: Any, error: type[Exception],
                                   words: str) -> None:
    source, _ = echo()
    chat = ChatWidget(source)
    chat.send("q").wait(5)
    with pytest.raises(error) as info:
        chat.edit(index, text)
    assert words in str(info.value)
    assert len(chat.tree.messages) == 2  # nothing half-done
    chat.close()


def test_a_reply_streaming_in_another_branch_streams_on_to_its_own_message() -> None:
    gate = threading.Event()

    def fn(messages: Sequence[ChatMessage]) -> Iterator[str]:
        q = messages[-1]["content"]
        if q == "slow":
            yield "first half"
            assert gate.wait(30)
            yield ", second half"
        else:
            yield f"re: {q}"

    source = IteratorSource(fn)
    source.concurrency = 2  # the edited question is answered while the old one streams
    chat = ChatWidget(source)
    wire = Wire(chat)
    old = chat.send("slow")
    wait_until(lambda: old.text == "first half", message="the old reply's first piece")
    new = chat.edit(0, "fast")
    assert new.wait(5) == "re: fast"
    assert [m["id"] for m in chat.messages] == ["m3", "m4"]
    assert old.status == "running"  # not stopped by the edit
    gate.set()
    assert old.wait(5) == "first half, second half"
    wait_until(lambda: [e["text"] for e in wire.shown() if e["id"] == old.id]
               == ["first half, second half"], message="the old reply's text on the wire")
    # its deltas went to its own message only; the new reply's to its own
    assert {d["id"] for d in wire.deltas()} <= {old.id, new.id}
    assert "".join(d["text"] for d in wire.deltas(new.id)) == "re: fast"
    assert chat.switch_to(old.id)[-1]["content"] == "first half, second half"
    chat.close()


# ---------------------------------------------------------------- regenerate
def test_regenerate_keeps_the_old_answer_as_an_alternative() -> None:
    answers = iter(["first", "second", "third"])
    seen: list[list[ChatMessage]] = []

    def fn(messages: Sequence[ChatMessage]) -> Iterator[str]:
        seen.append(list(messages))
        yield next(answers)

    chat = ChatWidget(IteratorSource(fn))
    chat.send("q").wait(5)
    second = chat.regenerate()
    assert second is not None and second.wait(5) == "second"
    assert [m["content"] for m in chat.messages] == ["q", "second"]
    assert seen[-1] == [{"role": "user", "content": "q"}]  # not the old answer
    third = chat.regenerate()
    assert third is not None and third.wait(5) == "third"
    tree = chat.tree
    assert [(m.id, m.parent, m.content) for m in tree.messages] == [
        ("m1", None, "q"), ("m2", "m1", "first"), ("m3", "m1", "second"),
        ("m4", "m1", "third")]
    assert [m["content"] for m in chat.switch_to("m2")] == ["q", "first"]
    assert chat.last is not None and chat.last.id == "m2"
    chat.close()


# ------------------------------------------------------------------ the wire
def test_the_view_gets_parents_and_the_branch_shown_and_can_switch_and_edit() -> None:
    source, _ = echo()
    chat = ChatWidget(source)
    wire = Wire(chat)
    chat.send("q").wait(5)
    send_from_view(chat, {"kind": "edit", "id": "m1", "text": "Q"})
    wait_until(lambda: wire.model.get("current") == "m4"
               and (wire.model.get("m4") or {}).get("status") == "done",
               message="the edited branch on the wire")
    assert [wire.model[f"m{n}"]["parent"] for n in range(1, 5)] == [None, "m1", None, "m3"]
    send_from_view(chat, {"kind": "switch", "id": "m1"})
    assert [m["id"] for m in chat.messages] == ["m1", "m2"]
    wait_until(lambda: wire.model.get("current") == "m2", message="the switch on the wire")
    # and a view created now gets all of it
    state = chat.get_state()
    assert state["current"] == "m2" and state["m3"]["parent"] is None
    # commands of the wrong shape are ignored
    for bad in ({"kind": "switch", "id": "m99"}, {"kind": "switch"},
                {"kind": "edit", "id": "m2", "text": "x"},  # an answer
                {"kind": "edit", "id": "m1", "text": "  "}, {"kind": "edit", "id": "m1"}):
        send_from_view(chat, bad)
    assert len(chat.tree.messages) == 4 and chat.tree.current == "m2"
    assert chat._ignored.count == 5
    chat.close()


# ------------------------------------------------------------- save and load
def test_the_tree_and_the_branch_shown_round_trip_through_a_file(tmp_path: Path) -> None:
    source, seen = echo()
    chat = ChatWidget(source, title="tree")
    chat.send("one").wait(5)
    chat.send("two").wait(5)
    chat.edit(2, "TWO").wait(5)
    regenerated = chat.regenerate()
    assert regenerated is not None
    regenerated.wait(5)
    chat.switch_to("m3")  # the old branch shows
    path = chat.save(tmp_path / "tree.json")
    loaded = ChatWidget.load(path, source)
    assert loaded.tree == chat.tree
    assert loaded.messages == chat.messages
    # the loaded widget goes on from its branch shown, and can switch like the other
    loaded.send("three").wait(5)
    assert seen[-1][-2:] == [{"role": "assistant", "content": "re: two"},
                             {"role": "user", "content": "three"}]
    assert [m["content"] for m in loaded.switch_to("m6")] == ["one", "re: one", "TWO",
                                                                "re: TWO"]
    chat.close()
    loaded.close()
