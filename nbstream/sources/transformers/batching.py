"""Several replies of one local model at once: transformers' continuous batching.

An :class:`Engine` belongs to one loaded model (every
:class:`~nbstream.sources.TransformersSource` built on that model shares it). A
reply hands the engine its prompt's token ids and reads its own new tokens back;
transformers' ``ContinuousBatchingManager`` computes one step for every running
reply at a time, takes a new reply into the batch at the next step and drops a
stopped one at the next step (its cache pages freed). A batched ``generate()``
was measured too and not chosen (``benchmarks/README.md``): its batch is fixed
when it starts, so a reply asked while another streams would still wait for it
to end, which is what this module removes.

What one batch mixes: each reply has its own ``max_new_tokens``, end-of-turn
ids and stop strings (checked by the reply's own thread). transformers picks
greedy decoding or sampling per manager: an engine runs a *greedy* manager
(argmax, nothing else per step) while every reply is greedy, and a *mixed* one
(sampling with per-request ``temperature``, ``top_k``, ``top_p``; a greedy
reply in it samples with ``top_k=1``, which is its argmax) once a sampled reply
joins. That switch happens at once: the greedy manager is stopped and its
replies go on in the mixed one from the tokens they have (their prompt and
answer so far are computed again in one prefill). Which models are batched at all
is :func:`nbstream.sources.transformers.devices.select_batching` and
:func:`model_facts`; which generation settings, :func:`refusal`.

One thread computes with a model at a time
------------------------------------------
transformers (5.24) is not safe for two threads running one model's forward at
once: ``merge_with_config_defaults`` writes ``config.is_causal`` for the length
of each forward and puts back what it found, so two overlapping forwards can
leave it ``False`` for good (every later prompt then attends to its future).
So per model: one manager at a time (the greedy one is stopped before the mixed
one starts), and a :class:`Gate` between batched replies (which share it) and
replies that run ``generate()`` on their own (one at a time, with the engine's
manager paused), first come first served. A user's own ``model.generate`` in a
cell while replies stream on the same model object is not covered.

Threads and owners
------------------
* **Reply workers** (the model lane's threads, one per running reply, at most the
  lane's limit) each call :meth:`Engine.run`: it queues the reply's request,
  then waits on that request's :class:`_Mailbox`, hands each new token to the
  reply's ``on_tokens`` (the source's streamer: detokenizer, ``emit``; so the
  text is made on the reply's own thread, as with ``generate()``), looks at
  ``cancel`` after each step and cancels its request when it ends early. A
  :class:`_Request` is its worker's, but for its mailbox and the tokens its
  router notes.
* **The step thread**: the running manager's background thread (transformers'
  own) schedules and computes the steps. nbstream calls only the manager's
  thread-safe entry points (``add_request``, ``cancel_request``, ``get_result``,
  ``pause``, ``stop``).
* **Router threads** (``nbstream-batch-router``, one per running manager): the
  only reader of the manager's results. Each result goes to its request's
  mailbox, replacing the one before (a reader that falls behind gets the
  latest, which holds every token so far: nothing queues up). It starts its
  manager (so that the step thread is a daemon, as its starter is). When the
  step thread dies, the router fails every open request of that manager with
  :class:`BatchError`, and the next reply starts a new manager. When no request
  has been open for :data:`IDLE_SECONDS`, it stops the manager (which frees its
  paged cache) and ends.
* :class:`Engine` state (the running manager and its open requests) is guarded
  by ``Engine._lock``; a mailbox by its own condition (its router writes, its
  worker reads); the :class:`Gate` by its own.

Side effect worth knowing: each manager start reseeds torch's global random
generator (transformers' continuous batching seeds its sampling that way).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .devices import Batching

log = logging.getLogger("nbstream.sources.transformers.batching")

__all__ = ["IDLE_SECONDS", "BatchError", "Engine", "Gate", "Settings", "inputs_refusal",
           "model_facts", "named_refusal", "plan_for", "refusal", "settings_for"]

#: how long a manager with no open request keeps running (and holding its paged cache)
#: before it stops; the next reply after that starts a new one
IDLE_SECONDS = 30.0

#: how often a waiting reply looks at its ``cancel`` event when no token arrives
#: (a step normally wakes it first)
POLL_SECONDS = 0.05

#: reuse of cached prompt pages between requests (transformers' prefix sharing)
BLOCK_SHARING = True

Mode = Literal["greedy", "mixed"]

#: the ``generate()`` settings a batched reply takes (each reply its own values); any
#: other one set to something but its default makes the reply run on its own
#: (:func:`refusal`)
BATCHED_SETTINGS = frozenset({
    "do_sample", "temperature", "top_k", "top_p", "max_new_tokens", "max_length",
    "eos_token_id", "pad_token_id", "bos_token_id", "stop_strings", "use_cache",
})

# generate() arguments that are not generation-config fields, and whether a batch takes them
_GENERATE_ARGUMENTS = {"tokenizer": True, "stopping_criteria": False, "logits_processor": False,
                       "prefix_allowed_tokens_fn": False, "assistant_model": False,
                       "negative_prompt_ids": False, "negative_prompt_attention_mask": False,
                       "synced_gpus": False, "custom_generate": False,
                       "assistant_tokenizer": False, "generation_config": False}


class BatchError(RuntimeError):
    """A batched reply failed: its request (the others go on), or the engine's step
    thread (every reply it was running; the next reply starts a new one)."""


@dataclass(frozen=True)
class Settings:
    """One reply's request to the engine."""

    max_new_tokens: int
    eos_token_ids: tuple[int, ...]
    sample: bool = False
    temperature: float = 1.0
    top_k: int = 0  # 0: no top-k
    top_p: float = 1.0

    @property
    def mode(self) -> Mode:
        """The manager this reply needs: a greedy reply fits both."""
        return "mixed" if self.sample else "greedy"


