"""Real HTTP servers for the OpenAISource tests (a plain module, imported by the tests).

* :func:`start_fake_server`: this file run as a script, a small OpenAI-compatible
  server written with the standard library. It speaks the same wire format as
  vLLM or ``transformers serve`` (HTTP/1.1, chunked ``text/event-stream``,
  ``data: {...}`` chunks, optional ``data: [DONE]``) and misbehaves on demand,
  chosen by the request's ``model``:

  ============================  =================================================
  ``fake`` (or any other name)  streams ``x_pieces`` then ``[DONE]``
  ``fake-nodone``               the same without ``[DONE]`` (as transformers serve)
  ``fake-stall``                ``x_stall_after`` pieces, then nothing at all
  ``fake-stall-headers``        never sends the response headers
  ``fake-401`` / ``fake-500``   an HTTP error with an OpenAI-style JSON error
  ``fake-502-html``             an HTTP error with a long HTML page
  ``fake-json``                 200 with a non-streaming JSON completion
  ``fake-badjson``              a malformed chunk after ``x_stall_after`` pieces
  ``fake-error-event``          a ``{"error": ...}`` chunk after ``x_stall_after`` pieces
  ``fake-error-event-text``     an ``event: error`` with a plain-text message, likewise
  ``fake-reasoning``            ``reasoning_content`` deltas, then the content
  ``fake-die``                  SIGKILLs its own process after ``x_die_after`` pieces
  ``fake-garbage``              after ``x_stall_after`` pieces, lines that are no SSE
                                field (an HTML page), then the body ends
  ``fake-huge-line``            after ``x_stall_after`` pieces, a 10 MB line with no end,
                                then nothing (it waits for the client to go)
  ``fake-bad-utf8``             after ``x_stall_after`` pieces, a chunk with bytes that
                                are not UTF-8
  ``fake-wrong-shape``          after ``x_stall_after`` pieces, a chunk whose ``choices``
                                is an object, not a list
  ``fake-500-midstream``        after ``x_stall_after`` pieces, vLLM's mid-stream error
                                chunk (``code: 500``), then the body ends
  ``transcript``                replays ``tests/data/transcripts/<x_transcript>.sse``
                                byte for byte, in pieces of ``x_chunk`` bytes (default:
                                one event per write); see :func:`load_transcript`
  ============================  =================================================

  ``POST /v1/responses`` (the Responses API) takes ``transcript`` likewise, and
  streams ``x_pieces`` as ``response.output_text.delta`` events for any other name.

  ``x_delay`` sets the seconds between pieces. ``GET /_log`` returns every
  request the server saw (model, Authorization header, body) and whether and
  when it saw the client disconnect. The process prints ``PORT <n>`` once it
  listens on 127.0.0.1 (port 0: any free port).

* :func:`start_transformers_serve`: ``transformers serve`` on a local model
  folder, on 127.0.0.1, offline, in its own process group.
* :func:`start_llama_cpp_server`: llama-cpp-python's server
  (``python -m llama_cpp.server``) on a GGUF file, likewise.

All three return a :class:`ServerProcess`, stopped with :meth:`ServerProcess.stop`
through its process group (only processes these helpers started are touched).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DEFAULT_PIECES = ["Hello", ",", " world", "!", " How", " are", " you", "?"]
TRANSCRIPTS = Path(__file__).parent / "data" / "transcripts"


@dataclass
class Transcript:
    """A recorded SSE body and what the file's ``# `` lines say about it."""

    notes: list[str]
    body: bytes
    #: ``(field, status, json body)``: the server refuses requests that carry ``field``
    refuse: tuple[str, int, bytes] | None = None


def load_transcript(name: str) -> Transcript:
    """``tests/data/transcripts/<name>.sse``: leading ``# `` lines are notes (where the shape
    comes from; ``# refuse: FIELD STATUS JSON``), the rest is sent exactly as it is."""
    raw = (TRANSCRIPTS / f"{name}.sse").read_bytes()
    notes: list[str] = []
    while raw.startswith(b"# "):
        line, _, raw = raw.partition(b"\n")
        notes.append(line[2:].decode())
    refuse = None
    for note in notes:
        if note.startswith("refuse: "):
            field_, status, payload = note[len("refuse: "):].split(" ", 2)
            refuse = (field_, int(status), payload.encode())
    return Transcript(notes, raw, refuse)
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}


