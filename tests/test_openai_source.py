"""OpenAISource against real local HTTP servers.

Two servers, both real processes on 127.0.0.1 (see ``_servers.py``):

* a small standard-library server speaking the OpenAI streaming wire format,
  which misbehaves on demand (HTTP errors, no ``[DONE]``, stalls, malformed
  chunks, dying mid-stream): started in well under a second;
* ``transformers serve`` on the converted embedded SmolLM2 model (marked
  ``model``: it loads the model, ~15 s, once for the module).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _servers import DEFAULT_PIECES, ServerProcess, free_port, start_fake_server
from _wait import wait_until

from nbstream import ChatWidget, ReplyError
from nbstream.sources import Cancelled, OpenAISource, Reasoning, SourceError
from nbstream.sources.base import ChatMessage

pytestmark = pytest.mark.server

MSGS: list[ChatMessage] = [{"role": "user", "content": "hi"}]
EXPECTED = "".join(DEFAULT_PIECES)


@pytest.fixture(scope="module")
def fake() -> Iterator[ServerProcess]:
    server = start_fake_server()
    yield server
    server.stop()


@pytest.fixture
def doomed() -> Iterator[ServerProcess]:
    """A fake server of its own, for a test that kills it."""
    server = start_fake_server()
    yield server
    server.stop()


def collect(source: OpenAISource, *, cancel_after: int | None = None,
            cancel_when: Callable[[list[str]], bool] | None = None,
            on_piece: Callable[[list[str]], None] | None = None,
            ) -> tuple[list[str], BaseException | None, float]:
    """Run ``generate``; return (pieces, exception raised or None, seconds after a cancel).

    ``cancel_when(pieces)`` is polled on another thread; the cancel is set once
    it is true. The seconds after a cancel are a figure to print, not to assert.
    """
    pieces: list[str] = []
    cancel = threading.Event()
    cancelled_at: list[float] = []
    finished = threading.Event()

    def set_cancel() -> None:
        cancelled_at.append(time.monotonic())
        cancel.set()

    def emit(piece: str) -> None:
        pieces.append(piece)
        if on_piece is not None:
            on_piece(pieces)
        if cancel_after is not None and len(pieces) >= cancel_after and not cancel.is_set():
            set_cancel()

    def cancel_on_condition() -> None:
        assert cancel_when is not None
        wait_until(lambda: finished.is_set() or cancel_when(list(pieces)), 60,
                   "the moment to cancel")
        if not finished.is_set():
            set_cancel()

    watcher = None
    if cancel_when is not None:
        watcher = threading.Thread(target=cancel_on_condition, daemon=True)
        watcher.start()
    error: BaseException | None = None
    try:
        source.generate(MSGS, emit, cancel)
    except (Cancelled, SourceError) as exc:
        error = exc
    finally:
        finished.set()
        if watcher is not None:
            watcher.join(60)
    after = time.monotonic() - cancelled_at[0] if cancelled_at else 0.0
    return pieces, error, after


def last_request(server: ServerProcess) -> dict[str, Any]:
    return server.requests()[-1]


# ------------------------------------------------------------------ the fake server
def test_streams_the_pieces_and_passes_options_through(fake: ServerProcess) -> None:
    source = OpenAISource("fake", fake.base_url, temperature=0, max_tokens=5, seed=1,
                          stop=["\n\n"])
    pieces, error, _ = collect(source)
    assert error is None
    assert pieces == DEFAULT_PIECES  # the role-only and finish chunks emit nothing
    outcome = source.generate(MSGS, lambda piece: None, threading.Event())
    assert outcome.usage == {"prompt_tokens": 5, "completion_tokens": len(DEFAULT_PIECES)}
    assert outcome.figures["tokens"] == len(DEFAULT_PIECES)
    seen = last_request(fake)
    assert seen["path"] == "/v1/chat/completions"
    assert seen["accept"] == "text/event-stream"
    assert seen["body"] == {"model": "fake", "messages": MSGS, "stream": True,
                            "stream_options": {"include_usage": True},
                            "temperature": 0, "max_tokens": 5, "seed": 1, "stop": ["\n\n"]}


def test_a_stream_without_done_ends_cleanly(fake: ServerProcess) -> None:
    pieces, error, _ = collect(OpenAISource("fake-nodone", fake.base_url))
    assert error is None
    assert pieces == DEFAULT_PIECES


@pytest.mark.parametrize(
    ("model", "status", "says"),
    [
        ("fake-401", 401, "Incorrect API key provided"),
        ("fake-500", 500, "the model crashed: CUDA out of memory"),
        ("fake-502-html", 502, "502 Bad Gateway nginx"),
    ],
)
def test_http_errors_carry_the_status_and_the_servers_message(
        fake: ServerProcess, model: str, status: int, says: str) -> None:
    pieces, error, _ = collect(OpenAISource(model, fake.base_url))
    assert pieces == []
    assert isinstance(error, SourceError)
    assert error.status_code == status
    message = str(error)
    assert f"HTTP {status}" in message and says in message
    assert fake.base_url in message
    assert len(message) < 400  # a long error page is trimmed
    assert "<" not in message  # and stripped of its tags


def test_a_json_answer_instead_of_a_stream_is_an_error(fake: ServerProcess) -> None:
    _, error, _ = collect(OpenAISource("fake-json", fake.base_url))
    assert isinstance(error, SourceError)
    assert "not a stream of server-sent events" in str(error)
    assert "application/json" in str(error)


def test_a_malformed_chunk_is_an_error_after_the_good_ones(fake: ServerProcess) -> None:
    pieces, error, _ = collect(OpenAISource("fake-badjson", fake.base_url))
    assert pieces == DEFAULT_PIECES[:2]
    assert isinstance(error, SourceError)
    assert "malformed JSON in event 4" in str(error)
    assert '"oops"' in str(error)


@pytest.mark.parametrize("model", ["fake-error-event", "fake-error-event-text"])
def test_an_error_event_mid_stream_is_an_error(fake: ServerProcess, model: str) -> None:
    pieces, error, _ = collect(OpenAISource(model, fake.base_url))
    assert pieces == DEFAULT_PIECES[:2]
    assert isinstance(error, SourceError)
    assert "backend overloaded, try again" in str(error)


@pytest.mark.parametrize(("model", "says"), [
    # lines that are no SSE field are ignored (the spec); then the body ends unfinished
    ("fake-garbage", "with neither a finish reason nor [DONE]"),
    ("fake-huge-line", "a line longer than 1,048,576 bytes"),
    ("fake-bad-utf8", "not valid UTF-8"),
    ("fake-wrong-shape", "is not a chat completion chunk"),
    ("fake-500-midstream", "EngineCore encountered an issue"),
])
def test_a_server_that_answers_garbage_gives_a_clear_error(fake: ServerProcess, model: str,
                                                           says: str) -> None:
    pieces, error, _ = collect(OpenAISource(model, fake.base_url, timeout=60))
    assert isinstance(error, SourceError), error
    assert says in str(error)
    assert pieces == DEFAULT_PIECES[:2]  # what came before the garbage is kept
    if model == "fake-huge-line":  # refused as soon as the line passed the limit: the
        # client went away while the server still had most of its 10 MB to send
        wait_until(lambda: last_request(fake)["disconnected"], 30, "the client to go")


def test_reasoning_is_a_part_of_its_own(fake: ServerProcess) -> None:
    pieces, error, _ = collect(OpenAISource("fake-reasoning", fake.base_url))
    assert error is None
    assert pieces == [Reasoning("Let me"), Reasoning(" think."), *DEFAULT_PIECES]
    assert [isinstance(p, Reasoning) for p in pieces[:3]] == [True, True, False]


def test_cancel_mid_stream_closes_the_connection(fake: ServerProcess) -> None:
    # 1000 pieces 50 ms apart: the server would take 50 s to finish
    source = OpenAISource("fake", fake.base_url, x_pieces=[f" w{i}" for i in range(1000)],
                          x_delay=0.05)
    pieces, error, _ = collect(source, cancel_after=3)
    assert isinstance(error, Cancelled)
    assert pieces == [" w0", " w1", " w2"]
    seen = wait_until(lambda: last_request(fake)["disconnected"] and last_request(fake), 30,
                      "the server to see the client go")
    assert not seen["finished"]  # the client went away mid-answer


@pytest.mark.parametrize("model", ["fake-stall", "fake-stall-headers"])
def test_cancel_while_the_server_stalls_returns_promptly(fake: ServerProcess, model: str
                                                         ) -> None:
    """Blocked reading (mid-body, or waiting for the headers): the watcher closes it."""
    before = len(fake.requests())
    expected = DEFAULT_PIECES[:2] if model == "fake-stall" else []

    def stalled(pieces: list[str]) -> bool:
        # the server sends nothing more (for up to 30 s) and the client read all it sent
        requests = fake.requests()
        return len(requests) > before and requests[-1]["stalled"] and pieces == expected

    pieces, error, _ = collect(OpenAISource(model, fake.base_url), cancel_when=stalled)
    assert isinstance(error, Cancelled)
    assert pieces == expected
    # returning at all proves it: the server stays silent until the client closes
    seen = wait_until(lambda: last_request(fake)["disconnected"] and last_request(fake), 30,
                      "the server to see the client go")
    assert seen["model"] == model and not seen["finished"]


def test_a_cancel_before_the_request_sends_nothing(fake: ServerProcess) -> None:
    before = len(fake.requests())
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        OpenAISource("fake", fake.base_url).generate(MSGS, lambda p: None, cancel)
    assert len(fake.requests()) == before


def test_a_stalled_server_times_out(fake: ServerProcess) -> None:
    pieces, error, _ = collect(OpenAISource("fake-stall", fake.base_url, timeout=0.3))
    assert pieces == DEFAULT_PIECES[:2]
    assert isinstance(error, SourceError)
    assert "sent nothing for 0.3 s after 2 pieces" in str(error)


def test_an_unreachable_server_is_a_clear_error() -> None:
    source = OpenAISource("m", f"http://127.0.0.1:{free_port()}/v1", api_key="sk-hidden")
    _, error, _ = collect(source)
    assert isinstance(error, SourceError)
    assert "cannot reach m at http://127.0.0.1:" in str(error)
    assert "Connection refused" in str(error)
    assert "sk-hidden" not in str(error)


@pytest.mark.parametrize("how", ["killed by the test", "killed itself"])
def test_a_server_killed_mid_stream_is_an_error_keeping_the_pieces(
        doomed: ServerProcess, how: str) -> None:
    if how == "killed itself":
        source = OpenAISource("fake-die", doomed.base_url, x_die_after=3)
        pieces, error, _ = collect(source)
    else:
        source = OpenAISource("fake", doomed.base_url, x_delay=0.05,
                              x_pieces=[f" w{i}" for i in range(100)])
        pieces, error, _ = collect(
            source, on_piece=lambda got: doomed.kill() if len(got) == 3 else None)
    # the client sees the cut before the dying process has finished exiting
    wait_until(lambda: not doomed.alive(), 30, "the server process to end")
    assert len(pieces) == 3
    assert isinstance(error, SourceError)
    message = str(error)
    assert "was lost after 3 pieces" in message and "did the server stop?" in message


def test_the_api_key_comes_from_the_environment_and_never_shows(
        fake: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-0123456789secret"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    source = OpenAISource("fake", fake.base_url, temperature=0.5)
    assert secret not in repr(source) and secret not in source.label
    assert secret not in repr(ChatWidget(source))
    _, error, _ = collect(source)
    assert error is None
    assert last_request(fake)["authorization"] == f"Bearer {secret}"

    _, error, _ = collect(OpenAISource("fake-401", fake.base_url))
    assert isinstance(error, SourceError) and secret not in str(error)

    collect(OpenAISource("fake", fake.base_url, api_key="sk-explicit"))
    assert last_request(fake)["authorization"] == "Bearer sk-explicit"

    monkeypatch.delenv("OPENAI_API_KEY")
    collect(OpenAISource("fake", fake.base_url))
    assert last_request(fake)["authorization"] is None

    # credentials in the URL are used (basic auth) but not shown either
    with_password = fake.base_url.replace("http://", "http://me:hunter2@")
    source = OpenAISource("fake", with_password)
    assert "hunter2" not in repr(source) and source.base_url == fake.base_url
    _, error, _ = collect(source)
    assert error is None
    assert last_request(fake)["authorization"] == "Basic bWU6aHVudGVyMg=="


def test_repr_label_lane_and_concurrency() -> None:
    a = OpenAISource("llama-3-8b", "http://gpu-box:8000/v1/", api_key="sk-x", temperature=0,
                     max_tokens=64)
    assert repr(a) == ("OpenAISource('llama-3-8b', base_url='http://gpu-box:8000/v1', "
                       "max_tokens=64, temperature=0)")
    assert a.label == "llama-3-8b"
    assert a.concurrency == 4
    assert a.url == "http://gpu-box:8000/v1/chat/completions"
    b = OpenAISource("llama-3-8b", "http://gpu-box:8000/v1", concurrency=16, seed=3)
    assert a.lane_key() == b.lane_key() == ("openai", "http://gpu-box:8000/v1", "llama-3-8b")
    assert b.concurrency == 16
    assert OpenAISource("other", "http://gpu-box:8000/v1").lane_key() != a.lane_key()
    # a local folder (transformers serve) is shown by its name
    assert OpenAISource("/models/SmolLM2-135M-Instruct/").label == "SmolLM2-135M-Instruct"
    assert OpenAISource("org/model", label="mine").label == "mine"
    # a full endpoint URL is accepted too
    assert OpenAISource("m", "http://h:1/v1/chat/completions").base_url == "http://h:1/v1"


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        (("m", "ftp://host/v1"), {}, ValueError),
        (("m", "not a url"), {}, ValueError),
        (("",), {}, ValueError),
        (("m",), {"concurrency": 0}, ValueError),
        (("m",), {"stream": False}, TypeError),
        (("m",), {"messages": []}, TypeError),
    ],
)
def test_bad_arguments_are_refused(args: tuple[str, ...], kwargs: dict[str, Any],
                                   error: type[Exception]) -> None:
    with pytest.raises(error):
        OpenAISource(*args, **kwargs)


def test_a_chat_widget_streams_from_the_server(fake: ServerProcess) -> None:
    w = ChatWidget(OpenAISource("fake-nodone", fake.base_url, x_delay=0.01))
    try:
        r = w.send("hi")
        assert r.wait(10) == EXPECTED
        assert r.status == "done"
        assert r.stats["pieces"] == len(DEFAULT_PIECES)
        assert last_request(fake)["body"]["messages"][-1] == {"role": "user", "content": "hi"}
    finally:
        w.close()


def test_a_chat_widget_keeps_the_partial_text_when_the_server_dies(doomed: ServerProcess
                                                                  ) -> None:
    w = ChatWidget(OpenAISource("fake-die", doomed.base_url, x_die_after=3))
    try:
        r = w.send("hi")
        with pytest.raises(ReplyError):
            r.wait(10)
        assert r.status == "error"
        assert r.text == "".join(DEFAULT_PIECES[:3])
        assert isinstance(r.error, SourceError)
        assert "was lost after 3 pieces" in str(r.error)
    finally:
        w.close()


# ------------------------------------------------------------ transformers serve
@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    """``transformers serve`` on the converted embedded model; (server, model name)."""
    from _servers import start_transformers_serve

    from nbstream.sources.transformers.default_model import default_model_path

    folder = default_model_path()
    log = tmp_path_factory.mktemp("serve") / "transformers-serve.log"
    server = start_transformers_serve(folder, log)
    yield server, str(folder)
    server.stop()


GREEDY: dict[str, Any] = {"temperature": 0, "seed": 0, "max_tokens": 6}


@pytest.fixture(scope="module")
def greedy_answer(serve: tuple[ServerProcess, str]) -> list[str]:
    server, model = serve
    pieces, error, _ = collect(OpenAISource(model, server.base_url, **GREEDY))
    assert error is None, error
    return pieces


@pytest.mark.model
def test_transformers_serve_streams_a_greedy_answer(
        serve: tuple[ServerProcess, str], greedy_answer: list[str]) -> None:
    server, model = serve
    assert 1 <= len(greedy_answer) <= GREEDY["max_tokens"]
    assert "".join(greedy_answer).strip()
    source = OpenAISource(model, server.base_url, **GREEDY)
    again, error, _ = collect(source)
    assert error is None
    assert again == greedy_answer  # greedy: the same pieces every time
    # transformers serve reports its usage in the last chunk
    outcome = source.generate(MSGS, lambda piece: None, threading.Event())
    assert 1 <= outcome.figures["tokens"] <= GREEDY["max_tokens"]


@pytest.mark.model
def test_transformers_serve_in_a_chat_widget(
        serve: tuple[ServerProcess, str], greedy_answer: list[str]) -> None:
    server, model = serve
    source = OpenAISource(model, server.base_url, **GREEDY)
    assert source.label == Path(model).name
    w = ChatWidget(source)
    try:
        r = w.send("hi")
        assert r.wait(120) == "".join(greedy_answer)
        assert r.status == "done"
    finally:
        w.close()


@pytest.mark.model
def test_transformers_serve_rejects_an_unknown_model(serve: tuple[ServerProcess, str]) -> None:
    server, _ = serve
    _, error, _ = collect(OpenAISource("no-such-model", server.base_url))
    assert isinstance(error, SourceError)
    assert error.status_code == 400
    assert "no-such-model" in str(error)


@pytest.mark.model
def test_transformers_serve_cancel_mid_stream(serve: tuple[ServerProcess, str]) -> None:
    server, model = serve
    source = OpenAISource(model, server.base_url, temperature=0, max_tokens=200)
    pieces, error, after = collect(source, cancel_after=2)
    assert isinstance(error, Cancelled)
    assert len(pieces) == 2  # nothing after the stop
    print(f"returned {after * 1000:.0f} ms after the cancel")
    # the server is still fine afterwards
    _, error, _ = collect(OpenAISource(model, server.base_url, temperature=0, max_tokens=1))
    assert error is None


@pytest.mark.model
def test_transformers_serve_killed_mid_stream(tmp_path: Path) -> None:
    """A real server crashing mid-answer: a clear error, the pieces so far kept."""
    from _servers import start_transformers_serve

    from nbstream.sources.transformers.default_model import default_model_path

    folder = default_model_path()
    server = start_transformers_serve(folder, tmp_path / "doomed-serve.log")
    try:
        source = OpenAISource(str(folder), server.base_url, temperature=0, max_tokens=200)
        pieces, error, _ = collect(
            source, on_piece=lambda got: server.kill() if len(got) == 3 else None)
        assert not server.alive()
        assert len(pieces) == 3
        assert isinstance(error, SourceError)
        assert "was lost after 3 pieces" in str(error)
    finally:
        server.stop()


# ---------------------------------------------------------------- one loop for all replies
def test_every_reply_is_read_on_one_shared_loop_thread(fake: ServerProcess) -> None:
    """The requests run on one event loop thread (nbstream-http), the pieces are
    emitted on each reply's own thread."""
    emit_threads: set[str] = set()
    loop_threads: set[str] = set()
    real_events = OpenAISource._events

    async def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        loop_threads.add(threading.current_thread().name)
        async for item in real_events(self, *args, **kwargs):
            yield item

    def reply(i: int, out: list[str]) -> None:
        def emit(piece: Any) -> None:
            emit_threads.add(threading.current_thread().name)
            out.append(str(piece))
        OpenAISource("fake", fake.base_url).generate(MSGS, emit, threading.Event())

    outs: list[list[str]] = [[] for _ in range(4)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(OpenAISource, "_events", spy)
        workers = [threading.Thread(target=reply, args=(i, outs[i]), name=f"reply-{i}")
                   for i in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(30)
    assert ["".join(o) for o in outs] == [EXPECTED] * 4
    assert loop_threads == {"nbstream-http"}
    assert emit_threads == {f"reply-{i}" for i in range(4)}


def test_a_reply_whose_emit_waits_holds_back_only_itself(fake: ServerProcess) -> None:
    """One reply's emit blocks (a Stream.put waiting for the pump): its request stops
    reading once RELAY_HIGH pieces wait for it, another reply on the same loop streams
    to its end meanwhile, and the first then gets every piece, in order."""
    from nbstream.sources import sse

    pieces = [f"p{i} " for i in range(sse.RELAY_HIGH * 4)]
    gate = threading.Event()
    # pieces handed to each relay (a reply's), in the order the relays started: the
    # slow reply's is the first
    puts: dict[int, int] = {}
    real_put = sse._Relay.put

    def counting_put(self: Any, piece: Any) -> None:
        puts[id(self)] = puts.get(id(self), 0) + 1
        real_put(self, piece)

    def relayed() -> int:
        return next(iter(puts.values()), 0)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sse._Relay, "put", counting_put)
        slow_out: list[str] = []
        slow_error: list[BaseException] = []

        def slow() -> None:
            def emit(piece: Any) -> None:
                assert gate.wait(60)
                slow_out.append(str(piece))
            try:
                OpenAISource("fake", fake.base_url, x_pieces=pieces).generate(
                    MSGS, emit, threading.Event())
            except BaseException as exc:  # reported below
                slow_error.append(exc)

        worker = threading.Thread(target=slow, name="slow-reply")
        worker.start()
        wait_until(lambda: relayed() >= sse.RELAY_HIGH, 30, "the slow reply read ahead")
        # meanwhile, another reply streams to its end on the same loop
        fast, error, _ = collect(OpenAISource("fake", fake.base_url, x_pieces=pieces))
        assert error is None and "".join(fast) == "".join(pieces)
        # the slow one stopped reading at the mark: what it read waits, bounded
        assert len(puts) == 2, puts
        assert sse.RELAY_HIGH <= relayed() <= sse.RELAY_HIGH + 1, puts
        gate.set()
        worker.join(60)
    assert not worker.is_alive() and slow_error == []
    assert "".join(slow_out) == "".join(pieces)


def test_an_emit_that_raises_ends_the_request(fake: ServerProcess) -> None:
    """The reply's own emit fails: the error reaches the caller, the request is
    cancelled on the shared loop, and the loop goes on serving other replies."""
    calls = []

    def emit(piece: Any) -> None:
        calls.append(piece)
        if len(calls) == 3:
            raise RuntimeError("the consumer broke")

    slow = OpenAISource("fake", fake.base_url, x_pieces=[f"p{i} " for i in range(200)],
                        x_delay=0.01)
    with pytest.raises(RuntimeError, match="the consumer broke"):
        slow.generate(MSGS, emit, threading.Event())
    assert len(calls) == 3
    pieces, error, _ = collect(OpenAISource("fake", fake.base_url))
    assert error is None and "".join(pieces) == EXPECTED


def test_stops_of_stalled_replies_close_their_own_connections_by_one_timer(
        fake: ServerProcess) -> None:
    """Four replies stalled mid-answer (the server sends nothing more): one timer on
    the shared loop watches all their cancel events (not one each), each Stop closes
    its own connection while no piece arrives and leaves the others open, and no
    timer is left once none is in flight (an idle kernel is not woken)."""
    from nbstream.sources import sse

    loop = sse.shared_loop()

    def on_loop(fn: Callable[[], Any]) -> Any:
        async def call() -> Any:
            return fn()
        return asyncio.run_coroutine_threadsafe(call(), loop).result(10)

    def timers() -> int:  # timers pending on the loop (no request here has a deadline)
        return on_loop(lambda: sum(not h.cancelled() for h in loop._scheduled))  # type: ignore[attr-defined]

    def watching() -> int:
        return int(on_loop(lambda: sse._CancelWatch.of(loop).watching))

    def seen(tag: int) -> dict[str, Any] | None:
        return next((r for r in fake.requests() if r["body"].get("x_tag") == tag), None)

    wait_until(lambda: watching() == 0, 30, "earlier requests to end")
    run = f"{time.monotonic_ns()}-"
    cancels = [threading.Event() for _ in range(4)]
    errors: dict[int, BaseException | None] = {}
    pieces: dict[int, list[str]] = {i: [] for i in range(4)}

    def reply(i: int) -> None:
        try:
            OpenAISource("fake-stall", fake.base_url, timeout=None, x_tag=run + str(i)
                         ).generate(MSGS, pieces[i].append, cancels[i])
            errors[i] = None
        except BaseException as exc:  # checked below
            errors[i] = exc

    workers = [threading.Thread(target=reply, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    try:
        wait_until(lambda: all((r := seen(run + str(i))) is not None and r["stalled"]
                               and len(pieces[i]) == 2 for i in range(4)), 30,
                   "the four replies to stall")
        assert watching() == 4
        assert timers() == 1  # one watcher for the four, not a timer each
        order = [2, 0, 3, 1]
        for n, i in enumerate(order):
            cancels[i].set()
            workers[i].join(30)
            assert not workers[i].is_alive()
            assert isinstance(errors[i], Cancelled), errors[i]
            wait_until(lambda i=i: seen(run + str(i))["disconnected"], 30,  # type: ignore[index]
                       "the server to see the stopped reply go")
            for j in order[n + 1:]:  # the others stay connected, still watched
                assert workers[j].is_alive() and not seen(run + str(j))["disconnected"]  # type: ignore[index]
            assert watching() == len(order) - n - 1
        assert timers() == 0  # nothing in flight: the watcher's timer is gone
        assert all(pieces[i] == DEFAULT_PIECES[:2] for i in range(4))
    finally:
        for c in cancels:
            c.set()
        for w in workers:
            w.join(30)


class _Body:
    """What checked_text reads of a response: its body in the given parts."""

    def __init__(self, parts: list[bytes]) -> None:
        self._parts = parts

    async def aiter_bytes(self) -> Any:
        for p in self._parts:
            yield p


@pytest.mark.parametrize("body", [b"data: ab\xe2\x82\xe2\n\n", b"data: \xf0\x9f\x98\x80 x\xff\n\n",
                                  b"ok \xe4\xb8\xad\xe6\x96\x87 \xe4\xb8\x41 more"])
def test_invalid_utf8_is_named_at_its_byte_however_the_body_is_cut(body: bytes) -> None:
    from nbstream.sources.sse import BadStream, checked_text
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        expected = exc.start  # where a decoder of the whole body says it goes wrong
    else:  # pragma: no cover - the bodies above are all invalid
        raise AssertionError("valid body")

    async def read(parts: list[bytes]) -> str:
        return "".join([t async for t in checked_text(_Body(parts))])  # type: ignore[arg-type]

    for cut in range(1, len(body)):  # every place the body may be cut in two
        with pytest.raises(BadStream, match=rf"not valid UTF-8 \(byte {expected}\)"):
            asyncio.run(read([body[:cut], body[cut:]]))
    with pytest.raises(BadStream, match=rf"not valid UTF-8 \(byte {expected}\)"):
        asyncio.run(read([body[i:i + 1] for i in range(len(body))]))  # a byte at a time


@pytest.mark.parametrize("body", [b"ab\ncdefgh\r\nij\rklmnopqr\n\nst", b"abcdefghi\nx",
                                  b"x\r\n" * 5 + b"abcdefgh", b"abcdefgh\r\nabcdefgh\rabcdefgh\n",
                                  b"a\r\r\nabcdefghi"])
def test_a_line_over_the_limit_is_caught_however_the_body_is_cut(body: bytes) -> None:
    """A line of ``max_line`` bytes passes and one byte more is an error, wherever the
    parts are cut (checked_text skips the line split for a part that cannot make a
    line too long: the two paths must agree)."""
    import re

    from nbstream.sources.sse import BadStream, checked_text

    max_line = 8
    too_long = any(len(line) > max_line for line in re.split(rb"\r\n|\r|\n", body))

    async def read(parts: list[bytes]) -> str:
        return "".join([t async for t in checked_text(_Body(parts), max_line)])  # type: ignore[arg-type]

    cuts = [[body[:i], body[i:]] for i in range(1, len(body))]
    cuts += [[body[:i], body[i:j], body[j:]] for i in range(1, len(body)) for j in range(i + 1, len(body))]
    cuts.append([body[i:i + 1] for i in range(len(body))])
    for parts in cuts:
        if too_long:
            with pytest.raises(BadStream, match="a line longer than 8 bytes"):
                asyncio.run(read(parts))
        else:
            assert asyncio.run(read(parts)) == body.decode(), parts
