"""Logging: quiet by default, one switch for per-stage timings.

nbstream logs through the standard :mod:`logging` module under the
``nbstream`` logger. A library must not print from its threads (in a notebook
that output lands in whatever cell runs at the time), so the logger has a
``NullHandler`` and says nothing unless the application configures logging
or calls :func:`set_debug`.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("nbstream")
logger.addHandler(logging.NullHandler())

_handler: logging.Handler | None = None


def set_debug(on: bool = True, stream: object = None) -> None:
    """Log per-stage timings (each flush, ack, status change) to stderr, or stop."""
    global _handler
    if _handler is not None:
        logger.removeHandler(_handler)
        _handler = None
    if on:
        _handler = logging.StreamHandler(stream or sys.stderr)  # type: ignore[arg-type]
        _handler.setFormatter(logging.Formatter(
            "%(asctime)s.%(msecs)03d %(threadName)s %(name)s: %(message)s", "%H:%M:%S"))
        logger.addHandler(_handler)
        logger.setLevel(logging.DEBUG)
    else:
        logger.setLevel(logging.NOTSET)
