"""What the model sees alternates user / assistant, as chat templates require.

Rule: a prompt whose answer has no text (stopped before its first piece, failed or
timed out at once) is left out of the history sent to the model, together with its
empty answer; an answer with some text (a stop mid-answer) is kept. The widget still
shows everything. Tested with a tiny Jinja chat template that raises on two user
turns in a row, like several popular ones (rendered the way transformers does).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from _wait import wait_until
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from nbstream import ChatWidget, Compare, ReplyError
from nbstream.sources import IteratorSource
from nbstream.sources.base import ChatMessage

# the check of Mistral's / Llama 2's templates, in a few lines
STRICT_TEMPLATE = """\
{%- if messages[0]['role'] == 'system' %}{% set messages = messages[1:] %}{% endif %}
{%- for m in messages %}
{%- if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}
{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
{%- endif %}
{{- '<' ~ m['role'] ~ '>' ~ m['content'] ~ '</s>' }}
{%- endfor %}
{%- if messages[-1]['role'] != 'user' %}{{ raise_exception('the last turn must be the user') }}
{%- endif %}"""


def _raise(message: str) -> None:
    raise TemplateError(message)


_env = ImmutableSandboxedEnvironment()
_env.globals["raise_exception"] = _raise
_template = _env.from_string(STRICT_TEMPLATE)


class StrictModel:
    """A source that renders a strict chat template first (as a local model would),
    then answers; each answer holds before its first piece until :attr:`go` is set,
    or fails at once while :attr:`fail` is set."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.fail = False
        self.prompts: list[str] = []
        self.source = IteratorSource(self.answer, label="strict")

    def answer(self, messages: Sequence[ChatMessage]) -> Iterator[str]:
        prompt = _template.render(messages=list(messages))  # raises on two user turns
        self.prompts.append(prompt)
        if self.fail:
            raise RuntimeError("the model crashed before its first token")
        # waiting before the first token is the scenario; "" lets a stop through
        while not self.go.wait(0.01):
            yield ""
        yield f"answer{len(self.prompts)}"


def test_the_template_really_rejects_two_user_turns() -> None:
    with pytest.raises(TemplateError, match="alternate"):
        _template.render(messages=[{"role": "user", "content": "a"},
                                   {"role": "user", "content": "b"}])


def test_a_reply_stopped_before_its_first_piece_leaves_a_history_the_template_takes() -> None:
    model = StrictModel()
    w = ChatWidget(model.source, system_prompt="Be brief.")
    r1 = w.send("q1")
    wait_until(lambda: r1.status == "running", 10)
    w.stop()
    assert r1.wait(10) == ""
    model.go.set()
    assert w.send("q2").wait(10) == "answer2"  # the template did not raise
    assert model.prompts[-1] == "<user>q2</s>"
    # the widget still shows the unanswered prompt and its stopped reply
    assert [(m["role"], m["content"], m["status"]) for m in w.messages] == [
        ("user", "q1", "done"), ("assistant", "", "stopped"),
        ("user", "q2", "done"), ("assistant", "answer2", "done")]
    w.close()


def test_a_failed_empty_reply_is_left_out_and_an_answered_one_kept() -> None:
    model = StrictModel()
    model.go.set()
    w = ChatWidget(model.source)
    assert w.send("q1").wait(10) == "answer1"
    model.fail = True
    with pytest.raises(ReplyError):
        w.send("q2").wait(10)
    model.fail = False
    assert w.send("q3").wait(10) == "answer3"
    assert model.prompts[-1] == "<user>q1</s><assistant>answer1</s><user>q3</s>"
    w.close()


def test_a_cancelled_queued_reply_is_left_out() -> None:
    model = StrictModel()
    w = ChatWidget(model.source)
    r1, r2 = w.send("q1"), w.send("q2")
    r2.cancel()
    model.go.set()
    assert r1.wait(10) == "answer1"
    assert w.send("q3").wait(10) == "answer2"
    assert model.prompts[-1] == "<user>q1</s><assistant>answer1</s><user>q3</s>"
    w.close()


def test_a_reply_stopped_mid_answer_keeps_its_text_in_the_history() -> None:
    seen: list[list[ChatMessage]] = []
    gate = threading.Event()

    def answer(messages: Sequence[ChatMessage]) -> Iterator[str]:
        _template.render(messages=list(messages))
        seen.append(list(messages))
        yield "partial"
        while not gate.wait(0.01):  # holding the answer open is the scenario
            yield ""
        yield " rest"

    w = ChatWidget(IteratorSource(answer))
    r1 = w.send("q1")
    wait_until(lambda: r1.stats["flushes"] >= 1, 10)
    w.stop()
    assert r1.wait(10) == "partial"
    gate.set()
    assert w.send("q2").wait(10) == "partial rest"
    assert seen[-1] == [{"role": "user", "content": "q1"},
                        {"role": "assistant", "content": "partial"},
                        {"role": "user", "content": "q2"}]
    w.close()


def test_compare_applies_the_rule_per_pane() -> None:
    good, bad = StrictModel(), StrictModel()
    good.go.set()
    bad.go.set()
    bad.fail = True
    c = Compare([good.source, bad.source])
    first = c.send("q1")
    assert first[0].wait(10) == "answer1"
    with pytest.raises(ReplyError):
        first[1].wait(10)
    bad.fail = False
    second = c.send("q2")
    assert [r.wait(10) for r in second] == ["answer2", "answer2"]
    assert good.prompts[-1] == "<user>q1</s><assistant>answer1</s><user>q2</s>"
    assert bad.prompts[-1] == "<user>q2</s>"
    c.close()


def test_chat_magic_history_alternates_too() -> None:
    from nbstream.widgets.magic import forget, run_magic

    model = StrictModel()
    ns: dict[str, Any] = {"m": model.source}
    try:
        run_magic("m", "q1", ns, remember=True)
        first = ns["_stream"]
        wait_until(lambda: first.status == "running", 10)
        first.stop()
        first.wait(10)
        model.go.set()
        run_magic("m", "q2", ns, remember=True)
        assert ns["_stream"].wait(10) == "answer2"
        assert model.prompts[-1] == "<user>q2</s>"
    finally:
        forget()
