"""Hand back the OpenMP threads of the thread that asks for a reply.

torch's CPU builds for Linux run their parallel ops on GNU OpenMP (libgomp),
which keeps a pool of threads for each thread that called into torch. While
one pool exists, its threads spin between the many small parallel regions of a
decoding step. A kernel whose cells loaded or ran the model keeps the main
thread's pool; when a reply's worker thread then generates with a pool of its
own, libgomp counts more pool threads than cores and lets them sleep almost at
once, so every region pays a wake-up (on 2 cores, 5-8 % of a small model's
tokens per second: ``benchmarks/generation_in_kernel.py``).

:func:`release_pool` calls OpenMP 5.0's ``omp_pause_resource_all`` (soft) on
the calling thread, which ends that thread's pool; the pool comes back by
itself at the thread's next parallel op. Only runtimes already loaded in the
process are used (found in ``/proc/self/maps``, opened with ``RTLD_NOLOAD``),
and only once torch is imported. Elsewhere (not Linux, Intel's or LLVM's
OpenMP, no such symbol) it does nothing.

Thread-safe; call it on the thread whose pool should go (not from inside a
parallel region: the runtime then refuses, harmlessly).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable

#: ``omp_pause_soft`` of ``omp_pause_resource_t`` (OpenMP 5.0)
OMP_PAUSE_SOFT = 1

_lock = threading.Lock()
_pause: list[Callable[[int], int]] | None = None


def loaded_libgomp() -> list[str]:
    """Paths of the GNU OpenMP runtimes mapped into this process (Linux), sorted."""
    paths: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith("libgomp"):
                    paths.add(parts[5].strip())
    except OSError:
        return []
    return sorted(paths)


def _pause_functions() -> list[Callable[[int], int]]:
    global _pause
    with _lock:
        if _pause is None:
            _pause = []
            noload: int = getattr(os, "RTLD_NOLOAD", 0)  # 0: not this platform
            for path in loaded_libgomp() if noload else []:
                try:  # RTLD_NOLOAD: only a runtime already loaded
                    fn = ctypes.CDLL(path, mode=noload | os.RTLD_LAZY).omp_pause_resource_all
                except (OSError, AttributeError):
                    continue
                fn.argtypes = [ctypes.c_int]
                fn.restype = ctypes.c_int
                _pause.append(fn)
        return _pause


def release_pool() -> bool:
    """End the calling thread's OpenMP pool (see the module). True if a runtime did."""
    if "torch" not in sys.modules:  # torch loads its OpenMP runtime when imported
        return False
    released = False
    for pause in _pause_functions():
        released = pause(OMP_PAUSE_SOFT) == 0 or released
    return released
