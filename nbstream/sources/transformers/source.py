"""Local generation with transformers: a model on this machine's CPU or GPU.

Owns loading a model (lazily, in :meth:`TransformersSource.prepare`) and
running ``model.generate`` for one reply at a time. Both run on the source's
worker thread, the thread that calls :meth:`~TransformersSource.generate`:
there is no extra generation thread and no queue. ``generate`` hands
transformers a streamer whose ``put()`` (called by ``model.generate`` between
two decoding steps, on the same thread) turns the new token id into text with
:class:`~nbstream.sources.transformers.detok.IncrementalDecoder` and calls ``emit(piece)``; and a
``StoppingCriteria`` that ends generation at the next step once ``cancel`` is
set. ``emit`` may block (backpressure) and raise :class:`Cancelled`; both
pass straight through ``model.generate``.

While it loads, ``prepare`` reports what it does (:mod:`nbstream.core.loading`):
"preparing the model (first run, once)" with the fraction of tensors done
while the embedded model is converted, then "loading model" (and "warming up
the model" with ``warmup``); the view shows it on the reply's status line.

``generate`` returns an :class:`~nbstream.core.pieces.Outcome`: ``finish_reason``
``"length"`` when the reply reached ``max_new_tokens`` without ending its turn,
``"stop"`` otherwise; usage (prompt and completion tokens) and figures
(``tokens``, ``seconds``, ``first_token_seconds``, ``tokens_per_second``).
:attr:`~TransformersSource.last_token_ids` (the ids of the latest reply, for
tests and benchmarks) is written by ``generate``.

Thinking models: when the chat template uses ``<think>`` tags (or with
``think_tags=True``), the text goes through the shared splitter
(:mod:`nbstream.sources.think`), which turns the inside of the block into
:class:`~nbstream.core.pieces.Reasoning` pieces; when the prompt ends with an open
``<think>`` (the template opened the block), the output starts inside it.

Tools (see :mod:`nbstream.sources.transformers.toolcalls`): a reply's tools go
into the chat template, and the calls the model writes (``<tool_call>`` tags,
Mistral's ``[TOOL_CALLS]``, Llama 3's JSON, or the tokenizer's response
template) become :class:`~nbstream.core.pieces.ToolCallDelta` pieces as it
writes them; a reply that calls tools ends with ``"tool_calls"``. A template
that cannot take tools is refused (:attr:`~TransformersSource.supports_tools`).

Vision models (#21): with a processor (``processor=``, or a model folder that
has one), the source reads images: a user turn's image attachments go through
the processor's chat template (:mod:`nbstream.sources.transformers.vision`).
Without one, it takes text only: text attachments go into the prompt
(:func:`~nbstream.sources.content_parts.user_text`), an image is refused with a
clear error (:attr:`TransformersSource.accepts`) before the question is asked.

Loaded models are shared: sources built with the same model arguments get
the same model object (held while any of them lives) and the same
:meth:`~TransformersSource.lane_key`, so their replies share one lane.

Several replies at once: with ``concurrency`` above 1 (the default where the
model allows it, :data:`DEFAULT_CONCURRENCY`), the lane runs that many replies'
workers and each hands its prompt to the model's batching engine
(:mod:`nbstream.sources.transformers.batching`, transformers' continuous
batching), which computes one step for all of them at a time on its own
thread; the worker still turns its tokens into text and emits them. Replies
the engine does not take (see :attr:`TransformersSource.batching`) run
``model.generate`` on their worker as before, one at a time per model, in the
order they asked.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from ... import extras
from ...core.attachment import RASTER_TYPES, TEXT_ONLY
from ...core.loading import report_loading
from ...core.pieces import FinishReason, Outcome
from ..base import ChatMessage, Emit, Source, ToolSchema
from ..content_parts import user_text
from ..think import CLOSE, OPEN, ThinkSplitter, ThinkTags, check_think_options, splitting
from ..toolcalls import CallIds, check_tool_request, template_messages
from . import batching as _batch
from . import devices, openmp, vision
from .arguments import check_generate_kwargs
from .detok import IncrementalDecoder
from .toolcalls import TOOL_CALL_FORMATS, ToolCallFormat, ToolReply, tool_support

if TYPE_CHECKING:
    from ...generation import GenerationOptions

__all__ = ["TransformersSource"]

DEFAULT_LABEL = "SmolLM2-135M-Instruct"

#: replies of one model that run together when ``concurrency`` is not given (where
#: the model and device are batched; elsewhere 1)
DEFAULT_CONCURRENCY = 4

#: why a vision model (one with a processor) is not batched, even for replies without
#: images: transformers' continuous batching feeds token ids and 1-D positions only, while
#: such models take image tensors and some place text by multimodal positions (Qwen2-VL's
#: M-RoPE) that only their own ``generate()`` computes
VISION_TAKES_TURNS = ("a vision model's replies take turns (continuous batching takes token "
                      "ids only, not images or multimodal positions)")


class _Loaded:
    """A model and its tokenizer (and a vision model's processor), shared by the
    sources built alike; with the model's batching engine (made by the first reply
    that uses it, under ``engine_lock``) and the gate that lets one thread compute
    with the model at a time (batched replies together, or one reply on its own)."""

    def __init__(self, model: Any, tokenizer: Any, processor: Any = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.processor = processor
        self.engine: _batch.Engine | None = None
        self.plan: devices.Batching | None = None
        self.engine_lock = threading.Lock()
        self.gate = _batch.Gate()


_shared: weakref.WeakValueDictionary[Hashable, _Loaded] = weakref.WeakValueDictionary()
_shared_lock = threading.Lock()  # guards the two dicts, never held while loading
_load_locks: dict[Hashable, threading.Lock] = {}


def _looks_like_repo_id(text: str) -> bool:
    return (
        not os.path.isabs(text)
        and not text.startswith((".", "~"))
        and "\\" not in text
        and text.count("/") <= 1
        and not text.endswith(".gguf")
    )


def _resolve_local(what: str, value: str | os.PathLike[str]) -> tuple[str, str]:
    """``(kind, location)`` for a model or tokenizer given by path or name.

    kind is "gguf", "folder" or "cached" (a Hugging Face repo id already in the
    local cache). Raises ``FileNotFoundError`` at once for anything else: no
    hub is ever asked.
    """
    text = os.fspath(value)
    path = Path(text).expanduser()
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ValueError(f"{what} {text!r} is a file but not a .gguf file; pass a folder")
        return "gguf", str(path.resolve())
    if path.is_dir():
        if what == "model" and not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"model folder {text!r} has no config.json (is it a transformers model folder?)"
            )
        return "folder", str(path.resolve())
    if _looks_like_repo_id(text):
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(
                text, "config.json" if what == "model" else "tokenizer_config.json"
            )
        except Exception:
            found = None
        if isinstance(found, str):
            return "cached", text
        raise FileNotFoundError(
            f"{what} {text!r} is neither a local path nor a model in the local Hugging Face "
            f"cache; nbstream loads local files only and never downloads"
        )
    raise FileNotFoundError(f"{what} path {text!r} does not exist")


#: what the view says while the embedded model is converted (once) and loaded
PREPARING = "preparing the model (first run, once)"
LOADING = "loading model"
WARMING_UP = "warming up the model"


def _announce_default() -> None:
    """Say at once (before torch and transformers are imported, seconds on a
    first run) whether the embedded model must be converted first."""
    from . import default_model

    try:
        converting = not default_model.is_converted(default_model.converted_path())
    except (ImportError, OSError):  # no model wheel: load_default says so, with the fix
        converting = False
    if converting:
        report_loading(PREPARING, 0.0)
    else:
        report_loading(LOADING)


def _load_default_reporting(kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Load the embedded model, reporting the one-time conversion's progress (in
    units weighing each stage's work, see gguf_llama.UNITS) and then the load (on
    this, the worker thread; see nbstream.core.loading)."""
    from . import default_model

    def progress(done: int, total: int) -> None:
        if total > 0 and done >= total:
            report_loading(LOADING)
        elif total > 0:
            report_loading(PREPARING, done / total)

    return default_model.load_default(progress=progress, **kwargs)