def refusal(config: Any, kwargs: dict[str, Any]) -> str | None:
    """Why a reply with these ``generate()`` keyword arguments (over the model's
    ``GenerationConfig`` ``config``) cannot join a batch, or None if it can.

    A batch applies temperature, top-k and top-p per reply, stops at each
    reply's end-of-turn ids, ``max_new_tokens`` and stop strings; anything else
    (repetition penalty, a minimum length, beams, a logits processor or stopping
    criterion of one's own, assisted decoding...) runs the reply on its own.
    """
    for key, batchable in _GENERATE_ARGUMENTS.items():
        value = kwargs.get(key)
        if value is not None and not batchable and value != []:
            return f"{key}= is not applied to batched replies"
    merged = config_for(config, kwargs)
    changed = merged.to_diff_dict()
    defaults = _reference_config(merged)
    for key in sorted(changed):
        if key in BATCHED_SETTINGS or key.startswith("_") or key == "transformers_version":
            continue
        if _same(getattr(defaults, key, None), changed[key]):
            continue
        return f"{key}={changed[key]!r} is not applied to batched replies"
    if merged.max_new_tokens is None:
        return "max_new_tokens is not set (batched replies need a token limit)"
    return None


#: generate()'s own defaults for the settings a batch does not apply (a setting equal
#: to its default changes nothing)
_NEUTRAL: dict[str, Any] = {
    "repetition_penalty": 1.0, "min_new_tokens": 0, "min_length": 0,
    "no_repeat_ngram_size": 0, "num_beams": 1, "num_return_sequences": 1, "typical_p": 1.0,
    "min_p": None, "prompt_lookup_num_tokens": None, "assistant_model": None,
    "stopping_criteria": None, "logits_processor": None,
}


#: model inputs a batched request carries: its token ids (the engine makes its own
#: positions and masks from them; ``token_type_ids`` that are all 0 change nothing either)
BATCHED_INPUTS = frozenset({"input_ids", "attention_mask"})


def inputs_refusal(inputs: Any) -> str | None:
    """Why a reply whose model ``inputs`` (the prompt's tensors, as ``generate()``
    takes them) cannot join a batch, or None if it can: transformers' continuous
    batching takes a request's token ids only, so a vision model's image tensors
    (``pixel_values``...) or any other model input keep the reply on its own."""
    others = sorted(str(key) for key, value in inputs.items() if key not in BATCHED_INPUTS
                    and not (key == "token_type_ids" and not bool(value.any())))
    if others:
        return (f"a reply with {', '.join(others)} takes turns (continuous batching takes "
                "token ids only)")
    return None


