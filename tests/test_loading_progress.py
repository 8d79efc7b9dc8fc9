"""A loading reply says what it waits for: a source's ``report_loading`` calls reach
the view in the reply's meta, in order, bounded in number, sent by the pump.

* the API: checked arguments, a no-op where no reply is loading;
* the rhythm, on a fake clock: the first report at once, then at most one per
  ``LOADING_INTERVAL`` however often the source reports, the latest one last;
* a widget with a gated source: each report reaches the view before the first
  text, and the meta of a running reply carries none;
* TransformersSource on the embedded model: "preparing the model (first run,
  once)" with the fraction of tensors converted, then "loading model" (the
  conversion faked here; for real in a kernel below, ``model`` marker).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from _kernel import iopub
from _wait import wait_until
from _wire import Wire, delta_keys

from nbstream import ChatWidget
from nbstream.core.loading import LoadingProgress, current_reporter, report_loading, reporting_to
from nbstream.core.pieces import FINAL_STATUSES
from nbstream.core.pump import Outgoing, Pump
from nbstream.core.stream import LOADING_INTERVAL, Stream
from nbstream.sources.base import ChatMessage, Emit, Source

PREPARING = "preparing the model (first run, once)"


# -- the API --------------------------------------------------------------------------


def test_report_loading_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="text must be a str"):
        report_loading(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="text must not be blank"):
        report_loading("  ")
    with pytest.raises(ValueError, match="text must be at most"):
        report_loading("x" * 201)
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match=r"fraction must be in \[0, 1\]"):
            report_loading("loading", bad)
    for bad in (True, "half"):
        with pytest.raises(TypeError, match="fraction must be a float"):
            report_loading("loading", bad)  # type: ignore[arg-type]


def test_reports_go_to_the_receiver_of_this_thread_only() -> None:
    report_loading("nobody listens", 0.5)  # no reply is loading: a no-op
    got: list[LoadingProgress] = []
    other: list[LoadingProgress] = []
    with reporting_to(got.append):
        report_loading("loading model")
        report_loading(PREPARING, 1)
        assert current_reporter() is not None
        # another thread is not loading this reply: its reports go nowhere
        t = threading.Thread(target=lambda: report_loading("elsewhere"))
        t.start()
        t.join()
        with reporting_to(other.append):
            report_loading("nested")
        report_loading("after")
    assert current_reporter() is None
    report_loading("gone")
    assert got == [LoadingProgress("loading model"), LoadingProgress(PREPARING, 1.0),
                   LoadingProgress("after")]
    assert other == [LoadingProgress("nested")]


# -- the rhythm, on a fake clock ---------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_thousand_reports_make_a_few_metas_in_order_the_latest_last() -> None:
    clock = FakeClock()
    pump = Pump(clock=clock, start=False)
    sent: list[tuple[str, LoadingProgress | None]] = []
    stream = Stream("m1", clock=clock)

    def send(out: Outgoing) -> None:
        if stream.id in out.changed:
            sent.append((stream.status, stream.loading))

    ch = pump.open_channel(send)
    pump.add_stream(ch, stream)
    stream.report_loading(LoadingProgress("too early"))  # still queued: ignored
    stream.set_status("loading")
    pump.step(clock())
    assert sent == [("loading", None)]  # the status change, at once
    n = 1000
    for i in range(n):  # a report per tensor, 1 ms apart: 1 s in all
        stream.report_loading(LoadingProgress(PREPARING, i / n))
        due = stream.due_at()
        assert due is not None and due < float("inf")  # the pump knows when to send it
        if due <= clock():
            pump.step(clock())
        clock.t += 0.001
    clock.t += LOADING_INTERVAL
    pump.step(clock())  # the last report, once its interval passed
    reports = [p for _, p in sent[1:]]
    assert all(p is not None and p.text == PREPARING for p in reports)
    fractions = [p.fraction for p in reports if p is not None]
    # the first at once, then one per interval: 1 s of reports -> 1 + 4 + the last
    assert len(fractions) <= 1 + n * 0.001 / LOADING_INTERVAL + 1, fractions
    assert fractions[0] == 0.0 and fractions[-1] == (n - 1) / n
    assert fractions == sorted(set(fractions))
    # nothing more is due: no meta sent again without a new report
    assert stream.due_at() == float("inf")
    before = len(sent)
    clock.t += 1
    pump.step(clock())
    assert len(sent) == before
    # a report, then running before the pump sent it: the report is dropped
    stream.report_loading(LoadingProgress("loading model"))
    stream.set_status("running")
    clock.t += 1
    pump.step(clock())
    assert sent[before:] == [("running", None)]
    stream.report_loading(LoadingProgress("late"))  # running: ignored
    assert stream.loading is None and stream.due_at() == float("inf")


# -- a widget, with a source held at gates ------------------------------------------------


class GatedLoading(Source):
    """Loads in stages, each held until the test opens its gate: reports ``steps``
    (one list of reports per stage), then answers ``answer``."""

    def __init__(self, steps: Sequence[Sequence[tuple[str, float | None]]], answer: str) -> None:
        self.steps = [list(s) for s in steps]
        self.gates = [threading.Event() for _ in steps]
        self.answer = answer
        self.loaded = False

    @property
    def prepared(self) -> bool:
        return self.loaded

    def prepare(self) -> None:
        for step, gate in zip(self.steps, self.gates, strict=True):
            for text, fraction in step:
                report_loading(text, fraction)
            assert gate.wait(60), "the test forgot to open a gate"
        self.loaded = True

    def generate(self, messages: Sequence[ChatMessage], emit: Emit,
                 cancel: threading.Event) -> None:
        emit(self.answer)


def progress_metas(wire: Wire, mid: str) -> list[dict[str, Any] | None]:
    """The ``progress`` of each meta of ``mid`` the view received, in order (None: a
    meta without one)."""
    with wire.lock:
        msgs = list(wire.msgs)
    return [m["state"][mid].get("progress") for m in msgs
            if m.get("method") == "update" and isinstance(m["state"].get(mid), dict)]


def first_delta_index(wire: Wire, mid: str) -> int:
    with wire.lock:
        msgs = list(wire.msgs)
    return next(i for i, m in enumerate(msgs) if any(d[0] == mid for d in delta_keys(m)))


def meta_index(wire: Wire, mid: str, progress: dict[str, Any]) -> int:
    with wire.lock:
        msgs = list(wire.msgs)
    return next(i for i, m in enumerate(msgs)
                if isinstance(m.get("state", {}).get(mid), dict)
                and m["state"][mid].get("progress") == progress)


def test_each_report_reaches_the_view_in_order_before_the_first_text() -> None:
    burst = [(PREPARING, i / 100) for i in range(0, 51)]  # 0% .. 50% at once
    source = GatedLoading(
        [[(PREPARING, 0.0)], burst, [(PREPARING, 1.0), ("loading model", None)]],
        answer="Hello!",
    )
    w = ChatWidget(source)
    wire = Wire(w)
    reply = w.send("Hi")
    seen: list[dict[str, Any]] = []

    def shown(progress: dict[str, Any]) -> bool:
        metas = [p for p in progress_metas(wire, reply.id) if p is not None]
        return bool(metas) and metas[-1] == progress

    for gate, last in zip(
        source.gates,
        [{"text": PREPARING, "fraction": 0.0}, {"text": PREPARING, "fraction": 0.5},
         {"text": "loading model", "fraction": None}],
        strict=True,
    ):
        wait_until(lambda last=last: shown(last), message=f"the view shows {last}")
        assert reply.status == "loading"
        seen.append(last)
        gate.set()
    assert reply.wait(30) == "Hello!"
    wait_until(lambda: reply.id in wire.model and wire.model[reply.id]["status"] == "done",
               message="the final meta")
    metas = progress_metas(wire, reply.id)
    reports = [p for p in metas if p is not None]
    # in order: what the source reported, a burst coalesced to its latest
    assert [p for p in reports if p in seen] == seen
    fractions = [p["fraction"] for p in reports if p["text"] == PREPARING]
    assert fractions == sorted(fractions)
    assert len(reports) <= 1 + len(burst) + 2
    # the last report went before the first text; a running or done meta carries none
    assert meta_index(wire, reply.id, seen[-1]) < first_delta_index(wire, reply.id)
    assert metas[-1] is None and wire.model[reply.id].get("progress") is None
    w.close()


def test_a_reload_mid_load_shows_the_latest_report() -> None:
    source = GatedLoading([[(PREPARING, 0.25)]], answer="ok")
    w = ChatWidget(source)
    reply = w.send("Hi")
    wait_until(lambda: reply.stream.loading is not None, message="the report")
    # what a view created now (get_state) starts from
    assert w.get_state()[reply.id]["progress"] == {"text": PREPARING, "fraction": 0.25}
    source.gates[0].set()
    assert reply.wait(30) == "ok"
    assert "progress" not in w.get_state()[reply.id]
    w.close()


# -- TransformersSource on the embedded model (conversion faked) -------------------------


@pytest.mark.transformers
def test_transformers_source_reports_the_conversion_then_the_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("transformers")
    from _model_fixtures import tiny_model, tiny_tokenizer

    from nbstream.sources import TransformersSource
    from nbstream.sources.transformers import default_model
    from nbstream.sources.transformers import source as ts

    monkeypatch.setattr(default_model, "gguf_path", lambda: tmp_path / "fake.gguf")
    (tmp_path / "fake.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv(default_model.CACHE_ENV, str(tmp_path / "cache"))
    calls: list[str] = []

    def load_default(*, progress: Any = None, **kwargs: Any) -> tuple[Any, Any]:
        calls.append("load_default")
        folder = default_model.converted_path()
        if not default_model.is_converted(folder):
            for done in range(1, 5):  # four tensors
                progress(done, 4)
            folder.mkdir(parents=True)
            (folder / "nbstream-converted.json").write_text("{}")
        return tiny_model(), tiny_tokenizer()

    monkeypatch.setattr(default_model, "load_default", load_default)
    monkeypatch.setattr(ts.extras, "require_default_model", lambda: None)

    def reports_of_a_fresh_load() -> list[LoadingProgress]:
        got: list[LoadingProgress] = []
        # (its loaded model is shared only while a source holds it: none does here)
        source = TransformersSource(dtype="float32", max_new_tokens=2)
        with reporting_to(got.append):
            source.prepare()
        assert source.prepared
        return got

    first = reports_of_a_fresh_load()
    assert first == [
        LoadingProgress(PREPARING, 0.0),
        LoadingProgress(PREPARING, 0.25),
        LoadingProgress(PREPARING, 0.5),
        LoadingProgress(PREPARING, 0.75),
        LoadingProgress("loading model"),
    ]
    # the converted copy is in the cache now: only "loading model"
    assert reports_of_a_fresh_load() == [LoadingProgress("loading model")]
    assert calls == ["load_default", "load_default"]


# -- the real thing: a kernel converts the embedded model into an empty cache ------------


@pytest.fixture
def kernel_with_empty_cache(tmp_path: Path) -> Iterator[Any]:
    from jupyter_client.manager import start_new_kernel

    from nbstream.sources.transformers import default_model

    try:
        default_model.gguf_path()
    except default_model.DefaultModelMissing as exc:
        pytest.skip(str(exc))
    env = {**os.environ, default_model.CACHE_ENV: str(tmp_path / "cache"),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    for key in ("TQDM_DISABLE", "TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS"):
        env.pop(key, None)  # the user's defaults: progress bars enabled
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _run(kc: Any, code: str) -> None:
    msg_id = kc.execute(code)
    while True:
        reply = kc.get_shell_msg(timeout=120)
        if reply["parent_header"].get("msg_id") == msg_id:
            assert reply["content"]["status"] == "ok", "".join(
                reply["content"].get("traceback", []))
            return


@pytest.mark.kernel
@pytest.mark.model
def test_first_question_shows_the_conversion_before_the_first_text(
    kernel_with_empty_cache: Any,
) -> None:
    kc = kernel_with_empty_cache
    _run(kc, "from nbstream import ChatWidget\n"
             "from nbstream.sources import TransformersSource\n"
             "chat = ChatWidget(TransformersSource(max_new_tokens=4))\n"
             "reply = chat.send('Hi')\n")
    updates: list[dict[str, Any]] = []  # the comm's update messages, in order
    stderr: list[str] = []
    for msg in iopub(kc, 600, "end of the reply (m2)", poll=1):
        content = msg["content"]
        if msg["msg_type"] == "stream":
            stderr.append(content["text"])  # stdout too: nothing should be printed
        elif msg["msg_type"] == "comm_msg" and content["data"].get("method") == "update":
            updates.append(content["data"]["state"])
            meta = content["data"]["state"].get("m2")
            if isinstance(meta, dict) and meta["status"] in FINAL_STATUSES:
                break
    assert meta["status"] == "done", meta
    first_text = next(i for i, s in enumerate(updates) if any(re.fullmatch(r"m2\.\d+", k)
                                                             for k in s))
    progress = [(i, s["m2"]["progress"]) for i, s in enumerate(updates)
                if isinstance(s.get("m2"), dict) and "progress" in s["m2"]]
    preparing = [(i, p["fraction"]) for i, p in progress if p["text"] == PREPARING]
    loading = [i for i, p in progress if p["text"] == "loading model"]
    assert preparing, progress
    assert loading, progress
    # "preparing…" with a rising fraction, then "loading model", all before the text
    fractions = [f for _, f in preparing]
    assert fractions == sorted(fractions) and fractions[0] == 0.0
    assert preparing[-1][0] < loading[0] <= loading[-1] < first_text
    print(f"\nfirst question: {len(updates)} updates, {len(preparing)} 'preparing' metas "
          f"(fractions {fractions[0]:.3f}..{fractions[-1]:.3f}), {len(loading)} 'loading "
          f"model', first text in update {first_text}")
    # no progress bar (tqdm) nor anything else printed from the worker thread
    assert "".join(stderr) == ""
