"""The pipeline's defaults, declared once: the flush interval and the buffer bound.

The stream (``stream.py``), the pump (``pump.py``, which imports the stream) and
the widgets' options (``nbstream/options.py``) all start from these values, so
they live below all three. Constants only: any thread may read them.
"""

from __future__ import annotations

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_MAX_PENDING"]

#: default flush interval per stream, seconds (~29 messages/s). With acks every 500 ms it keeps a
#: widget within 40 kernel->browser messages a second, status included, and token->DOM p95
#: under 60 ms (benchmarks/browser_markdown.py, browser_acks.py --interval/--ack-gap)
DEFAULT_INTERVAL = 0.034

#: default bound of the unsent buffer, characters: a producer that outruns the pump waits
#: (backpressure) instead of growing memory
DEFAULT_MAX_PENDING = 1 << 20
