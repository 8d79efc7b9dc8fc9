"""Keep model loading quiet: no progress bars or chatter from worker threads.

Output printed from a worker thread lands in whatever notebook cell runs at
the time (and nbval compares it), so loading, which transformers and
huggingface_hub decorate with progress bars, runs inside :func:`quiet_loading`.
The view already says "loading model".
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_depth = 0
_saved: tuple[bool, int, bool] | None = None


@contextmanager
def quiet_loading() -> Iterator[None]:
    """Silence transformers' and huggingface_hub's progress bars and info logs."""
    global _depth, _saved
    from huggingface_hub import utils as _hub_utils
    from transformers.utils import logging as _hf_logging

    hub_utils: Any = _hub_utils  # untyped upstream
    hf_logging: Any = _hf_logging

    with _lock:
        if _depth == 0:
            _saved = (hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity(),
                      hub_utils.are_progress_bars_disabled())
            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
            hub_utils.disable_progress_bars()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                bars, verbosity, hub_disabled = _saved
                if bars:
                    hf_logging.enable_progress_bar()
                hf_logging.set_verbosity(verbosity)
                if not hub_disabled:
                    hub_utils.enable_progress_bars()
