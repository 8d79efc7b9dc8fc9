"""Per-message state in a real kernel: what a turn costs on IOPub (the same at turn 30
as at turn 1), and what nbclient saves with ``store_widget_state=True`` (the whole
conversation, reasoning included, with no end-of-reply re-send of the text)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import nbformat
import pytest
from _wire import conversation_of
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import turn_bytes  # noqa: E402

pytestmark = pytest.mark.kernel


def test_a_turn_costs_the_same_at_turn_30_as_at_turn_1() -> None:
    got = turn_bytes.measure(str(ROOT), turns=30, chars=2000, rate=4000.0)
    assert got["origin"].startswith(str(ROOT))  # this tree's nbstream
    assert got["texts_ok"]
    # every turn's text travels once: <= 1.2x the text + 200 B per comm message (metas
    # name their parent and the branch shown since branches: ~160 B a message)
    for k, (size, messages) in enumerate(got["turns"], start=1):
        text = got["text_chars"] + len(f"question {k}")
        assert text < size <= 1.2 * text + 200 * messages, (k, size, messages)
    # and nothing grows with the history: the last 10 turns cost what the first 10 did.
    # Means, because a turn's count of messages (each with its envelope) depends on
    # how the pump's flushes fell against the pieces: +-6 % from one turn to the next
    sizes = [b for b, _ in got["turns"]]
    first, last = statistics.mean(sizes[:10]), statistics.mean(sizes[-10:])
    assert 0.9 * first <= last <= 1.1 * first, (first, last, sizes)


def test_a_turn_with_tool_calls_costs_the_same_at_turn_30_as_at_turn_1() -> None:
    # each turn: a tool call (its arguments streamed), its result, a second round (#20)
    got = turn_bytes.measure(str(ROOT), turns=30, chars=2000, rate=4000.0, tools=True)
    assert got["texts_ok"]
    result = len("the answer to the weather: ") + 200
    for k, (size, messages) in enumerate(got["turns"], start=1):
        text = got["text_chars"] + len(f"question {k}") + result
        # the tool's parts and metas add a few hundred bytes, never the history
        assert text < size <= 1.2 * text + 200 * messages + 1500, (k, size, messages)
    sizes = [b for b, _ in got["turns"]]
    first, last = statistics.mean(sizes[:10]), statistics.mean(sizes[-10:])
    assert 0.9 * first <= last <= 1.1 * first, (first, last, sizes)


SAVED = '''
import time
from nbstream import ChatWidget
from nbstream.core.pieces import Reasoning
from nbstream.sources import IteratorSource

def think(messages):
    for i in range(40):
        yield Reasoning(f"r{i} ")
        time.sleep(0.002)  # the scenario: pieces over a few flush intervals
    for i in range(60):
        yield f"a{i} "
        time.sleep(0.002)  # the scenario, as above

chat = ChatWidget(IteratorSource(think))
chat.send("first").wait()
chat.send("second").wait()  # returns once the ending is in the widget's state
chat
'''


def test_nbclient_saves_the_whole_conversation_with_its_reasoning() -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SAVED)])
    client = NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=True)
    client.execute()
    models = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    (state,) = [m["state"] for m in models.values() if "last_id" in m["state"]]
    shown = conversation_of(state)
    reasoning = "".join(f"r{i} " for i in range(40))
    answer = "".join(f"a{i} " for i in range(60))
    assert [(e["role"], e["text"], e["reasoning"]) for e in shown] == [
        ("user", "first", ""), ("assistant", answer, reasoning),
        ("user", "second", ""), ("assistant", answer, reasoning)]
    assert all(e["have"] == e["seq"] and e["status"] == "done" for e in shown)
    assert shown[1]["finish_reason"] == "stop" and "reasoning_ms" in shown[1]["stats"]
    assert state["live"] == {}


SAVED_TOOLS = """
from nbstream import ChatWidget
from nbstream.sources import ScriptedSource, call

def weather(city: str) -> str:
    "The weather in a city (city: the city)."
    return f"18 C in {city}"

weather.__doc__ = "The weather.\\n\\nArgs:\\n    city: the city\\n"
chat = ChatWidget(ScriptedSource(rounds=[[call("weather", city="Paris", id="c1")],
                                         "It is 18 C."], rate=500), tools=[weather])
reply = chat.send("weather?")
reply.wait_for_approval(30)
chat.approve("c1")
reply.wait()
chat
"""


def test_nbclient_saves_tool_call_parts_with_their_states_and_results() -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SAVED_TOOLS)])
    client = NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=True)
    client.execute()
    models = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    (state,) = [m["state"] for m in models.values() if "last_id" in m["state"]]
    shown = conversation_of(state)
    assert [(e["role"], e["text"]) for e in shown] == [("user", "weather?"),
                                                       ("assistant", "It is 18 C.")]
    meta = state["m2"]
    assert [(t["id"], t["name"], t["state"], t.get("asks")) for t in meta["tools"]] == [
        ("c1", "weather", "done", True)]
    runs = [run for n in range(1, meta["seq"] + 1) if isinstance(state[f"m2.{n}"], list)
            for run in state[f"m2.{n}"]]
    assert "".join(r[1] for r in runs if r[0] == "tool") == '{"city": "Paris"}'
    assert [r[1] for r in runs if r[0] == "tool_result"] == ["18 C in Paris"]
    assert ["round", "", 1] in runs