# ---------------------------------------------------------------- client side
@dataclass
class ServerProcess:
    """A server running in its own process group."""

    base_url: str  # ends with /v1
    process: subprocess.Popen[bytes] = field(repr=False)
    log_path: Path | None = None
    started_in: float = 0.0

    @property
    def root(self) -> str:
        return self.base_url.rsplit("/v1", 1)[0]

    def get_json(self, path: str, timeout: float = 5.0) -> Any:
        with urllib.request.urlopen(self.root + path, timeout=timeout) as resp:
            return json.loads(resp.read())

    def requests(self) -> list[dict[str, Any]]:
        """What the fake server saw (``GET /_log``)."""
        return list(self.get_json("/_log")["requests"])

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the server's process group (a crash, as the client sees it)."""
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace`` seconds."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
            except ProcessLookupError:
                pass
        # children of a server that died on its own, still in its group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def cpu_seconds(self) -> float:
        """CPU time used so far by the server and its children (psutil), in seconds."""
        import psutil

        proc = psutil.Process(self.process.pid)
        total = 0.0
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                t = p.cpu_times()
                total += t.user + t.system
        return total

    def wait_idle(self, timeout: float, window: float = 0.3, busy: float = 0.1) -> float:
        """Block until the server used less than ``busy`` of a core over ``window``
        seconds (it stopped generating); return when that window began
        (``time.monotonic()``). Raises TimeoutError after ``timeout`` seconds.

        Idleness can only be seen over a span of time: each check samples the
        server's CPU time ``window`` seconds apart.
        """
        deadline = time.monotonic() + timeout
        before, at = self.cpu_seconds(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(window)  # the sampling window, not a wait for an event
            now_cpu, now = self.cpu_seconds(), time.monotonic()
            if now_cpu - before < busy * (now - at):
                return at
            before, at = now_cpu, now
        raise TimeoutError(f"the server still used the CPU after {timeout} s:\n"
                           f"{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]


def start_fake_server(timeout: float = 20.0) -> ServerProcess:
    """Run this file as a server on a free port of 127.0.0.1."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-u", __file__, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    assert proc.stdout is not None
    line = b""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if ready:
        line = proc.stdout.readline()
    if not line.startswith(b"PORT "):
        os.killpg(proc.pid, signal.SIGKILL)
        raise RuntimeError(f"the fake server did not start: {line!r}")
    port = int(line.split()[1])
    return ServerProcess(f"http://127.0.0.1:{port}/v1", proc, started_in=time.monotonic() - t0)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_transformers_serve(model_dir: Path, log_path: Path, *, threads: int = 1,
                             timeout: float = 180.0) -> ServerProcess:
    """``transformers serve <folder>`` on 127.0.0.1, offline; returns once it answers.

    The folder is given as ``force_model``, so the server loads it at start
    and knows it by its path: requests name the model ``str(model_dir)``.

    ``threads`` sets torch's threads (``OMP_NUM_THREADS``). One is the right
    number on a small shared machine: with two cores busy with the tests and
    other processes, two OpenMP threads spin against each other and SmolLM2
    ran at 0.5 to 3 s per token instead of ~0.13 s (measured here).
    """
    exe = Path(sys.executable).with_name("transformers")
    cmd = [str(exe) if exe.exists() else "transformers", "serve", str(model_dir),
           "--host", "127.0.0.1", "--port", str(free_port()), "--device", "cpu",
           "--log-level", "warning"]
    env = {**os.environ, **OFFLINE_ENV, "OMP_NUM_THREADS": str(threads)}

    def ready(models: dict[str, Any]) -> bool:
        return any(m.get("id") == str(model_dir) for m in models.get("data", []))

    return _start_server("transformers serve", cmd, env, log_path, timeout, ready, poll=0.25)


def _start_server(name: str, cmd: list[str], env: dict[str, str], log_path: Path,
                  timeout: float, ready: Callable[[dict[str, Any]], bool],
                  poll: float) -> ServerProcess:
    """Start ``cmd`` (its ``--port`` on 127.0.0.1) in its own process group, logging to
    ``log_path``; return once its ``/v1/models`` answer satisfies ``ready``."""
    t0 = time.monotonic()
    log = log_path.open("wb")
    try:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    finally:
        log.close()
    port = cmd[cmd.index("--port") + 1]
    server = ServerProcess(f"http://127.0.0.1:{port}/v1", proc, log_path)
    deadline = t0 + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{server.log_tail()}")
        try:
            if ready(server.get_json("/v1/models", timeout=2.0)):
                break
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"{name} did not answer within {timeout:g} s:\n"
                               f"{server.log_tail()}")
        time.sleep(poll)  # polling another process until it answers (bounded by the deadline)
    server.started_in = time.monotonic() - t0
    return server


def llama_cpp_available() -> bool:
    """Whether llama-cpp-python's server can be imported here (the dev extra has it)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None
               for m in ("llama_cpp", "uvicorn", "sse_starlette", "starlette_context"))


def start_llama_cpp_server(gguf: Path, log_path: Path, *, n_ctx: int = 2048,
                           interrupt_requests: bool = True, threads: int = 1,
                           timeout: float = 120.0, port: int | None = None) -> ServerProcess:
    """llama-cpp-python's server (``python -m llama_cpp.server``) on a GGUF file, on
    127.0.0.1, in its own process group; returns once ``/v1/models`` answers.

    ``interrupt_requests`` is its own option: True (its default) makes a second
    request cut the stream that is running. ``port``: a free one when None (a
    server started again after a crash takes its predecessor's).
    """
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
           "--host", "127.0.0.1", "--port", str(port or free_port()), "--n_ctx", str(n_ctx),
           "--n_threads", str(threads), "--n_threads_batch", str(threads),
           "--interrupt_requests", str(interrupt_requests), "--seed", "1"]
    return _start_server("llama_cpp.server", cmd, {**os.environ, **OFFLINE_ENV}, log_path,
                         timeout, lambda models: bool(models.get("data")), poll=0.1)