class _CancelCriteria:
    """A ``StoppingCriteria`` that stops every row once ``cancel`` is set.

    transformers 5 wants one bool per batch row, on the ids' device; the two
    possible answers are built once per shape and device.
    """

    def __init__(self, cancel: threading.Event) -> None:
        self._cancel = cancel
        self._answers: dict[tuple[int, Any], tuple[Any, Any]] = {}

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        key = (int(input_ids.shape[0]), input_ids.device)
        answers = self._answers.get(key)
        if answers is None:
            no = torch.zeros(key[0], dtype=torch.bool, device=input_ids.device)
            answers = (no, torch.ones_like(no))
            self._answers[key] = answers
        return answers[1] if self._cancel.is_set() else answers[0]


def _stopping_criterion(cancel: threading.Event) -> Any:
    from transformers import StoppingCriteria

    class CancelCriteria(_CancelCriteria, StoppingCriteria):
        pass

    return CancelCriteria(cancel)


class _EmitStreamer:
    """transformers' streamer protocol (``put``/``end``) feeding ``emit``.

    ``model.generate`` calls ``put`` on the thread that called it: first
    with the prompt ids (skipped), then with each new token id. Once ``cancel`` is set no
    piece is emitted, not even the one of the token still in flight.
    ``hidden``: ids counted but not decoded (special tokens, when the decoder
    keeps special tokens because the think tags are special ones).
    """

    def __init__(self, decoder: IncrementalDecoder, emit: Emit, cancel: threading.Event,
                 hidden: frozenset[int] = frozenset()) -> None:
        self._decoder = decoder
        self._hidden = hidden
        self._emit = emit
        self._cancel = cancel
        #: set while the reply may move on elsewhere: ``end`` then keeps the decoder's
        #: held-back bytes (the next tokens complete them)
        self.hold_end = False
        self._prompt_seen = False
        self.ids: list[int] = []
        self.first_at: float | None = None
        self.last_at: float | None = None

    @property
    def started(self) -> bool:
        """Whether ``put`` had the prompt (the first call) already."""
        return self._prompt_seen

    def put(self, value: Any) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        # One token per decoding step: shape (batch,). Assisted decoding
        # hands over several accepted tokens at once: shape (batch, k).
        if value.dim() > 1:
            if value.shape[0] != 1:
                raise ValueError("TransformersSource streams one sequence; got a batch")
            token_ids = value[0].tolist()
        elif value.numel() != 1:
            raise ValueError("TransformersSource streams one sequence; got a batch")
        else:
            token_ids = [int(value.item())]
        now = time.perf_counter()
        if self.first_at is None:
            self.first_at = now
        self.last_at = now
        for token_id in token_ids:
            if self._cancel.is_set():
                return
            self.ids.append(token_id)
            if token_id in self._hidden:
                continue
            piece = self._decoder.step(token_id)
            if piece:
                self._emit(piece)

    def end(self) -> None:
        if self._cancel.is_set() or self.hold_end:
            return
        rest = self._decoder.flush()
        if rest:
            self._emit(rest)


def _streamer(decoder: IncrementalDecoder, emit: Emit, cancel: threading.Event,
              hidden: frozenset[int] = frozenset()) -> Any:
    from transformers.generation.streamers import BaseStreamer

    class EmitStreamer(_EmitStreamer, BaseStreamer):
        pass

    return EmitStreamer(decoder, emit, cancel, hidden)


def _decoder(tokenizer: Any, think: bool, tooling: ToolReply | None
             ) -> tuple[IncrementalDecoder, frozenset[int]]:
    """The decoder of a reply, and the ids it must not see.

    Tags the splitters read (``<think>``, Mistral's ``[TOOL_CALLS]``, ...) that
    are special tokens would be skipped by a decoder: then it keeps special
    tokens, and the others (end of turn, ...) are hidden from it.
    """
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    special = {int(i): str(getattr(t, "content", t)) for i, t in added.items()
               if getattr(t, "special", False)}
    kept = set()
    if think:
        kept |= {tokenizer.convert_tokens_to_ids(tag) for tag in (OPEN, CLOSE)} & special.keys()
    if tooling is not None and tooling.tags:
        kept |= {i for i, text in special.items() if tooling.keeps(text)}
    if not kept:
        return IncrementalDecoder(tokenizer), frozenset()
    return (IncrementalDecoder(tokenizer, skip_special_tokens=False),
            frozenset(special.keys() - kept))


