"""Faults around a real model server (#22): it dies or freezes mid-answer, it comes back,
and a Stop (or closing the widget) frees it.

llama-cpp-python's server (``python -m llama_cpp.server``) on the embedded SmolLM2 GGUF,
on 127.0.0.1, started and stopped by process group (tests/_servers.py). Whether the
server still generates is read from its CPU time (``ServerProcess.wait_idle``): one
thread at ~20 tokens/s keeps a core busy until the request ends; a request for 2,000
tokens would keep it busy for minutes, so idleness soon after a Stop is the Stop's doing.
How soon is a figure of ``benchmarks/stop_frees_server.py``, not asserted here.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from _servers import ServerProcess, llama_cpp_available, start_llama_cpp_server
from _wait import wait_until

from nbstream import ChatWidget, ReplyError, ReplyTimeout
from nbstream.sources import OpenAISource

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(not llama_cpp_available(),
                       reason="llama-cpp-python[server] is not installed (make setup installs it)"),
]

N_CTX = 1024
STORY = "Write a long story about a robot who learns to paint."


def gguf() -> Path:
    from nbstream.sources.transformers.default_model import gguf_path

    return gguf_path()


def source(server: ServerProcess, **options: object) -> OpenAISource:
    return OpenAISource("smollm2", server.base_url, temperature=0, seed=1, **options)


def port_of(server: ServerProcess) -> int:
    return int(server.base_url.rsplit(":", 1)[1].split("/", 1)[0])


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_llama_cpp_server(gguf(), tmp_path_factory.mktemp("llama") / "server.log",
                                    n_ctx=N_CTX)
    yield server
    server.stop()


def streaming(chat: ChatWidget, chars: int = 20) -> None:
    """Ask the long story and return once ``chars`` characters of it arrived."""
    reply = chat.send(STORY)
    wait_until(lambda: len(reply.text) >= chars or reply.done, 120, "the answer to start")
    assert not reply.done, reply.status


def test_a_server_killed_mid_answer_ends_the_reply_as_an_error_then_it_serves_again(
        tmp_path: Path) -> None:
    server = start_llama_cpp_server(gguf(), tmp_path / "first.log", n_ctx=N_CTX)
    chat = ChatWidget(source(server, max_tokens=2000))
    try:
        streaming(chat)
        reply = chat.last
        assert reply is not None
        server.kill()  # SIGKILL: the connection closes mid-body
        with pytest.raises(ReplyError) as info:
            reply.wait(60)
        assert reply.status == "error"
        assert "lost" in str(info.value) or "incomplete" in str(info.value), info.value
        assert reply.finish_reason == "error"
        shown = reply.text
        assert len(shown) >= 20  # the partial text is kept
        assert chat.messages[-1]["content"] == shown

        # the server is back on the same address: Regenerate and Continue work in the
        # same kernel, on the same widget and source
        server = start_llama_cpp_server(gguf(), tmp_path / "second.log", n_ctx=N_CTX,
                                        port=port_of(server))
        chat.generation = {"max_new_tokens": 12}
        again = chat.regenerate()
        assert again is not None and again is not reply
        again.wait(120)
        assert again.status == "done" and again.finish_reason == "length" and again.text
        assert reply.text == shown  # the failed answer stays, as an alternative
        more = chat.continue_()
        more.wait(120)
        assert more.status == "done" and more.text
    finally:
        chat.close()
        server.stop()


def test_a_server_that_freezes_mid_answer_ends_the_reply_at_the_stall_limit(
        tmp_path: Path) -> None:
    server = start_llama_cpp_server(gguf(), tmp_path / "server.log", n_ctx=N_CTX)
    chat = ChatWidget(source(server, max_tokens=2000), stall_timeout=3)
    stopped = False
    try:
        streaming(chat)
        reply = chat.last
        assert reply is not None
        os.killpg(server.process.pid, signal.SIGSTOP)  # alive, connected, silent
        stopped = True
        with pytest.raises(ReplyTimeout, match="no token for 3 s"):
            reply.wait(60)
        assert reply.status == "timeout" and len(reply.text) >= 20
    finally:
        chat.close()
        if stopped:
            os.killpg(server.process.pid, signal.SIGCONT)
        server.stop()


@pytest.mark.parametrize("how", ["stop", "close"])
def test_stop_and_close_free_the_server(llama: ServerProcess, how: str) -> None:
    chat = ChatWidget(source(llama, max_tokens=2000))
    try:
        streaming(chat)
        reply = chat.last
        assert reply is not None
        # generating: a core busy (0.3 s sampled; idle means under 10 % of one)
        used = llama.cpu_seconds()
        wait_until(lambda: llama.cpu_seconds() - used > 0.2, 30, "the server to work")
        log_before = len(llama.log_tail(10**7))
        if how == "stop":
            chat.stop()
        else:
            chat.close()
        assert reply.status == "stopped"
        llama.wait_idle(timeout=60)  # 2,000 tokens would keep it busy for minutes
        wait_until(lambda: "Disconnected from client" in llama.log_tail(10**7)[log_before:], 30,
                   "the server to log the client's going")
    finally:
        chat.close()
    # and the server serves the next request at once
    fresh = ChatWidget(source(llama, max_tokens=8))
    try:
        r = fresh.send("What is the capital of France?")
        r.wait(120)
        assert r.status == "done" and r.text
    finally:
        fresh.close()


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    """``transformers serve`` on the embedded model's converted folder (one torch thread)."""
    from _servers import start_transformers_serve

    from nbstream.sources.transformers.default_model import default_model_path

    folder = default_model_path()
    server = start_transformers_serve(folder, tmp_path_factory.mktemp("serve") / "serve.log")
    yield server, str(folder)
    server.stop()


@pytest.mark.model
@pytest.mark.parametrize("kind", ["chat_completions", "responses"])
def test_stop_frees_transformers_serve(serve: tuple[ServerProcess, str], kind: str) -> None:
    from nbstream.sources import ResponsesSource

    server, model = serve
    src = (OpenAISource(model, server.base_url, temperature=0, max_tokens=2000)
           if kind == "chat_completions"
           else ResponsesSource(model, server.base_url, temperature=0, max_output_tokens=2000))
    chat = ChatWidget(src)
    try:
        streaming(chat)
        used = server.cpu_seconds()
        wait_until(lambda: server.cpu_seconds() - used > 0.2, 30, "the server to work")
        chat.stop()
        assert chat.last is not None and chat.last.status == "stopped"
        server.wait_idle(timeout=60)  # 2,000 tokens would keep it busy for minutes
        # and it serves the next request
        chat.generation = {"max_new_tokens": 8}
        r = chat.send("What is the capital of France?")
        r.wait(120)
        assert r.status == "done" and r.text
    finally:
        chat.close()


def test_the_stop_benchmark_runs() -> None:
    """benchmarks/stop_frees_server.py on one round against llama.cpp, so it cannot rot
    (its figures are printed, not asserted)."""
    import re
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "stop_frees_server.py"
    out = subprocess.run([sys.executable, str(script), "--rounds", "1", "--skip-serve",
                          "--skip-transformers"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = re.findall(r"^(llama\.cpp, OpenAISource, (?:stop|close)\(\))\n +server idle +median "
                      r"+(\d+) ms", out.stdout, re.M)
    assert [name for name, _ in rows] == ["llama.cpp, OpenAISource, stop()",
                                          "llama.cpp, OpenAISource, close()"], out.stdout
    # our side of each stop, measured apart from the server's
    assert len(re.findall(r"^ +our socket closed +median", out.stdout, re.M)) == 2, out.stdout