# ---------------------------------------------------------------- server side
class _Log:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []

    def add(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(record)

    def dump(self) -> bytes:
        with self.lock:
            return json.dumps({"requests": self.requests}).encode()


_LOG = _Log()


def _chunk(content: str | None = None, *, role: str | None = None,
           reasoning: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


class _Disconnected(Exception):
    pass


class FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nbstream-fake/1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing
    def _send_json(self, status: int, payload: Any, content_type: str = "application/json"
                   ) -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise _Disconnected() from exc

    def _event(self, payload: Any) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self._write(f"data: {data}\n\n".encode())

    def _end_stream(self) -> None:
        self._write(b"")  # the zero-length chunk ends the body

    def _wait_for_disconnect(self, limit: float = 30.0) -> bool:
        """Block until the client closes the connection (True) or ``limit`` passes."""
        sock = self.connection
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], 0.02)
            if readable:
                try:
                    if not sock.recv(1, socket.MSG_PEEK):
                        return True
                except OSError:
                    return True
        return False

    # -- endpoints
    def do_GET(self) -> None:
        if self.path == "/_log":
            self._send_json(200, _LOG.dump())
        elif self.path == "/health":
            self._send_json(200, {"status": "ok"})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        started = time.monotonic()
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "the body is not JSON"}})
            return
        record: dict[str, Any] = {
            "path": self.path,
            "model": body.get("model"),
            "authorization": self.headers.get("Authorization"),
            "accept": self.headers.get("Accept"),
            "body": body,
            "disconnected": False,
            "disconnect_s": None,
            "finished": False,
            "stalled": False,  # set when a fake-stall model starts sending nothing
        }
        _LOG.add(record)
        if self.path not in ("/v1/chat/completions", "/v1/responses"):
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            if self.path == "/v1/responses":
                self._serve_responses(body)
            else:
                self._serve(body, record)
            record["finished"] = True
        except _Disconnected:
            record["disconnected"] = True
            record["disconnect_s"] = round(time.monotonic() - started, 3)

    def _serve(self, body: dict[str, Any], record: dict[str, Any]) -> None:
        mode = str(body.get("model", "fake"))
        pieces = [str(p) for p in body.get("x_pieces", DEFAULT_PIECES)]
        delay = float(body.get("x_delay", 0.0))
        after = int(body.get("x_stall_after", 2))

        if mode == "fake-401":
            self._send_json(401, {"error": {"message": "Incorrect API key provided: sk-…",
                                            "type": "invalid_request_error",
                                            "code": "invalid_api_key"}})
            return
        if mode == "fake-500":
            self._send_json(500, {"error": {"message": "the model crashed: CUDA out of memory",
                                            "type": "server_error"}})
            return
        if mode == "fake-502-html":
            page = "<html><body><h1>502 Bad Gateway</h1>" + "<p>nginx</p>" * 500 + "</body></html>"
            self._send_json(502, page.encode(), "text/html")
            return
        if mode == "fake-json":
            self._send_json(200, {"object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "".join(pieces)}}]})
            return
        if mode == "fake-stall-headers":
            record["stalled"] = True
            if self._wait_for_disconnect():
                raise _Disconnected()
            return
        if mode == "transcript":
            self._replay(body)
            return

        self._start_stream()
        self._event(_chunk(role="assistant"))
        if mode == "fake-reasoning":
            for part in ("Let me", " think."):
                self._event(_chunk(reasoning=part))
        for i, piece in enumerate(pieces):
            if mode == "fake-die" and i == int(body.get("x_die_after", 3)):
                os.kill(os.getpid(), signal.SIGKILL)
            if i == after:
                if mode == "fake-stall":
                    record["stalled"] = True
                    if self._wait_for_disconnect():
                        raise _Disconnected()
                    return
                if mode == "fake-badjson":
                    self._event('{"choices": [{"delta": {"content": "oops"')
                elif mode == "fake-error-event":
                    self._event({"error": {"message": "backend overloaded, try again",
                                           "code": 503}})
                elif mode == "fake-error-event-text":
                    self._write(b"event: error\ndata: backend overloaded, try again\n\n")
                elif mode == "fake-garbage":
                    self._write(b"<html><body>\n<h1>Oops</h1>\n</body></html>\n\n")
                    self._end_stream()
                    return
                elif mode == "fake-huge-line":
                    record["stalled"] = True
                    line = b"x" * (1 << 20)
                    for _ in range(10):  # 10 MB, never a newline
                        self._write(line)
                    if self._wait_for_disconnect():
                        raise _Disconnected()
                    return
                elif mode == "fake-bad-utf8":
                    self._write(b'data: {"choices": [{"delta": {"content": "caf\xe9 \xff"}}]}\n\n')
                elif mode == "fake-wrong-shape":
                    self._event({"choices": {"delta": {"content": "x"}}})
                elif mode == "fake-500-midstream":  # what vLLM sends when generation fails
                    self._event({"error": {"object": "error", "message": "EngineCore "
                                           "encountered an issue", "type":
                                           "InternalServerError", "param": None, "code": 500}})
                    self._end_stream()
                    return
            if delay and i:
                time.sleep(delay)  # the scenario: a server that streams slowly
            self._event(_chunk(piece))
        final = _chunk(finish="stop")
        final["usage"] = {"prompt_tokens": 5, "completion_tokens": len(pieces),
                          "total_tokens": 5 + len(pieces)}
        self._event(final)
        if mode != "fake-nodone":
            self._event("[DONE]")
        self._end_stream()


    def _serve_responses(self, body: dict[str, Any]) -> None:
        if body.get("model") == "transcript":
            self._replay(body)
            return
        pieces = [str(p) for p in body.get("x_pieces", DEFAULT_PIECES)]
        self._start_stream()
        seq = iter(range(1_000_000))

        def event(kind: str, **fields: Any) -> None:
            payload = {"type": kind, "sequence_number": next(seq), **fields}
            self._write(f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode())

        response = {"id": "resp_fake", "object": "response", "status": "in_progress",
                    "model": body.get("model"), "output": []}
        event("response.created", response=response)
        event("response.output_item.added", output_index=0, item={
            "id": "msg_fake", "type": "message", "status": "in_progress",
            "role": "assistant", "content": []})
        delay = float(body.get("x_delay", 0.0))
        for i, piece in enumerate(pieces):
            if delay and i:
                time.sleep(delay)  # the scenario: a server that streams slowly
            event("response.output_text.delta", item_id="msg_fake", output_index=0,
                  content_index=0, delta=piece)
        usage = {"input_tokens": 5, "output_tokens": len(pieces),
                 "total_tokens": 5 + len(pieces),
                 "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}}
        event("response.completed", response={**response, "status": "completed",
                                              "usage": usage})
        self._end_stream()

    def _replay(self, body: dict[str, Any]) -> None:
        transcript = load_transcript(str(body["x_transcript"]))
        if transcript.refuse is not None and transcript.refuse[0] in body:
            _, status, payload = transcript.refuse
            self._send_json(status, payload)
            return
        self._start_stream()
        data = transcript.body
        size = int(body.get("x_chunk", 0))
        if size > 0:
            parts = [data[i:i + size] for i in range(0, len(data), size)]
        else:  # one event per write, as servers flush them
            sep = b"\r\n\r\n" if b"\r\n" in data else b"\n\n"
            parts = [p + sep for p in data.split(sep) if p]
        for part in parts:
            self._write(part)
        self._end_stream()


class _Server(ThreadingHTTPServer):
    #: connections waiting to be accepted (socketserver's default, 5, resets the rest: 32
    #: requests at once, as a real server takes them, need more)
    request_queue_size = 256


def main(argv: list[str]) -> None:
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 0
    server = _Server(("127.0.0.1", port), FakeHandler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    main(sys.argv[1:])
