"""nbstream.sources.transformers.openmp: the calling thread's OpenMP pool is handed back, and only then.

The pool is seen by the process's thread count (/proc/self/task), in a fresh
interpreter each time, so that no other test's threads or torch state count.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from typing import Any

import pytest
from _model_fixtures import tiny_model, tiny_tokenizer

from nbstream.sources.base import Source
from nbstream.sources.transformers import openmp

# the local transformers source and its helpers (torch, transformers, tokenizers:
# tiny random-weight models): not in `make test-fast`
pytestmark = pytest.mark.transformers

PROBE = r"""
import json, os, sys, time
import torch
from nbstream.sources.transformers import openmp

def threads():
    return len(os.listdir("/proc/self/task"))

torch.set_num_threads(2)
x = torch.empty(1 << 22)  # no op on its elements yet
start = threads()
x.fill_(1)  # a parallel op: the main thread's pool starts (1 more thread)
with_pool = threads()
released = openmp.release_pool()
# the pool's threads leave the runtime's barrier before they exit: wait for the exit
deadline = time.monotonic() + 30
while threads() != start and time.monotonic() < deadline:
    time.sleep(0.01)  # a poll: a thread's exit has no event to wait on here
after = threads()
x.add_(1)  # the pool comes back by itself
again = threads()
print(json.dumps({"libgomp": openmp.loaded_libgomp(), "start": start, "with_pool": with_pool,
                  "released": released, "after": after, "again": again,
                  "sum": float(x[0])}))
"""


def _run(code: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_release_pool_ends_the_calling_threads_pool_which_comes_back() -> None:
    pytest.importorskip("torch")
    got = _run(PROBE)
    if not got["libgomp"]:
        pytest.skip("this torch does not run on GNU OpenMP")
    assert got["with_pool"] == got["start"] + 1, got  # 2 threads: this one and one more
    assert got["released"] is True
    assert got["after"] == got["start"], got  # the extra thread ended
    assert got["again"] == got["with_pool"], got
    assert got["sum"] == 2.0  # the op after the release still computes (1 + 1)


def test_without_torch_nothing_is_touched() -> None:
    got = _run("import json, sys\nfrom nbstream.sources.transformers import openmp\n"
               "r = openmp.release_pool()\n"
               "print(json.dumps({'released': r, 'torch': 'torch' in sys.modules}))")
    assert got == {"released": False, "torch": False}


class Recording(Source):
    """A source that records on which thread it was told of a queued reply, and when."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def queued(self) -> None:
        self.events.append(("queued", threading.get_ident()))

    def generate(self, messages: Any, emit: Any, cancel: threading.Event) -> None:
        self.events.append(("generate", threading.get_ident()))
        emit("ok")


def test_the_widget_tells_the_source_on_the_asking_thread_before_its_worker_runs() -> None:
    from nbstream import ChatWidget

    source = Recording()
    chat = ChatWidget(source)
    try:
        for _ in range(2):
            assert chat.send("hi").wait(timeout=30) == "ok"
    finally:
        chat.close()
    kinds = [k for k, _ in source.events]
    assert kinds == ["queued", "generate", "queued", "generate"]
    asking = threading.get_ident()
    assert [t for k, t in source.events if k == "queued"] == [asking, asking]
    assert all(t != asking for k, t in source.events if k == "generate")


def test_transformers_source_releases_the_pool_when_a_reply_is_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nbstream.sources.transformers import TransformersSource

    calls: list[int] = []
    monkeypatch.setattr(openmp, "release_pool", lambda: calls.append(threading.get_ident()) or True)
    TransformersSource(tiny_model(), tiny_tokenizer()).queued()  # needs nothing loaded
    assert calls == [threading.get_ident()]


def test_a_hook_that_raises_does_not_lose_the_reply(caplog: pytest.LogCaptureFixture) -> None:
    from nbstream import ChatWidget

    class Broken(Recording):
        def queued(self) -> None:
            raise RuntimeError("boom")

    chat = ChatWidget(Broken())
    try:
        with caplog.at_level(logging.WARNING, logger="nbstream"):
            assert chat.send("hi").wait(timeout=30) == "ok"
    finally:
        chat.close()
    assert any("Broken.queued() raised" in r.getMessage() for r in caplog.records)
