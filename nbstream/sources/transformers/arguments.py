"""The ``generate()`` keyword arguments a TransformersSource is built with, checked then.

``TransformersSource(model, max_new_tokens=200, temperature=0.7, ...)`` hands
its extra keyword arguments to ``model.generate`` at every reply. A name that
``generate`` does not take, or takes and ignores, used to fail at the first
reply on the worker thread (transformers' "model_kwargs are not used by the
model"), or not at all (``top_p`` with greedy decoding is dropped with a
warning). :func:`check_generate_kwargs` raises in the caller's cell instead,
naming the argument (and the closest right name).

The common names are checked here without importing transformers (a source is
built before anything loads; importing transformers costs about a second);
any other name is looked up in transformers' ``GenerationConfig`` and
``generate`` signature, and its value validated by ``GenerationConfig``.

``temperature`` reads as it does per reply (``chat.generation``): above 0 it
samples, 0 is greedy decoding; ``do_sample`` given explicitly wins.

Pure functions; any thread.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from typing import Any

from ...checks import short

__all__ = ["check_generate_kwargs"]


def _number(low: float, high: float = math.inf, *, low_open: bool = False,
            integer: bool = False, none: bool = False) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value is None and none:
            return
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (integer and not isinstance(value, int))):
            raise TypeError(f"TransformersSource({name}=...) must be "
                            f"{'an int' if integer else 'a number'}, got "
                            f"{type(value).__name__} {short(value)}")
        number = float(value)
        bad = not math.isfinite(number) or number < low or (low_open and number == low) \
            or number > high
        if bad:
            bound = f"> {low}" if low_open else f">= {low}"
            rng = bound if high == math.inf else f"in {'(' if low_open else '['}{low}, {high}]"
            raise ValueError(f"TransformersSource({name}=...) must be {rng}, got {value!r}")
    return check


def _bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"TransformersSource({name}=...) must be True or False, got "
                        f"{short(value)}")


def _token_ids(name: str, value: Any) -> None:
    items = value if isinstance(value, (list, tuple)) else [value]
    if value is None:
        return
    if not items or not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        raise TypeError(f"TransformersSource({name}=...) must be a token id (int) or a list of "
                        f"them, got {short(value)}")


def _strings(name: str, value: Any) -> None:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or not all(
            isinstance(s, str) and s for s in items):
        raise TypeError(f"TransformersSource({name}=...) must be a non-empty str or a list of "
                        f"them, got {short(value)}")


def _sequence(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, (list, tuple)):
        raise TypeError(f"TransformersSource({name}=...) must be a list, got "
                        f"{type(value).__name__} {short(value)}")


def _anything(name: str, value: Any) -> None:
    pass


#: common names, checked without importing transformers
_KNOWN: dict[str, Callable[[str, Any], None]] = {
    "max_new_tokens": _number(1, integer=True, none=True),
    "min_new_tokens": _number(0, integer=True, none=True),
    "max_length": _number(1, integer=True, none=True),
    "min_length": _number(0, integer=True, none=True),
    "do_sample": _bool,
    "temperature": _number(0),
    "top_p": _number(0, 1, low_open=True),
    "top_k": _number(0, integer=True),
    "min_p": _number(0, 1),
    "typical_p": _number(0, 1, low_open=True),
    "repetition_penalty": _number(0, low_open=True),
    "no_repeat_ngram_size": _number(0, integer=True),
    "num_beams": _number(1, integer=True),
    "num_return_sequences": _number(1, integer=True),
    "stop_strings": _strings,
    "eos_token_id": _token_ids,
    "pad_token_id": _token_ids,
    "bos_token_id": _token_ids,
    "stopping_criteria": _sequence,
    "logits_processor": _sequence,
    "use_cache": _bool,
    "tokenizer": _anything,
    "assistant_model": _anything,
    "prompt_lookup_num_tokens": _number(1, integer=True, none=True),
}

#: names nbstream sets itself from the conversation and the reply
_OURS = {
    "input_ids": "nbstream makes the prompt's ids from the conversation",
    "inputs": "nbstream makes the prompt's ids from the conversation",
    "attention_mask": "nbstream makes the prompt's attention mask",
    "streamer": "TransformersSource brings its own streamer; do not pass streamer=",
    "return_dict_in_generate": "nbstream reads the tokens as they stream",
}

_SAMPLING_ONLY = ("top_p", "top_k", "min_p", "typical_p")


def _transformers_names() -> tuple[set[str], Any]:
    import inspect

    from transformers import GenerationConfig as _GenerationConfig
    from transformers import GenerationMixin

    GenerationConfig: Any = _GenerationConfig  # untyped upstream
    config = GenerationConfig()
    fields = {k for k in vars(config) if not k.startswith("_")}
    params = set(inspect.signature(GenerationMixin.generate).parameters) - {"self", "kwargs"}
    return fields | params | {"tokenizer", "assistant_tokenizer"}, GenerationConfig


def check_generate_kwargs(kwargs: dict[str, Any], own: tuple[str, ...] = ()) -> dict[str, Any]:
    """``kwargs`` checked (and ``temperature`` read as it is per reply); raises
    :class:`TypeError` for a name ``generate`` does not take or a value of the
    wrong type, :class:`ValueError` for a value out of range or an option that
    would be ignored (``top_p`` without sampling, beams while streaming).
    ``own``: the constructor's own argument names (suggested for a misspelt one)."""
    out = dict(kwargs)
    unknown = []
    for name, value in kwargs.items():
        if name in _OURS:
            raise TypeError(f"TransformersSource({name}=...): {_OURS[name]}")
        check = _KNOWN.get(name)
        if check is None:
            unknown.append(name)
        else:
            check(name, value)
    if out.get("num_beams", 1) != 1:
        raise ValueError("TransformersSource(num_beams=...): beam search does not stream "
                         "(a reply shows one sequence as it is made)")
    if out.get("num_return_sequences", 1) != 1:
        raise ValueError("TransformersSource(num_return_sequences=...): a reply streams one "
                         "sequence")
    if unknown:
        names, generation_config = _transformers_names()
        for name in unknown:
            if name not in names:
                close = difflib.get_close_matches(name, sorted(names | set(_KNOWN) | set(own)),
                                                  n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise TypeError(
                    f"TransformersSource({name}=...): model.generate takes no option {name!r}"
                    f"{hint} (extra keyword arguments of TransformersSource go to generate)")
            if hasattr(generation_config(), name):
                try:
                    generation_config(**{name: kwargs[name]}).validate()
                except ValueError as exc:
                    raise ValueError(f"TransformersSource({name}=...): {exc}") from None
    # temperature: as a reply's option (above 0 samples, 0 is greedy), unless do_sample is given
    if "temperature" in out and "do_sample" not in out:
        out["do_sample"] = out["temperature"] > 0
        if out["temperature"] == 0:
            del out["temperature"]
    if not out.get("do_sample"):
        ignored = [n for n in _SAMPLING_ONLY if n in out]
        if "temperature" in out:
            ignored.insert(0, "temperature")
        if ignored:
            raise ValueError(
                f"TransformersSource({ignored[0]}=...) applies only when sampling, and this "
                f"source decodes greedily: also pass temperature > 0 (or do_sample=True)")
    return out
