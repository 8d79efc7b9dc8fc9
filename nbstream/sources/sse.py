"""Reading a server-sent-event body defensively: what a broken server cannot do to us.

httpx-sse parses the events (its :class:`~httpx_sse.EventSource`); this module
only decides what text it is given. A server that died, a proxy, or a bug can
send anything, and :func:`checked_text` turns the worst of it into a clear
:class:`BadStream` (the source makes it a :class:`~nbstream.sources.SourceError`)
instead of a hang, a flood or text that was never written:

* bytes that are not UTF-8 (an SSE body is UTF-8 by definition): an error
  naming the byte offset, where a lenient decoder would show U+FFFD;
* a line longer than :data:`MAX_LINE_BYTES` (a real event is a few hundred
  bytes; a server stuck writing one endless line would otherwise grow memory
  until it ends): an error as soon as the limit is passed, without reading
  the rest.

Runs in the task that reads the response (a source's private event loop on
its worker thread); keeps no state beyond one body.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterator

import httpx

__all__ = ["MAX_LINE_BYTES", "BadStream", "CheckedBody", "checked_text"]

#: the longest line of an event stream read, in bytes (an event's ``data:`` line
#: is a JSON chunk of a few hundred bytes; the largest seen, a final chunk with
#: usage and timings, about 2 KB)
MAX_LINE_BYTES = 1 << 20
_NEWLINE = re.compile(rb"\r\n|\r|\n")


class BadStream(ValueError):
    """The body is not a readable event stream (said in the message)."""


async def checked_text(response: httpx.Response,
                       max_line: int = MAX_LINE_BYTES) -> AsyncIterator[str]:
    """The body of ``response`` as text, strictly UTF-8, no line over ``max_line`` bytes.

    Raises :class:`BadStream` at the first byte that breaks either rule.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    offset = 0  # bytes of the body before this part
    line = 0  # bytes of the current line so far
    async for part in response.aiter_bytes():
        try:
            text = decoder.decode(part)
        except UnicodeDecodeError as exc:
            raise BadStream(f"the stream is not valid UTF-8 (byte {offset + exc.start})") \
                from None
        segments = _NEWLINE.split(part)  # the first continues the current line
        longest = max([line + len(segments[0]), *(len(s) for s in segments[1:])])
        if longest > max_line:
            raise BadStream(f"the stream has a line longer than {max_line:,} bytes "
                            f"(by byte {offset + len(part):,}): not a stream of events")
        line = line + len(part) if len(segments) == 1 else len(segments[-1])
        offset += len(part)
        if text:
            yield text
    try:
        tail = decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise BadStream(f"the stream ends inside a UTF-8 character (byte {offset})") from None
    if tail:
        yield tail


class CheckedBody:
    """What :class:`httpx_sse.EventSource` reads (headers and text) of a response,
    with its text from :func:`checked_text`."""

    def __init__(self, response: httpx.Response, max_line: int = MAX_LINE_BYTES) -> None:
        self.headers = response.headers
        self._response = response
        self._max_line = max_line

    def aiter_text(self) -> AsyncIterator[str]:
        return checked_text(self._response, self._max_line)