def named_refusal(kwargs: dict[str, Any]) -> str | None:
    """:func:`refusal` from the names and values alone (no transformers import, no
    model: what is known before loading; :func:`refusal` looks at the model's own
    generation config too)."""
    for key in sorted(kwargs):
        value = kwargs[key]
        if key in BATCHED_SETTINGS or key == "tokenizer":
            continue
        if key in _NEUTRAL and (value == _NEUTRAL[key] or value in (None, [], ())):
            continue
        return f"{key}= is not applied to batched replies"
    return None


def _same(default: Any, value: Any) -> bool:
    return bool(default == value) or (default in (None, 0, 1.0, False) and value in (None, False))


def _reference_config(merged: Any) -> Any:
    """What ``generate()`` would use for every field a batch does not look at: its
    global defaults (a field equal to them changes nothing)."""
    from transformers import GenerationConfig as _GenerationConfig

    GenerationConfig: Any = _GenerationConfig  # untyped upstream
    reference = GenerationConfig()
    for key, value in GenerationConfig._get_default_generation_params().items():
        if hasattr(reference, key):
            setattr(reference, key, value)
    return reference


def config_for(config: Any, kwargs: dict[str, Any]) -> Any:
    """The model's ``GenerationConfig`` ``config`` updated with ``kwargs`` (a copy)."""
    import copy

    from transformers import GenerationConfig as _GenerationConfig

    GenerationConfig: Any = _GenerationConfig  # untyped upstream
    merged = copy.deepcopy(config) if config is not None else GenerationConfig()
    fields = {k: v for k, v in kwargs.items() if k not in _GENERATE_ARGUMENTS}
    merged.update(**fields)
    return merged


def settings_for(config: Any, kwargs: dict[str, Any], prompt_tokens: int) -> Settings:
    """A reply's :class:`Settings` from the model's ``GenerationConfig`` and the
    ``generate()`` keyword arguments (check :func:`refusal` first)."""
    merged = config_for(config, kwargs)
    max_new = merged.max_new_tokens
    if max_new is None:  # refusal() sends these elsewhere; max_length as generate() reads it
        max_new = max(1, int(merged.max_length or 20) - prompt_tokens)
    eos = merged.eos_token_id
    eos_ids = tuple(int(i) for i in (eos if isinstance(eos, (list, tuple)) else [eos])
                    if i is not None and int(i) >= 0)
    if not merged.do_sample:
        return Settings(int(max_new), eos_ids)
    defaults = GENERATE_SAMPLING_DEFAULTS
    temperature = merged.temperature if merged.temperature is not None else defaults["temperature"]
    top_k = merged.top_k if merged.top_k is not None else defaults["top_k"]
    top_p = merged.top_p if merged.top_p is not None else defaults["top_p"]
    return Settings(int(max_new), eos_ids, sample=True, temperature=float(temperature),
                    top_k=int(top_k or 0), top_p=float(top_p))


#: what ``generate()`` samples with where neither the model nor the call says
GENERATE_SAMPLING_DEFAULTS: dict[str, Any] = {"temperature": 1.0, "top_k": 50, "top_p": 1.0}


@dataclass(frozen=True)
class _Progress:
    """What a request has so far: every token of its answer, and whether it is over."""

    tokens: list[int]
    finished: bool
    error: str | None = None


