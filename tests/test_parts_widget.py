"""Messages made of parts, in this process: reasoning apart from the answer, why a
reply ended, its figures, and the per-message state keys a view reads (a view
created mid-stream, a lost delta, removals, turn after turn)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from _wait import wait_until
from _wire import Wire, body_parts, conversation_of, delta_keys, meta_ids, send_from_view

from nbstream import ChatWidget
from nbstream.core.pieces import Outcome, Reasoning
from nbstream.sources import IteratorSource, ScriptedSource
from nbstream.sources.base import ChatMessage, Emit, Source


def thinker(thought: str = "Two and two. ", answer: str = "It is 4.") -> IteratorSource:
    def gen(_: Sequence[ChatMessage]) -> Iterator[str]:
        for word in thought.split(" "):
            yield Reasoning(word + " ")
        for word in answer.split(" "):
            yield word + " "
    return IteratorSource(gen, label="thinker")


class Ending(Source):
    """A source that ends the way it is told (an ``Outcome``), after one piece."""

    def __init__(self, outcome: Outcome | None, text: str = "partial answer") -> None:
        self.outcome = outcome
        self.text = text
        self.seen: list[list[ChatMessage]] = []

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> Outcome | None:  # type: ignore[override]
        self.seen.append(list(messages))
        emit(Reasoning("thinking "))
        emit(self.text)
        return self.outcome


def settled(wire: Wire, mid: str) -> dict[str, Any]:
    """The message as a view shows it, once its final meta and all its deltas are there."""
    def done() -> dict[str, Any] | None:
        for e in wire.shown():
            if e["id"] == mid and e.get("finish_reason", "-") != "-" and e["have"] == e["seq"]:
                return e
        return None
    return wait_until(done, 10, f"{mid} settled in the view")


def test_reasoning_is_a_part_apart_from_the_answer_live_and_final() -> None:
    gate = threading.Event()

    def gen(_: Sequence[ChatMessage]) -> Iterator[str]:
        yield Reasoning("Let me think. ")
        gate.wait(10)  # the scenario: the model is still thinking
        yield Reasoning("Done thinking.")
        yield "The answer."

    w = ChatWidget(IteratorSource(gen))
    wire = Wire(w)
    r = w.send("q")
    wait_until(lambda: r.reasoning == "Let me think. ", 10)
    thinking_seen = time.monotonic()  # the streams' clock: the pump's, time.monotonic
    assert r.text == "" and r.finish_reason is None  # live: no answer, no end yet
    shown = wait_until(lambda: [e for e in wire.shown() if e["id"] == r.id and e["reasoning"]])
    assert shown[0]["reasoning"] == "Let me think. " and shown[0]["text"] == ""
    gate_opened = time.monotonic()
    gate.set()
    assert r.wait(10) == "The answer."
    assert r.reasoning == "Let me think. Done thinking."
    assert r.finish_reason == "stop"
    e = settled(wire, r.id)
    assert (e["text"], e["reasoning"], e["finish_reason"]) == (
        "The answer.", "Let me think. Done thinking.", "stop")
    # the parts in order, on the wire: one delta may carry both
    bodies = [b for m in wire.msgs for i, _, b in delta_keys(m) if i == r.id]
    assert bodies[0] == [["reasoning", "Let me think. "]]
    assert w.conversation[-1]["reasoning"] == "Let me think. Done thinking."
    stats = r.stats
    assert stats["reasoning_chars"] == len(r.reasoning)
    # thinking began before the test saw its first piece and lasted until the answer,
    # which could only come after the gate opened
    assert (gate_opened - thinking_seen) * 1000 <= stats["reasoning_ms"] <= stats["duration_ms"]
    assert "reasoning_ms" in e["stats"]


def test_history_leaves_reasoning_out_unless_asked() -> None:
    seen: list[list[ChatMessage]] = []

    def gen(msgs: Sequence[ChatMessage]) -> Iterator[str]:
        seen.append(list(msgs))
        yield Reasoning("hmm")
        yield "answer"

    w = ChatWidget(IteratorSource(gen))
    w.send("one").wait(5)
    w.send("two").wait(5)
    assert seen[1] == [{"role": "user", "content": "one"},
                       {"role": "assistant", "content": "answer"},
                       {"role": "user", "content": "two"}]
    k = ChatWidget(IteratorSource(gen), include_reasoning_in_history=True)
    k.send("one").wait(5)
    k.send("two").wait(5)
    assert seen[3][1] == {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nanswer"}


@pytest.mark.parametrize(("outcome", "reason"), [
    (None, "stop"),
    (Outcome("length", usage={"completion_tokens": 2}), "length"),
    (Outcome(None), None),  # a server's stream ended with no end marker
    (Outcome("abort"), "abort"),
])
def test_finish_reason_and_usage_come_from_the_sources_outcome(
        outcome: Outcome | None, reason: str | None) -> None:
    w = ChatWidget(Ending(outcome))
    wire = Wire(w)
    r = w.send("q")
    r.wait(5)
    assert r.status == "done" and r.finish_reason == reason
    e = settled(wire, r.id)
    assert e["finish_reason"] == reason
    if outcome is not None and outcome.usage:
        assert r.stats["usage"] == {"completion_tokens": 2}
        assert e["stats"]["usage"] == {"completion_tokens": 2}


def test_finish_reasons_the_pipeline_sets() -> None:
    stopped = ChatWidget(ScriptedSource("w " * 2000, rate=200))
    r = stopped.send("q")
    wait_until(lambda: r.text, 10)
    stopped.stop()
    r.wait(5)
    assert r.finish_reason == "cancelled"
    broken = ChatWidget(ScriptedSource("w " * 50, rate=2000, error_after=3))
    b = broken.send("q")
    wait_until(lambda: b.done, 10)
    assert b.finish_reason == "error"
    slow = ChatWidget(ScriptedSource("w " * 2000, rate=200), total_timeout=0.2)
    t = slow.send("q")
    wait_until(lambda: t.done, 10)
    assert t.finish_reason == "timeout"


def test_stats_count_the_bytes_sent_for_the_reply() -> None:
    text = "word " * 400
    w = ChatWidget(ScriptedSource(text, rate=4000))
    wire = Wire(w)
    r = w.send("q")
    r.wait(10)
    settled(wire, r.id)
    stats = r.stats
    sent = wire.bytes()
    # the reply's bytes: its own keys, and the envelopes of the messages it was first in
    assert len(text) < stats["wire_bytes"] <= sent
    assert stats["wire_bytes"] <= 1.2 * len(text) + 150 * len(wire.msgs)


def test_each_turn_sends_only_its_own_messages() -> None:
    w = ChatWidget(ScriptedSource("an answer " * 100, rate=8000))
    wire = Wire(w)
    for k in range(8):
        n = len(wire.msgs)
        r = w.send(f"question {k}")
        r.wait(10)
        settled(wire, r.id)
        turn = wire.msgs[n:]
        ids = {i for m in turn for i in meta_ids(m)} | {i for m in turn for i, _, _ in
                                                         delta_keys(m)}
        assert ids == {f"m{2 * k + 1}", r.id}  # nothing of an earlier turn
        # every key a turn sends is its own message's or one of the few shared ones,
        # and its deltas carry the answer once: what a turn costs does not grow with
        # the history (how many updates carry it depends on the pump's timing)
        keys = {key for m in turn if m.get("method") == "update" for key in m["state"]}
        own = {key for key in keys if key.split(".")[0] in (f"m{2 * k + 1}", r.id)}
        assert keys - own <= {"last_id", "live", "current", "removed"}, keys - own
        assert sum(len(body_parts(b)[0]) for m in turn for _, _, b in delta_keys(m)) == len(
            r.text)


def test_a_view_created_mid_stream_catches_up_without_gap_or_duplicate() -> None:
    gate = threading.Event()
    text = "".join(f"w{i} " for i in range(300))

    def gen(_: Sequence[ChatMessage]) -> Iterator[str]:
        for i, word in enumerate(text.split(" ")[:-1]):
            if i == 150:
                gate.wait(10)  # the scenario: the new view arrives while this one streams
            yield Reasoning(word + " ") if i < 50 else word + " "

    w = ChatWidget(IteratorSource(gen), interval=0.01)
    wire = Wire(w)
    r = w.send("go")
    wait_until(lambda: len(r.text) > 100, 10)
    # a new view starts from get_state (request_state), then merges what comes after
    snapshot = w.get_state()
    with wire.lock:
        after_snapshot = len(wire.msgs)
    gate.set()
    r.wait(10)
    settled(wire, r.id)
    model = {k: v for k, v in snapshot.items()}
    with wire.lock:
        for m in wire.msgs[after_snapshot:]:
            model.update(m["state"])
    (user, reply) = conversation_of(model)
    words = text.split(" ")[:-1]
    assert reply["reasoning"] == "".join(x + " " for x in words[:50])
    assert reply["text"] == "".join(x + " " for x in words[50:])
    assert reply["have"] == reply["seq"] and reply["status"] == "done"
    assert conversation_of(model) == wire.shown()  # and it agrees with the first view


def test_a_lost_delta_is_repaired_by_a_resync() -> None:
    w = ChatWidget(ScriptedSource("".join(f"w{i} " for i in range(400)), rate=2000),
                   interval=0.01)
    wire = Wire(w)
    r = w.send("go")
    r.wait(10)
    settled(wire, r.id)
    # a view that lost the update carrying delta 2 (the server dropped it)
    view = {}
    for m in wire.msgs:
        if (r.id, 2) not in [(i, s) for i, s, _ in delta_keys(m)]:
            view.update(m["state"])
    lost = conversation_of(view)[1]
    assert lost["have"] == 1 < lost["seq"]  # it sees the gap: deltas stop at 1
    n = len(wire.msgs)
    send_from_view(w, {"kind": "resync", "id": r.id, "have": 1})
    wait_until(lambda: len(wire.msgs) > n, 10)
    for m in wire.msgs[n:]:
        view.update(m["state"])
    assert conversation_of(view)[1]["text"] == r.text


def test_removed_messages_are_emptied_on_the_wire() -> None:
    w = ChatWidget(ScriptedSource("answer", rate=1000))
    wire = Wire(w)
    w.send("one").wait(5)
    r = w.send("two")
    r.wait(5)
    settled(wire, r.id)
    w.regenerate()  # keeps the old answer (an alternative, m4): nothing is removed
    wait_until(lambda: wire.shown() and wire.shown()[-1]["id"] == "m5"
               and wire.shown()[-1]["status"] == "done", 10)
    assert [e["id"] for e in wire.shown()] == ["m1", "m2", "m3", "m4", "m5"]
    assert wire.model["m4.1"] == "answer" and wire.model.get("removed", 0) == 0
    w.clear()
    wait_until(lambda: wire.model.get("removed") == 5, 10)
    assert wire.shown() == []
    assert all(v is None for k, v in wire.model.items() if k.startswith("m"))


def test_continue_asks_for_more_with_the_cut_answer_in_the_history() -> None:
    src = Ending(Outcome("length", usage={"completion_tokens": 256}), "the start of")
    w = ChatWidget(src)
    with pytest.raises(ValueError, match="no reply yet"):
        w.continue_()
    r = w.send("Tell me everything.")
    r.wait(5)
    assert r.finish_reason == "length"
    with pytest.raises(ValueError, match="only the last reply"):
        w.continue_("m99")
    # the view's Continue button
    send_from_view(w, {"kind": "continue", "id": r.id})
    wait_until(lambda: len(w.replies) == 2 and w.replies[1].done, 10)
    assert src.seen[1] == [
        {"role": "user", "content": "Tell me everything."},
        {"role": "assistant", "content": "the start of"},
        {"role": "user", "content": ChatWidget.CONTINUE_PROMPT},
    ]
    more = w.continue_()
    more.wait(5)
    assert len(w.replies) == 3


def test_a_state_request_is_followed_by_the_current_metas_of_live_messages() -> None:
    gate = threading.Event()

    def gen(_: Sequence[ChatMessage]) -> Iterator[str]:
        yield "first "
        gate.wait(10)  # the scenario: a view reloads while the reply is live
        yield "second"

    w = ChatWidget(IteratorSource(gen))
    wire = Wire(w)
    r = w.send("go")
    wait_until(lambda: r.text == "first ", 10)
    n = len(wire.msgs)
    w.send_state()  # what ipywidgets does on a view's request_state
    wait_until(lambda: len(wire.msgs) >= n + 2, 10)
    snapshot, after = wire.msgs[n], wire.msgs[n + 1]
    assert snapshot["state"]["last_id"] == 2 and "mode" in snapshot["state"]
    # the pump re-sends the live reply's meta after the snapshot (a meta that moved on
    # meanwhile would otherwise be left older in the view's model)
    assert after["state"][r.id]["status"] == "running" and "live" in after["state"]
    gate.set()
    r.wait(10)
    assert settled(wire, r.id)["text"] == "first second"