def _prompt_text(tokenizer: Any, inputs: Any) -> str:
    """The prompt as text (the response parser reads where the reply starts)."""
    return str(tokenizer.decode(inputs["input_ids"][0].tolist(), skip_special_tokens=False))


_OWN_ARGUMENTS = ("model", "tokenizer", "device", "dtype", "load_in_4bit", "load_in_8bit",
                  "attn_implementation", "system_prompt", "warmup", "chat_template_kwargs",
                  "think_tags", "cpu_threads", "tool_call_format", "processor",
                  "concurrency")


class TransformersSource(Source):
    """Generates replies with a local transformers causal language model.

    ``model`` is a loaded model, a local model folder, a ``.gguf`` file, the
    id of a model already in the local Hugging Face cache, or None for the
    embedded SmolLM2-135M-Instruct (see :mod:`nbstream.sources.transformers.default_model`).
    ``tokenizer`` is a tokenizer, a path, or None for the model's own.
    Nothing is loaded until :meth:`prepare`; a path that does not exist fails
    here, at once.

    ``device``, ``dtype``, ``load_in_4bit``, ``load_in_8bit`` and
    ``attn_implementation`` choose how nbstream loads the model (see
    :mod:`nbstream.sources.transformers.devices`); they do not apply to a model object.
    ``system_prompt`` is put first when the conversation has no system turn.
    ``warmup=True`` runs one tiny generation in :meth:`prepare`.
    ``cpu_threads``: None leaves torch's intra-op threads alone; an int sets
    them (``torch.set_num_threads``) on the generation thread for each reply
    and restores the previous value after it. That setting is process-wide in
    effect (with OpenMP it sizes the calling thread's team and the default of
    threads started afterwards), so other torch work started meanwhile may see
    it. On a small CPU shared with other busy processes, fewer threads than
    cores can be faster (benchmarks/generation_overhead.py ``--compare-threads``).
    ``generate_kwargs`` go to ``model.generate`` over the defaults
    ``do_sample=False, max_new_tokens=256`` (``stop_strings`` works: the
    tokenizer is passed along); they are checked here, and a name or value
    ``generate`` would refuse or ignore raises at once, naming it
    (:mod:`~nbstream.sources.transformers.arguments`). ``temperature`` reads
    as per reply: above 0 samples, 0 is greedy. ``chat_template_kwargs`` (e.g.
    ``{"enable_thinking": False}``) go to ``tokenizer.apply_chat_template``.

    ``think_tags``: None (the default) splits ``<think>…</think>`` into
    reasoning when the chat template mentions ``<think>``; True always, False
    never; ``"opened"``: the output starts inside a block (also detected by
    itself: a prompt that ends with ``<think>``).

    ``concurrency``: how many replies of this model run at once (None: up to
    :data:`DEFAULT_CONCURRENCY` where the model and device are batched, else 1).
    Above 1 they are computed together, one step for all at a time
    (:mod:`~nbstream.sources.transformers.batching`), each streamed to its own
    message and stoppable alone. :attr:`batching` says whether that happens and,
    if not, why (bitsandbytes quantization, eager attention, a device other than
    cpu / cuda, a vision model, a ``generate_kwargs`` setting the batch does not
    apply, such as ``repetition_penalty``; then replies take turns, first come
    first served).

    ``tool_call_format``: how the model writes tool calls, ``"hermes"``
    (``<tool_call>{...}</tool_call>``), ``"mistral"``, ``"llama3"`` or
    ``"response_template"`` (the tokenizer's own parsing); None (the default)
    takes the tokenizer's response template where it has one, else reads the
    chat template (see :mod:`nbstream.sources.transformers.toolcalls`).

    ``processor``: a vision model's processor (an object, or a local folder;
    ``AutoProcessor``): the source then reads images (:attr:`accepts`). A model
    folder with a processor of its own (``preprocessor_config.json``) needs none:
    it is loaded with ``AutoProcessor`` and ``AutoModelForImageTextToText``.

    ``generate`` returns an :class:`~nbstream.core.pieces.Outcome` (finish reason,
    usage, figures). After each reply, :attr:`last_token_ids` holds the ids
    whose text was emitted (fed to the decoder).
    """

    def __init__(
        self,
        model: Any = None,
        tokenizer: Any = None,
        *,
        device: Any = None,
        dtype: Any = None,
        load_in_4bit: bool = False,
        load_in_8bit: bool = False,
        attn_implementation: str | None = "auto",
        system_prompt: str | None = None,
        warmup: bool = False,
        chat_template_kwargs: dict[str, Any] | None = None,
        think_tags: ThinkTags = None,
        cpu_threads: int | None = None,
        tool_call_format: ToolCallFormat | None = None,
        processor: Any = None,
        concurrency: int | None = None,
        **generate_kwargs: Any,
    ) -> None:
        if concurrency is not None and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
        ):
            raise ValueError(f"concurrency must be None or a positive int, not {concurrency!r}")
        generate_kwargs = check_generate_kwargs(generate_kwargs, own=_OWN_ARGUMENTS)
        think_tags, template_kwargs = check_think_options(think_tags, chat_template_kwargs,
                                                          where="TransformersSource")
        if cpu_threads is not None and (
            isinstance(cpu_threads, bool) or not isinstance(cpu_threads, int) or cpu_threads < 1
        ):
            raise ValueError(f"cpu_threads must be None or a positive int, not {cpu_threads!r}")
        if tool_call_format is not None and tool_call_format not in TOOL_CALL_FORMATS:
            raise ValueError(f"tool_call_format must be None or one of "
                             f"{', '.join(TOOL_CALL_FORMATS)}, got {tool_call_format!r}")
        self.tool_call_format: ToolCallFormat | None = tool_call_format
        self._tool_verdict: tuple[Any, str | None] | None = None  # (tokenizer, why not)
        self._tool_lock = threading.Lock()
        self.cpu_threads = cpu_threads
        self._concurrency = concurrency
        self.system_prompt = system_prompt
        self.warmup = warmup
        self.chat_template_kwargs: dict[str, Any] = template_kwargs
        self.think_tags: ThinkTags = think_tags
        self.generate_kwargs = generate_kwargs
        self.last_token_ids: list[int] = []
        self._options = {
            "device": None if device is None else str(device),
            "dtype": None if dtype is None else str(dtype),
            "load_in_4bit": load_in_4bit,
            "load_in_8bit": load_in_8bit,
            "attn_implementation": attn_implementation,
        }
        self._model_obj: Any = None
        self._kind: str
        self._location: str | None = None
        if model is None:
            extras.require_default_model()  # the fix, at construction (loading stays lazy)
            self._kind = "default"
        elif isinstance(model, (str, os.PathLike)):
            extras.require_transformers()
            self._kind, self._location = _resolve_local("model", model)
            if self._kind == "gguf" and (load_in_4bit or load_in_8bit):
                raise ValueError(
                    "load_in_4bit/load_in_8bit do not apply to a .gguf file (transformers "
                    "dequantizes it); save it as a folder first, or pass model=None"
                )
        else:
            self._kind = "object"
            self._model_obj = model
            if (
                device is not None
                or dtype is not None
                or load_in_4bit
                or load_in_8bit
                or (attn_implementation not in (None, "auto"))
            ):
                raise ValueError(
                    "device, dtype, load_in_4bit/8bit and attn_implementation apply when "
                    "nbstream loads the model; place a model object yourself"
                )
        # a vision model's processor (#21): an object, a folder, or the model folder's own
        self._processor_obj: Any = None
        self._processor_location: str | None = None
        if isinstance(processor, (str, os.PathLike)):
            kind, where = _resolve_local("tokenizer", processor)
            if kind != "folder" or not vision.is_vision_folder(where):
                raise FileNotFoundError(f"processor {os.fspath(processor)!r} is not a folder "
                                        f"with {' or '.join(vision.PROCESSOR_FILES)}")
            self._processor_location = where
        elif processor is not None:
            if not callable(getattr(processor, "apply_chat_template", None)):
                raise TypeError(f"processor must be a transformers processor (with "
                                f"apply_chat_template), got {type(processor).__name__}")
            self._processor_obj = processor
            if tokenizer is None:
                tokenizer = getattr(processor, "tokenizer", None)
        elif self._kind == "folder" and self._location is not None \
                and vision.is_vision_folder(self._location):
            self._processor_location = self._location
        self._tokenizer_obj: Any = None
        self._tokenizer_location: tuple[str, str] | None = None
        if isinstance(tokenizer, (str, os.PathLike)):
            self._tokenizer_location = _resolve_local("tokenizer", tokenizer)
        elif tokenizer is not None:
            self._tokenizer_obj = tokenizer
        elif self._kind == "object":
            name = str(getattr(model, "name_or_path", "") or "")
            if not name or not Path(name).is_dir():
                raise ValueError(
                    "pass tokenizer= with a model object (its name_or_path is not a local folder)"
                )
            self._tokenizer_location = ("folder", name)
        self._loaded: _Loaded | None = None
        self._tokenizer: Any = None
        self._processor: Any = None
        self._warmed = False
        self._prepare_lock = threading.Lock()

    # -- identity -------------------------------------------------------------

    def _model_key(self) -> Hashable:
        if self._kind == "object":
            return ("transformers", "object", id(self._model_obj))
        options = tuple(sorted(self._options.items()))
        return ("transformers", self._kind, self._location, options)

    def lane_key(self) -> Hashable:
        """One lane per model: sources on the same model object (or the same
        model arguments, which share one loaded object) queue together."""
        return self._model_key()

    # -- several replies at once ---------------------------------------------

    @property
    def concurrency(self) -> int:
        """How many replies of this model's lane run at once: the ``concurrency``
        asked (:data:`DEFAULT_CONCURRENCY` if None) where the replies are batched,
        else 1 (they take turns; :attr:`batching` says why)."""
        asked = self._concurrency if self._concurrency is not None else DEFAULT_CONCURRENCY
        if asked == 1 or self._refusal() is not None:
            return 1
        return asked

    @concurrency.setter
    def concurrency(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"concurrency must be a positive int, not {value!r}")
        self._concurrency = value

    @property
    def batching(self) -> str:
        """Whether this source's replies run together, in one line: "up to 4
        replies together on cpu (continuous batching, sdpa)", or why they take
        turns. Before the model is loaded, what is known then."""
        refused = self._refusal()
        if refused is not None:
            return f"replies take turns: {refused}"
        loaded = self._loaded
        if loaded is None or loaded.plan is None:
            return (f"up to {self.concurrency} replies together where the model allows it "
                    f"(decided when it is loaded)")
        return loaded.plan.reason

    def _asked_concurrency(self) -> int:
        return self._concurrency if self._concurrency is not None else DEFAULT_CONCURRENCY

    def _refusal(self) -> str | None:
        """Why this source's replies are not batched, as far as known now (None: they are,
        or it is not known yet)."""
        if self._asked_concurrency() == 1:
            return "concurrency=1"
        if self.cpu_threads is not None:
            return ("cpu_threads= is set per reply on the generating thread; batched replies "
                    "are computed on the engine's thread")
        if self.reads_images:
            return VISION_TAKES_TURNS
        if self._options["load_in_4bit"] or self._options["load_in_8bit"]:
            return devices.select_batching("cpu", "sdpa", "bitsandbytes", 2).reason
        attention = self._options["attn_implementation"]
        if attention not in (None, "auto") and attention not in devices.BATCHING_ATTENTION:
            return devices.select_batching("cpu", str(attention), None, 2).reason
        refused = _batch.named_refusal(self._generate_kwargs({}))
        if refused is not None:
            return refused
        loaded = self._loaded
        if loaded is not None and loaded.model is not None:
            refused = _batch.refusal(loaded.model.generation_config, self._generate_kwargs({}))
            if refused is not None:
                return refused
            plan = self._plan(loaded)
            if not plan.enabled:
                return plan.reason
            if loaded.engine is not None and loaded.engine.broken:
                return loaded.engine.broken
        return None

    def _plan(self, loaded: _Loaded) -> devices.Batching:
        with loaded.engine_lock:
            if loaded.plan is None:
                loaded.plan = _batch.plan_for(loaded.model, self._asked_concurrency())
            return loaded.plan

    def _engine(self, kwargs: dict[str, Any], inputs: Any) -> _batch.Engine | None:
        """The model's batching engine for a reply with these ``generate()`` arguments
        and model ``inputs``, or None when the reply runs on its own (see
        :attr:`batching`)."""
        if self._refusal() is not None or self._asked_concurrency() == 1:
            return None
        if _batch.inputs_refusal(inputs) is not None:
            return None  # images and such: the engine takes token ids only
        prompt_tokens = int(inputs["input_ids"].shape[-1])
        loaded = self._loaded
        assert loaded is not None
        if _batch.refusal(loaded.model.generation_config, kwargs) is not None:
            return None
        plan = self._plan(loaded)
        with loaded.engine_lock:
            if loaded.engine is None:
                loaded.engine = _batch.Engine(loaded.model, plan, self._asked_concurrency(),
                                                loaded.gate, label=self.label)
            engine = loaded.engine
        settings = _batch.settings_for(loaded.model.generation_config, kwargs, prompt_tokens)
        if prompt_tokens + settings.max_new_tokens > engine.capacity():
            return None  # more than the whole paged cache holds: on its own
        return engine

    @property
    def label(self) -> str:
        if self._kind == "default":
            return DEFAULT_LABEL
        if self._kind == "object":
            name = str(getattr(self._model_obj, "name_or_path", "") or "")
            return Path(name).name or type(self._model_obj).__name__
        assert self._location is not None
        return Path(self._location).stem if self._kind == "gguf" else Path(self._location).name

    def __repr__(self) -> str:
        shown = {
            "default": "None",
            "object": f"<{type(self._model_obj).__name__}>",
        }.get(self._kind, repr(self._location))
        return f"TransformersSource(model={shown})"

    # -- loading --------------------------------------------------------------

    @property
    def prepared(self) -> bool:
        return self._loaded is not None and (self._warmed or not self.warmup)

    @property
    def model(self) -> Any:
        """The model (None before :meth:`prepare`, unless one was passed)."""
        return self._loaded.model if self._loaded is not None else self._model_obj

    @property
    def tokenizer(self) -> Any:
        """The tokenizer (None before :meth:`prepare`, unless one was passed)."""
        return self._tokenizer if self._tokenizer is not None else self._tokenizer_obj

    @property
    def processor(self) -> Any:
        """A vision model's processor (None for a text-only model, and before
        :meth:`prepare` unless one was passed)."""
        return self._processor if self._processor is not None else self._processor_obj

    @property
    def reads_images(self) -> bool:
        """Whether the model reads images (it has a processor)."""
        return self._processor_obj is not None or self._processor_location is not None

    @property
    def accepts(self) -> frozenset[str]:
        """Text, and PNG / JPEG / WebP / GIF images for a vision model (one with a
        processor); a text-only model takes text attachments only (put into the prompt)."""
        return TEXT_ONLY | RASTER_TYPES if self.reads_images else TEXT_ONLY

    def queued(self) -> None:
        """Hand back the asking thread's OpenMP threads (:mod:`.openmp`): a cell that
        loaded or ran the model left the main thread a pool of them, and with two
        pools the worker's threads sleep between the ops of each token instead of
        spinning (5-8 % of the tokens/s on 2 cores). They come back at that thread's
        next torch op."""
        openmp.release_pool()

    def prepare(self) -> None:
        """Load the model and tokenizer (and warm up); a no-op once done."""
        from .quiet import quiet_loading

        with self._prepare_lock, quiet_loading():
            if self._loaded is None:
                self._loaded = self._load_shared()
                self._tokenizer = self._load_tokenizer(self._loaded)
                self._processor = self._processor_obj or self._loaded.processor
            if self.warmup and not self._warmed:
                report_loading(WARMING_UP)
                self._run_warmup()
                self._warmed = True

    def _load_shared(self) -> _Loaded:
        key = self._model_key()
        with _shared_lock:
            lock = _load_locks.setdefault(key, threading.Lock())
        with lock:  # one load per model; other models load meanwhile
            with _shared_lock:
                loaded = _shared.get(key)
            if loaded is None:
                loaded = self._load_model()
                with _shared_lock:
                    _shared[key] = loaded
            return loaded

    def _load_model(self) -> _Loaded:
        if self._kind == "object":
            return _Loaded(self._model_obj, None)
        if self._kind == "default":
            _announce_default()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        plan = devices.plan(
            device=self._options["device"],
            dtype=self._options["dtype"],
            load_in_4bit=bool(self._options["load_in_4bit"]),
            load_in_8bit=bool(self._options["load_in_8bit"]),
            attn_implementation=self._options["attn_implementation"],  # type: ignore[arg-type]
        )
        kwargs = plan.from_pretrained_kwargs()
        if self._kind == "default":
            model, tokenizer = _load_default_reporting(kwargs)
        elif self._processor_location is not None and self._processor_location == self._location:
            # a vision model folder: its processor (its tokenizer inside) and model
            from transformers import AutoModelForImageTextToText, AutoProcessor

            report_loading(LOADING)
            processor = cast(Any, AutoProcessor).from_pretrained(self._location,
                                                                 local_files_only=True)
            vlm = cast(Any, AutoModelForImageTextToText).from_pretrained(self._location,
                                                                         **kwargs)
            vlm.eval()
            devices.check_packable(vlm, plan)
            return _Loaded(vlm, processor.tokenizer, processor)
        else:
            report_loading(LOADING)
            assert self._location is not None
            where: str | Path = self._location
            if self._kind == "gguf":
                gguf = Path(self._location)
                where = gguf.parent
                kwargs["gguf_file"] = gguf.name
            tokenizer_kwargs = {
                key: kwargs[key] for key in ("gguf_file", "local_files_only") if key in kwargs
            }
            tokenizer = AutoTokenizer.from_pretrained(where, **tokenizer_kwargs)
            model = AutoModelForCausalLM.from_pretrained(where, **kwargs)
        model.eval()
        devices.check_packable(model, plan)  # a clear error, not a reshape at the first token
        return _Loaded(model, tokenizer)

    def _load_tokenizer(self, loaded: _Loaded) -> Any:
        if self._tokenizer_obj is not None:
            return self._tokenizer_obj
        if self._processor_location is not None and loaded.processor is None:
            from transformers import AutoProcessor  # a processor folder beside the model

            loaded.processor = cast(Any, AutoProcessor).from_pretrained(
                self._processor_location, local_files_only=True)
            return loaded.processor.tokenizer
        if self._tokenizer_location is not None:
            from transformers import AutoTokenizer

            kind, location = self._tokenizer_location
            if kind == "gguf":
                gguf = Path(location)
                return AutoTokenizer.from_pretrained(
                    gguf.parent, gguf_file=gguf.name, local_files_only=True
                )
            return AutoTokenizer.from_pretrained(location, local_files_only=True)
        return loaded.tokenizer

    def _run_warmup(self) -> None:
        assert self._loaded is not None
        inputs = self._inputs([{"role": "user", "content": "Hi"}])
        import torch

        with self._model_to_myself(threading.Event()), torch.inference_mode():
            self._loaded.model.generate(
                **inputs, max_new_tokens=2, do_sample=False, **self._pad_kwargs()
            )

    # -- generation -----------------------------------------------------------

    def _conversation(self, messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
        # assistant tool calls (arguments as objects) and tool turns kept for the template
        turns = template_messages(messages)
        for turn, m in zip(turns, messages, strict=True):
            if m.get("attachments"):  # a text-only model: text attachments in the text (#21)
                turn["content"] = user_text(m)
        if self.system_prompt is not None and not (turns and turns[0]["role"] == "system"):
            turns.insert(0, {"role": "system", "content": self.system_prompt})
        return turns

    def _inputs(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSchema] = (),
                tooling: ToolReply | None = None) -> Any:
        """The prompt's tensors, with ``tools`` for the template; with ``tooling``'s
        prefill written after it for the model to continue (a forced call's start)."""
        extra: dict[str, Any] = {"tools": list(tools)} if tools else {}
        processor = self.processor
        if processor is not None:  # a vision model: images through its processor (#21)
            if tooling is not None and tooling.prefill:
                raise ValueError(f"{self.label}: a tool_choice naming a function is not "
                                 "supported with a vision model's processor; use 'required'")
            return vision.inputs(processor, self.model,
                                 vision.conversation(messages, self.system_prompt),
                                 {**extra, **self.chat_template_kwargs})
        tokenizer = self.tokenizer
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"the tokenizer of {self.label} has no chat template; set tokenizer.chat_template"
            )
        if tooling is not None and tooling.prefill:
            text = tokenizer.apply_chat_template(
                self._conversation(messages), add_generation_prompt=True, tokenize=False,
                **extra, **self.chat_template_kwargs)
            if str(text).rstrip().endswith(OPEN):
                # the template opened a thinking block: the forced call comes after it
                tooling.prefill = f"\n{CLOSE}\n\n{tooling.prefill}"
            inputs = tokenizer(str(text) + tooling.prefill, add_special_tokens=False,
                               return_tensors="pt")
        else:
            inputs = tokenizer.apply_chat_template(
                self._conversation(messages),
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
                return_tensors="pt",
                **extra,
                **self.chat_template_kwargs,
            )
        return inputs.to(self.model.device)

    def _splitter(self, prompt_ids: Any) -> ThinkSplitter | None:
        """The think-tag splitter for a reply to ``prompt_ids``, or None."""
        mode = self.think_tags
        if mode is False:
            return None
        template = getattr(self.processor or self.tokenizer, "chat_template", "")
        if mode is None and OPEN not in str(template or ""):
            return None
        # the template opened the block when the prompt ends with <think>
        tail = self.tokenizer.decode(prompt_ids[0, -8:].tolist(), skip_special_tokens=False)
        return ThinkSplitter(start_inside=mode == "opened" or tail.rstrip().endswith(OPEN))

    def _pad_kwargs(self) -> dict[str, Any]:
        config = getattr(self.model, "generation_config", None)
        if config is not None and config.pad_token_id is not None:
            return {}
        tokenizer = self.tokenizer
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else None
        return {"pad_token_id": pad if pad is not None else tokenizer.eos_token_id}

    #: per-reply options (``chat.generation``), over ``generate_kwargs``
    generation_options: ClassVar[frozenset[str]] = frozenset(
        {"temperature", "top_p", "max_new_tokens", "stop", "tool_choice"})

    # -- tools ----------------------------------------------------------------

    @property
    def supports_tools(self) -> bool:  # type: ignore[override]  # per model: a property
        """Whether this model's chat template takes tools and nbstream can read its
        calls (:mod:`~nbstream.sources.transformers.toolcalls`). Loads the tokenizer
        (not the model) the first time, if :meth:`prepare` has not yet."""
        return self._why_no_tools() is None

    def check_tools(self, tools: Sequence[ToolSchema]) -> None:
        """Refuse ``tools`` with the reason when the model cannot take them."""
        if not tools:
            return
        why = self._why_no_tools()
        if why is not None:
            raise ValueError(f"{self.label} cannot call tools: {why}")

    def _why_no_tools(self) -> str | None:
        with self._tool_lock:
            tokenizer = self.tokenizer
            if tokenizer is None:
                tokenizer = self._tokenizer_only()
            if self._tool_verdict is None or self._tool_verdict[0] is not tokenizer:
                self._tool_verdict = (tokenizer, tool_support(tokenizer, self.tool_call_format))
            return self._tool_verdict[1]

    def _tokenizer_only(self) -> Any:
        """The tokenizer, loaded without the model (for :meth:`check_tools`)."""
        from transformers import AutoTokenizer

        from .quiet import quiet_loading

        with quiet_loading():
            if self._tokenizer_location is not None or self._kind == "object":
                return self._load_tokenizer(_Loaded(None, None))
            if self._kind == "default":
                from . import default_model

                folder = default_model.converted_path()
                if default_model.is_converted(folder):
                    return AutoTokenizer.from_pretrained(folder, local_files_only=True)
                gguf = default_model.gguf_path()
                return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                     local_files_only=True)
            assert self._location is not None
            if self._kind == "gguf":
                gguf = Path(self._location)
                return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                     local_files_only=True)
            return AutoTokenizer.from_pretrained(self._location, local_files_only=True)

    def _tool_reply(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSchema],
                    options: GenerationOptions) -> ToolReply | None:
        """The reply's tool plan (None without tools), checked before generation."""
        choice = check_tool_request(tools, options.get("tool_choice"), self.label)
        if not tools:
            return None
        self.check_tools(tools)
        return ToolReply(self.tokenizer, tools, choice, self.tool_call_format,
                         CallIds(messages))

    def generate(
        self,
        messages: Sequence[ChatMessage],
        emit: Emit,
        cancel: threading.Event,
    ) -> Outcome:
        """Generate the reply (see :meth:`generate_with`) with the source's own settings."""
        return self.generate_with(messages, emit, cancel, {})

    def options_in_force(self, options: GenerationOptions) -> dict[str, Any]:
        """What ``model.generate`` gets, in the generic names: ``temperature`` 0
        for greedy decoding, ``max_new_tokens``, and ``top_p`` / ``stop`` if set."""
        kwargs = self._generate_kwargs(options)
        shown: dict[str, Any] = {
            "temperature": kwargs.get("temperature", 1.0) if kwargs.get("do_sample") else 0.0}
        for name, key in (("top_p", "top_p"), ("max_new_tokens", "max_new_tokens"),
                          ("stop", "stop_strings")):
            if kwargs.get(key) is not None:
                shown[name] = kwargs[key]
        if "tool_choice" in options:
            shown["tool_choice"] = options["tool_choice"]
        return shown

    def _generate_kwargs(self, options: GenerationOptions) -> dict[str, Any]:
        """The keyword arguments of ``model.generate`` (but the streamer, the
        stopping criteria, padding): the defaults, ``generate_kwargs``, then
        ``options``. A temperature of 0 is greedy decoding, above it samples."""
        kwargs: dict[str, Any] = {"do_sample": False, "max_new_tokens": 256}
        kwargs.update(self.generate_kwargs)
        if "temperature" in options:
            kwargs["do_sample"] = options["temperature"] > 0
            kwargs["temperature"] = options["temperature"]
        if "top_p" in options:
            kwargs["top_p"] = options["top_p"]
        if "max_new_tokens" in options:
            kwargs["max_new_tokens"] = options["max_new_tokens"]
        if "stop" in options:
            kwargs["stop_strings"] = list(options["stop"])
        if not kwargs.get("do_sample"):  # unused by greedy decoding (transformers warns)
            if options.get("temperature") == 0:
                kwargs.pop("temperature", None)
            if "top_p" in options:
                kwargs.pop("top_p", None)
        return kwargs

    def generate_with(
        self,
        messages: Sequence[ChatMessage],
        emit: Emit,
        cancel: threading.Event,
        options: GenerationOptions,
        tools: Sequence[ToolSchema] = (),
    ) -> Outcome:
        """Generate the reply on this thread, emitting pieces as tokens arrive.

        Returns when the model ends its turn (``finish_reason`` "stop"),
        reaches ``max_new_tokens`` ("length") or stops at a stop string
        ("stop"), or at the next token once ``cancel`` is set ("cancelled"; the
        text emitted so far is kept; nothing is emitted after the stop).
        ``Cancelled`` raised by ``emit`` propagates.
        """
        self.check_attachments(messages)
        self.last_token_ids = []
        if cancel.is_set():
            return Outcome("cancelled")
        if not self.prepared:
            self.prepare()
        import torch
        from transformers import StoppingCriteriaList

        tokenizer = self.tokenizer
        tooling = self._tool_reply(messages, tools, options)
        if tooling is not None:
            inputs = self._inputs(messages, tooling.template_tools, tooling)
        else:
            inputs = self._inputs(messages)
        kwargs = self._pad_kwargs()
        kwargs.update(self._generate_kwargs(options))
        engine = self._engine(kwargs, inputs)
        criteria = StoppingCriteriaList(list(kwargs.pop("stopping_criteria", None) or ()))
        criteria.append(_stopping_criterion(cancel))
        if kwargs.get("stop_strings") and "tokenizer" not in kwargs:
            kwargs["tokenizer"] = tokenizer
        finish_calls = None
        if tooling is not None:
            emit, finish_calls = tooling.wrap(emit, _prompt_text(tokenizer, inputs))
        splitter = self._splitter(inputs["input_ids"])
        finish = None
        if splitter is not None:
            emit, finish = splitting(emit, splitter)
        decoder, hidden = _decoder(tokenizer, splitter is not None, tooling)
        if tooling is not None and tooling.prefill:
            emit(tooling.prefill)  # the forced call's start, read as the model's own text
        streamer = _streamer(decoder, emit, cancel, hidden)
        started = time.perf_counter()
        threads_before = None
        if self.cpu_threads is not None:
            threads_before = torch.get_num_threads()
            torch.set_num_threads(self.cpu_threads)
        try:
            if engine is not None:
                self._generate_batched(engine, inputs, kwargs, streamer, criteria, cancel)
            else:
                self._generate_alone(inputs, kwargs, streamer, criteria, cancel)
            reason: FinishReason
            if cancel.is_set():
                reason = "cancelled"
            else:
                if finish is not None:
                    finish()
                if finish_calls is not None:
                    finish_calls()
                max_new = kwargs.get("max_new_tokens")
                reached = max_new is not None and len(streamer.ids) >= int(max_new)
                reason = "length" if reached and not self._ends_turn(streamer.ids) else "stop"
                if tooling is not None and tooling.calls and not (reason == "length"
                                                                 and tooling.cut):
                    reason = "tool_calls"  # a reply that called tools ends with them
        finally:
            ended = time.perf_counter()
            if threads_before is not None:
                torch.set_num_threads(threads_before)
            ids = streamer.ids
            self.last_token_ids = ids
        rate = None
        if len(ids) > 1 and streamer.first_at is not None and streamer.last_at is not None:
            span = streamer.last_at - streamer.first_at
            rate = (len(ids) - 1) / span if span > 0 else None
        prompt_tokens = int(inputs["input_ids"].shape[-1])
        return Outcome(
            finish_reason=reason,
            usage={"prompt_tokens": prompt_tokens, "completion_tokens": len(ids)},
            figures={
                # new tokens the model produced and the decoder received (end-of-turn
                # token included; a token produced after ``cancel`` was set is not)
                "tokens": len(ids),
                # from the call of model.generate to its return, and to the first token
                "seconds": ended - started,
                "first_token_seconds": (
                    None if streamer.first_at is None else streamer.first_at - started
                ),
                # decoding rate after the first token (None with fewer than two tokens)
                "tokens_per_second": rate,
            },
        )

    def _generate_alone(self, inputs: Any, kwargs: dict[str, Any], streamer: Any,
                        criteria: Any, cancel: threading.Event) -> None:
        """``model.generate`` on this thread, when the model's turn comes: replies that
        are not batched use a model one at a time, and not while batched ones run
        (first come first served; see :class:`~._batch.Gate`)."""
        import torch

        with self._model_to_myself(cancel) as mine:
            if not mine:  # stopped while waiting: nothing was generated
                return
            with torch.inference_mode():
                self.model.generate(**inputs, streamer=streamer, stopping_criteria=criteria,
                                    **kwargs)

    @contextlib.contextmanager
    def _model_to_myself(self, cancel: threading.Event) -> Iterator[bool]:
        """Hold the model's gate alone (and the batching engine paused) in this block;
        yields False if ``cancel`` was set while waiting."""
        loaded = self._loaded
        assert loaded is not None
        ticket = loaded.gate.enter("solo", cancel)
        if ticket is None:
            yield False
            return
        try:
            engine = loaded.engine
            with engine.paused() if engine is not None else contextlib.nullcontext():
                yield True
        finally:
            loaded.gate.leave(ticket)

    def _generate_batched(self, engine: _batch.Engine, inputs: Any, kwargs: dict[str, Any],
                          streamer: Any, criteria: Any, cancel: threading.Event) -> None:
        """A reply that can be batched. While no other reply wants the model, it runs
        ``model.generate`` on this thread as a reply on its own does (nothing is paid
        for batching then); when another comes, it stops at the next token and goes on
        as one request of ``engine``'s batch from the tokens it has. Its tokens go
        through the same streamer either way (on this thread); in the batch, its stop
        strings are checked here after each token (as ``generate`` does, over prompt
        and answer)."""
        import torch

        ids = inputs["input_ids"]
        prompt: list[int] = ids[0].tolist()
        settings = _batch.settings_for(self.model.generation_config, kwargs, len(prompt))
        stop: Any = None
        if kwargs.get("stop_strings"):
            from transformers.generation.stopping_criteria import StopStringCriteria

            stop = StopStringCriteria(tokenizer=self.tokenizer, stop_strings=kwargs["stop_strings"])
        if self._alone_until_joined(engine, inputs, kwargs, streamer, criteria, cancel):
            return  # ended on its own (or was stopped)
        row = prompt + list(streamer.ids)
        if streamer.ids and (len(streamer.ids) >= settings.max_new_tokens
                             or streamer.ids[-1] in settings.eos_token_ids
                             or (stop is not None and bool(stop(torch.tensor([row]), None)[0]))):
            streamer.hold_end = False  # it ended with the token it stopped at
            streamer.end()
            return
        if not streamer.started:
            streamer.put(ids)  # the prompt: skipped, as generate() hands it over first

        def on_tokens(new: list[int]) -> bool:
            if stop is None:
                streamer.put(torch.tensor([new]))
                return False
            for token in new:
                streamer.put(torch.tensor([[token]]))
                row.append(token)
                if bool(stop(torch.tensor([row]), None)[0]):
                    return True  # the stop string is in: the reply ends at this token
            return False

        streamer.hold_end = False
        engine.run(prompt, settings, cancel, on_tokens, carried=streamer.ids)
        streamer.end()

    def _alone_until_joined(self, engine: _batch.Engine, inputs: Any, kwargs: dict[str, Any],
                            streamer: Any, criteria: Any, cancel: threading.Event) -> bool:
        """Run ``model.generate`` while the model is free and no other reply asks for
        it (:meth:`~.batching.Gate.try_alone`). True when the reply is over (ended or
        stopped); False when it should go on in the batch: another reply came (it
        stopped after its latest token, kept in ``streamer.ids``), or the model was not
        free to begin with."""
        import torch

        assert self._loaded is not None
        gate = self._loaded.gate
        move = threading.Event()
        ticket = gate.try_alone(move)
        if ticket is None:
            return False
        try:
            with engine.paused():
                criteria.append(_stopping_criterion(move))
                streamer.hold_end = True
                with torch.inference_mode():
                    self.model.generate(**inputs, streamer=streamer, stopping_criteria=criteria,
                                        **kwargs)
        finally:
            gate.leave(ticket)
        if move.is_set() and not cancel.is_set():
            return False
        streamer.hold_end = False
        streamer.end()
        return True

    def _ends_turn(self, ids: list[int]) -> bool:
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        eos_ids = set(eos) if isinstance(eos, (list, tuple)) else {eos}
        return bool(ids) and ids[-1] in eos_ids