class _Mailbox:
    """The latest progress of one request (its router writes, its worker reads)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._latest: _Progress | None = None
        self._failure: BaseException | None = None

    def put(self, progress: _Progress) -> None:
        with self._cond:
            self._latest = progress
            self._cond.notify()

    def fail(self, error: BaseException) -> None:
        with self._cond:
            self._failure = error
            self._cond.notify()

    def take(self, timeout: float) -> tuple[_Progress | None, BaseException | None]:
        with self._cond:
            self._cond.wait_for(lambda: self._latest is not None or self._failure is not None,
                                timeout)
            latest, self._latest = self._latest, None
            return latest, self._failure


class _Request:
    """One reply's request; its id and manager change when it moves to a mixed manager
    (``carried``: the answer's tokens it took along, computed again as prompt there)."""

    def __init__(self, prompt: list[int], settings: Settings) -> None:
        self.prompt = prompt
        self.settings = settings
        self.mailbox = _Mailbox()
        self.id = ""
        self.run: _Run | None = None
        self.carried: list[int] = []
        self.tokens: list[int] = []  # as routed so far (carried included)


class _Run:
    """One manager and its open requests (under Engine._lock)."""

    def __init__(self, mode: Mode, manager: Any) -> None:
        self.mode = mode
        self.manager = manager
        self.requests: dict[str, _Request] = {}
        self.idle_since = time.monotonic()
        self.stopping = False
        self.failure: BaseException | None = None
        self.delivered = False  # a result came: the manager has run a step
        self.started = False  # its router started it (under Engine._lock)


_ids = itertools.count(1)


class Engine:
    """Runs the replies of one model together (see the module docstring)."""

    def __init__(self, model: Any, plan: Batching, concurrency: int, gate: Gate,
                 label: str = "") -> None:
        if not plan.enabled:
            raise ValueError(f"batching is off for this model: {plan.reason}")
        self._model = model
        self.plan = plan
        self.concurrency = concurrency
        self.gate = gate
        self.label = label
        self._lock = threading.Lock()
        self._run: _Run | None = None
        #: managers started so far, and of them mixed ones (tests, benchmarks)
        self.starts = 0
        self.mixed_starts = 0
        #: why batching does not work on this model after all (a manager died before
        #: its first step, or could not be made); replies then run on their own
        self.broken: str | None = None

    # -- the reply's side (its worker thread) -----------------------------------

    def capacity(self) -> int:
        """Tokens (prompt and answer) one reply may use at most: the whole cache."""
        return self.plan.cache_tokens(self.concurrency)

    def run(self, prompt: Sequence[int], settings: Settings, cancel: threading.Event,
            on_tokens: Callable[[list[int]], bool], carried: Sequence[int] = ()) -> bool:
        """Generate the reply to ``prompt`` in the batch: ``on_tokens(new_ids)`` gets
        each step's new tokens, in order, on the calling thread, and returns True to
        end the reply there (a stop string). Returns True when the reply ended by
        itself (end of turn, ``max_new_tokens``, ``on_tokens``), False once ``cancel``
        was set (its request is dropped at the next step; nothing more is handed
        over). Raises :class:`BatchError` when the request or the engine failed;
        what ``on_tokens`` raises propagates (the request is dropped). Waits first,
        first come first served, while a reply that is not batched has the model.
        ``carried``: the answer's tokens so far, made elsewhere (the reply ran alone
        until another came): computed again with the prompt, not handed over again."""
        if cancel.is_set():
            return False
        ticket = self.gate.enter("batch", cancel)
        if ticket is None:
            return False
        request = _Request(list(prompt), settings)
        request.carried = list(carried)
        request.tokens = list(carried)
        ended = finished = False  # ended: the reply is over; finished: its request too
        try:
            self._submit(request)
            seen = len(request.carried)
            while not cancel.is_set():
                progress, failure = request.mailbox.take(POLL_SECONDS)
                if failure is not None:
                    raise failure
                if progress is None:
                    continue
                if progress.error is not None:
                    finished = True
                    raise BatchError(f"batched generation failed: {progress.error}")
                finished = progress.finished
                if len(progress.tokens) > seen:
                    new = progress.tokens[seen:]
                    seen = len(progress.tokens)
                    if on_tokens(new):
                        ended = True
                        break
                if finished:
                    ended = True
                    break
            return ended
        finally:
            try:
                self._close(request, finished)
            finally:
                self.gate.leave(ticket)

    def _submit(self, request: _Request) -> None:
        with self._lock:
            for _attempt in range(2):
                run = self._run
                if run is not None and (run.stopping or run.failure is not None):
                    run = None
                if run is not None and run.mode == "greedy" and request.settings.sample:
                    run = self._go_mixed(run)
                if run is None:
                    run = self._start(request.settings.mode)
                if self._add(run, request):
                    return
                # the manager refused (it is stopping, or its step thread died): a new one
                run.failure = run.failure or BatchError("the batching engine stopped")
                if self._run is run:
                    self._run = None
        raise BatchError("the batching engine refused the request twice")

    def _add(self, run: _Run, request: _Request) -> bool:
        # caller holds self._lock; hands request (with what it carries) to run's manager
        settings = request.settings
        kwargs: dict[str, Any] = {}
        if run.mode == "mixed":
            if settings.sample:
                kwargs = {"temperature": float(settings.temperature),
                          "top_k": int(settings.top_k) if settings.top_k > 0
                          else self._vocab_size(),
                          "top_p": float(settings.top_p)}
            else:  # greedy among sampled replies: only the most likely token is left
                kwargs = {"temperature": 1.0, "top_k": 1, "top_p": 1.0}
        request.id = f"nbstream-{next(_ids)}"
        request.run = run
        run.requests[request.id] = request
        got = run.manager.add_request(
            request.prompt + request.carried, request_id=request.id,
            max_new_tokens=settings.max_new_tokens - len(request.carried), streaming=True,
            eos_token_id=list(settings.eos_token_ids), **kwargs)
        if got is None:
            del run.requests[request.id]
            return False
        return True

    def _go_mixed(self, greedy: _Run) -> _Run:
        """Stop the greedy manager ``greedy`` and start a mixed one that goes on with
        its open requests (caller holds self._lock)."""
        moving = list(greedy.requests.values())
        greedy.stopping = True
        greedy.requests.clear()
        self._run = None
        self._stop(greedy)  # its step is over before the mixed one's first
        mixed = self._start("mixed")
        for request in moving:
            request.carried = list(request.tokens)
            if not self._add(mixed, request):
                request.mailbox.fail(BatchError("the batching engine stopped"))
        log.debug("batching engine for %s: %d replies moved to a mixed manager", self.label,
                  len(moving))
        return mixed

    def _close(self, request: _Request, finished: bool) -> None:
        with self._lock:
            run = request.run
            if run is None or run.requests.pop(request.id, None) is None:
                return
            if not run.requests:
                run.idle_since = time.monotonic()
            if finished or run.failure is not None:
                return
            manager = run.manager
        manager.cancel_request(request.id)

    def _vocab_size(self) -> int:
        config = self._model.config.get_text_config()
        return int(config.vocab_size)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """While in this block, the engine's manager (if one runs) computes no step;
        for a reply that uses the model on its own (it holds the :class:`Gate`)."""
        with self._lock:
            run = self._run
        manager = run.manager if run is not None else None
        if manager is None or not manager.is_running():
            yield
            return
        try:
            pause = manager.pause()
            pause.__enter__()
        except RuntimeError:  # it stopped meanwhile: nothing to pause
            yield
            return
        try:
            yield
        finally:
            pause.__exit__(None, None, None)

    # -- managers ---------------------------------------------------------------

    def _start(self, mode: Mode) -> _Run:
        # caller holds self._lock
        import torch
        from transformers import GenerationConfig as _GenerationConfig
        from transformers.generation.configuration_utils import ContinuousBatchingConfig

        GenerationConfig: Any = _GenerationConfig  # untyped upstream
        model = self._model
        plan = self.plan
        pad = getattr(model.generation_config, "pad_token_id", None)
        eos = getattr(model.generation_config, "eos_token_id", None)
        if mode == "greedy":
            generation = GenerationConfig(do_sample=False, eos_token_id=eos, pad_token_id=pad)
        else:
            # placeholders that make transformers build the three processors; every
            # request brings its own values (temperature, top_k, top_p)
            generation = GenerationConfig(do_sample=True, temperature=0.5, top_k=50, top_p=0.5,
                                          eos_token_id=eos, pad_token_id=pad)
        cache_tokens = plan.cache_tokens(self.concurrency)
        config = ContinuousBatchingConfig(
            page_size=plan.page_size,
            num_blocks=max(2, math.ceil(cache_tokens / plan.page_size)),
            max_batch_tokens=plan.step_tokens,
            max_requests_per_batch=max(1, self.concurrency),
            allow_block_sharing=BLOCK_SHARING,
            auto_switch_to_flash=False,  # the attention nbstream chose stays the model's
            per_request_processors=mode == "mixed",
        )
        try:
            with torch.inference_mode():
                manager = model.init_continuous_batching(generation_config=generation,
                                                         continuous_batching_config=config)
        except Exception as exc:
            self.broken = f"continuous batching could not start: {type(exc).__name__}: {exc}"
            raise BatchError(self.broken) from exc
        self.starts += 1
        self.mixed_starts += mode == "mixed"
        run = _Run(mode, manager)
        self._run = run
        # the router starts the manager: a thread inherits daemon from the one that
        # starts it, and a step thread that is not a daemon would keep the process alive
        threading.Thread(target=self._route, args=(run,), daemon=True,
                         name=f"nbstream-batch-router-{self.label:.30}-{mode}").start()
        log.debug("batching engine for %s: %s manager started (%d tokens of cache)",
                  self.label, mode, cache_tokens)
        return run

    def _route(self, run: _Run) -> None:
        """The router thread of ``run``'s manager (see the module docstring)."""
        import torch

        manager = run.manager
        with self._lock:  # so that a stop (which takes the lock) finds it started, or not at all
            if run.stopping:
                return
            try:
                with torch.inference_mode():  # the step thread runs in its starter's mode
                    manager.start()
            except Exception as exc:
                self.broken = f"continuous batching could not start: {type(exc).__name__}: {exc}"
                error = BatchError(self.broken)
                error.__cause__ = exc
                self._fail_requests(run, error)
                return
            run.started = True
        while True:
            output = manager.get_result(timeout=0.1)
            if output is not None:
                self._deliver(run, output)
                continue
            stop = False
            with self._lock:
                if run.stopping:  # stopped by _go_mixed or close(), which join it
                    return
                if not manager.is_running():
                    self._fail(run)
                    return
                if not run.requests and time.monotonic() - run.idle_since >= IDLE_SECONDS:
                    run.stopping = stop = True
                    if self._run is run:
                        self._run = None
            if stop:
                self._stop(run)
                log.debug("batching engine for %s: %s manager stopped (idle)", self.label,
                          run.mode)
                return

    def _deliver(self, run: _Run, output: Any) -> None:
        error = getattr(output, "error", None)
        with self._lock:
            if error is None:
                run.delivered = True  # a step went through
            request = run.requests.get(output.request_id)
            if request is None:  # closed, or moved to another manager
                return
            request.tokens = request.carried + list(output.generated_tokens)
            progress = _Progress(request.tokens, bool(output.is_finished()),
                                 None if error is None else str(error))
        request.mailbox.put(progress)

    def _fail(self, run: _Run) -> None:
        # caller holds self._lock; the step thread of run's manager is gone
        status = getattr(run.manager, "background_thread_status", None)
        cause = getattr(status, "fatal_error", None)
        error = BatchError(f"the batching engine of {self.label or 'the model'} failed"
                           + (f": {type(cause).__name__}: {cause}" if cause else "")
                           + "; the next reply starts it again")
        if isinstance(cause, BaseException):
            error.__cause__ = cause
        if not run.delivered:
            self.broken = f"continuous batching failed on its first step: {error}"
        self._fail_requests(run, error)
        log.warning("%s", error)

    def _fail_requests(self, run: _Run, error: BaseException) -> None:
        # caller holds self._lock
        run.failure = error
        for request in run.requests.values():
            request.mailbox.fail(error)
        if self._run is run:
            self._run = None

    # -- inspection and shutdown -------------------------------------------------

    def running(self) -> dict[str, int]:
        """Open requests of the running manager by its mode (``{"greedy": 2}``), or {}."""
        with self._lock:
            run = self._run
            return {run.mode: len(run.requests)} if run is not None else {}

    def close(self, timeout: float = 30) -> None:
        """Stop the manager now (its open replies fail); the engine can start again."""
        with self._lock:
            run = self._run
            self._run = None
            if run is None:
                return
            run.stopping = True
            self._fail_requests(run, run.failure or BatchError("the batching engine was closed"))
        self._stop(run, hard=True, timeout=timeout)

    def _stop(self, run: _Run, hard: bool = False, timeout: float = 60) -> None:
        """Stop ``run``'s manager and wait for its step thread (any thread; ``run.stopping``
        is set, so a router that has not started it yet never will)."""
        if not run.started:
            return
        try:
            run.manager.stop(block=True, timeout=timeout, hard_stop=hard)
        except Exception:  # a manager that cannot stop cleanly is dropped all the same
            log.warning("batching engine for %s: the %s manager did not stop cleanly",
                        self.label, run.mode, exc_info=True)


def model_facts(model: Any) -> tuple[str, str, str | None, str | None]:
    """``(device, attention, quantization, refusal)`` of a loaded ``model``: what
    :func:`~nbstream.sources.transformers.devices.select_batching` decides on,
    and a reason the model itself cannot be batched (or None)."""
    device = str(getattr(model, "device", "cpu"))
    config = getattr(model, "config", None)
    attention = str(getattr(config, "_attn_implementation", None) or "eager")
    quantization: str | None = None
    qconfig = getattr(config, "quantization_config", None)
    method = (qconfig.get("quant_method") if isinstance(qconfig, dict)
              else getattr(qconfig, "quant_method", None))
    method = getattr(method, "value", method)
    if method is not None and str(method) != "gguf":  # a GGUF model is dequantized on load
        quantization = str(method)
    refused: str | None = None
    device_map = getattr(model, "hf_device_map", None)
    if isinstance(device_map, dict) and len({str(d) for d in device_map.values()}) > 1:
        refused = "a model split over several devices takes turns"
    elif getattr(config, "is_encoder_decoder", False):
        refused = "an encoder-decoder model takes turns"
    elif not callable(getattr(model, "init_continuous_batching", None)):
        refused = f"{type(model).__name__} has no continuous batching (transformers too old?)"
    else:
        compatible = getattr(model, "is_backend_compatible", None)
        if callable(compatible) and not compatible():
            refused = (f"{type(model).__name__} does not use transformers' attention interface "
                       "(continuous batching needs it): replies take turns")
    return device, attention, quantization, refused


def plan_for(model: Any, concurrency: int) -> Batching:
    """Whether ``model`` runs ``concurrency`` replies together (and the sizes)."""
    from .devices import select_batching

    if concurrency <= 1:
        return Batching(False, "concurrency=1: one reply at a time")
    device, attention, quantization, refused = model_facts(model)
    if refused is not None:
        return Batching(False, refused)
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") \
        else model.config
    return select_batching(device, attention, quantization, concurrency,
                           max_positions=getattr(config, "max_position_embeddings", None))




Kind = Literal["batch", "solo"]


class Gate:
    """Who computes with one model now: any number of batched replies together, or
    one reply on its own (``generate()``), first come first served between them (a
    batched reply that comes after a waiting one-on-its-own reply waits behind it).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[tuple[Kind, object]] = []  # waiting, in order
        self._inside: Kind | None = None
        self._count = 0  # holders inside
        self._movable: threading.Event | None = None  # the alone reply's "move" signal

    def try_alone(self, move: threading.Event) -> object | None:
        """Enter at once as a batchable reply running on its own, if nobody holds or
        waits for the model; a batched reply that comes later sets ``move``, and the
        holder should then leave and :meth:`enter` as ``"batch"`` (its answer goes on
        in the batch). None if the model is not free."""
        ticket = ("solo", object())
        with self._cond:
            if self._count or self._queue:
                return None
            self._inside = "solo"
            self._count = 1
            self._movable = move
        return ticket

    def enter(self, kind: Kind, cancel: threading.Event) -> object | None:
        """Wait for ``kind``'s turn; a ticket for :meth:`leave`, or None when
        ``cancel`` was set first (the caller then has no turn). A batched reply
        asks a batchable reply that runs alone to move into the batch."""
        ticket = (kind, object())
        with self._cond:
            self._queue.append(ticket)
            if kind == "batch" and self._movable is not None:
                self._movable.set()
            while not self._may_enter(ticket):
                if cancel.is_set():
                    self._queue.remove(ticket)
                    self._cond.notify_all()
                    return None
                self._cond.wait(POLL_SECONDS)
            self._queue.remove(ticket)
            self._inside = kind
            self._count += 1
            self._cond.notify_all()  # the batched replies queued behind this one may follow
        return ticket

    def _may_enter(self, ticket: tuple[Kind, object]) -> bool:
        # caller holds the condition
        kind = ticket[0]
        ahead = self._queue[:self._queue.index(ticket)]
        if kind == "solo":
            return self._count == 0 and not ahead
        return (self._count == 0 or self._inside == "batch") and all(
            k == "batch" for k, _ in ahead)

    def leave(self, ticket: object) -> None:
        with self._cond:
            self._count -= 1
            if self._count == 0:
                self._inside = None
                self._movable = None
            self._cond.notify_all()

    def state(self) -> tuple[str | None, int, int]:
        """``(kind inside, holders, waiting)`` (tests)."""
        with self._cond:
            return self._inside, self._count, len(self._queue)
