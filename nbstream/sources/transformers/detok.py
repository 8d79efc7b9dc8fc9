"""Incremental detokenization that never splits a character.

Owns turning a stream of token ids into text pieces. Runs on whatever thread
feeds it (for :class:`~nbstream.sources.transformers.TransformersSource`, the
generation worker thread, inside the streamer's ``put()``); one decoder serves
one reply and is not shared between threads.

A byte-level tokenizer splits a character that is not in its vocabulary
(most CJK characters, emoji, a ZWJ sequence) over several tokens, one or more
UTF-8 bytes each. Decoding token by token would show U+FFFD REPLACEMENT
CHARACTER for each partial character; ``TextStreamer`` avoids that by holding
text back until a space, so CJK text and emoji do not stream at all. Here a
piece is emitted as soon as it ends in a whole character.

Two engines, chosen by :class:`IncrementalDecoder`:

``"rust"``
    ``tokenizers.decoders.DecodeStream`` on the fast tokenizer's Rust backend
    (``tokenizer.backend_tokenizer``). A step costs microseconds.
``"python"``
    For slow tokenizers, tokenizers without ``DecodeStream`` (< 0.21), or
    tokenizers whose ``decode`` post-processes text
    (``clean_up_tokenization_spaces``). It decodes a short window of ids with
    the tokenizer's own ``decode``: the ids of the previous piece (the
    *prefix*, so that decoders which strip a leading space see their context)
    plus the ids not yet emitted, and emits the text past the prefix unless it
    ends in U+FFFD. The window holds the previous piece and the pending ids
    only, so a step costs the same at token 10 and at token 10,000.

Guarantees (tested on the SmolLM2 byte-level BPE and on generated strings):

* the pieces joined equal ``tokenizer.decode(ids, skip_special_tokens=True)``,
  except that an incomplete character at the very end (generation cut off in
  the middle of a character) is dropped by :meth:`IncrementalDecoder.flush`
  instead of being shown as U+FFFD: then the joined pieces equal the full
  decode with its trailing U+FFFD removed;
* a piece contains U+FFFD only where the full decode has one in the middle of
  the text (invalid bytes that no later token completes);
* a character is emitted with the token that completes it, not held back
  until a space.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

REPLACEMENT = "\ufffd"

Engine = Literal["auto", "rust", "python"]

# A run of pending ids that still decodes to text ending in U+FFFD is normally
# at most four byte tokens long (one UTF-8 character). Past this many it can
# only be invalid bytes that nothing will complete: emit it rather than let
# the window grow.
_MAX_PENDING = 64


class _Decodes(Protocol):
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


def _rust_tokenizer(tokenizer: Any) -> Any | None:
    """The ``tokenizers.Tokenizer`` behind ``tokenizer``, or None."""
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - tokenizers ships with transformers
        return None
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    # transformers' fast tokenizers (``PreTrainedTokenizerFast`` in 4.x,
    # ``TokenizersBackend`` in 5.x, GGUF-loaded ones included) expose it here.
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if isinstance(backend, Tokenizer):
        return backend
    return None


def _new_decode_stream(skip_special_tokens: bool) -> Any | None:
    """A fresh ``DecodeStream``, or None where tokenizers has none.

    tokenizers 0.21 takes ``DecodeStream(skip_special_tokens)``; 0.22 added a
    leading ``ids`` parameter, so a positional ``True`` would now be read as
    ids. The keyword works with both.
    """
    try:
        from tokenizers.decoders import DecodeStream
    except ImportError:
        return None
    try:
        return DecodeStream(skip_special_tokens=skip_special_tokens)
    except TypeError:  # pragma: no cover - a signature we do not know
        return None


def _cleans_up_spaces(tokenizer: Any) -> bool:
    """Whether ``tokenizer.decode`` rewrites text after the Rust decoder."""
    return bool(getattr(tokenizer, "clean_up_tokenization_spaces", False))


def rust_available(tokenizer: Any) -> bool:
    """Whether the ``"rust"`` engine can serve ``tokenizer``."""
    return (
        _rust_tokenizer(tokenizer) is not None
        and not _cleans_up_spaces(tokenizer)
        and _new_decode_stream(True) is not None
    )


class IncrementalDecoder:
    """Turns token ids, one at a time, into text pieces of whole characters.

    ``step(token_id)`` returns the text that token completes, or None while a
    character is still incomplete (or the token is a skipped special token).
    ``flush()`` returns what is still held back once the ids end.

    ``engine`` forces ``"rust"`` (``DecodeStream``) or ``"python"`` (window
    decoding with ``tokenizer.decode``); ``"auto"`` prefers Rust where it
    decodes exactly like ``tokenizer.decode``. The engine in use is
    :attr:`engine`. Should ``DecodeStream`` ever reject a step (it checks
    that each decode extends the previous one), the decoder carries on with
    the Python engine from the same ids, without losing or repeating text.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        skip_special_tokens: bool = True,
        engine: Engine = "auto",
    ) -> None:
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        rust = _rust_tokenizer(tokenizer)
        stream = _new_decode_stream(skip_special_tokens) if rust is not None else None
        if engine == "rust" and stream is None:
            raise ValueError(
                "engine='rust' needs a fast tokenizer (with .backend_tokenizer) and "
                "tokenizers>=0.21 (tokenizers.decoders.DecodeStream)"
            )
        use_rust = engine == "rust" or (
            engine == "auto" and stream is not None and not _cleans_up_spaces(tokenizer)
        )
        self._rust = rust if use_rust else None
        self._stream = stream if use_rust else None
        # Ids of the last emitted piece (context for a decoder that treats a
        # leading space specially) and ids not emitted yet.
        self._prefix_ids: list[int] = []
        self._prefix_text = ""
        self._pending: list[int] = []

    @property
    def engine(self) -> Literal["rust", "python"]:
        """The engine in use now."""
        return "rust" if self._stream is not None else "python"

    def _decode(self, ids: Sequence[int]) -> str:
        if self._rust is not None:
            return str(self._rust.decode(list(ids), skip_special_tokens=self._skip))
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=self._skip))

    def step(self, token_id: int) -> str | None:
        """Add one token id; return the text it completes, or None."""
        self._pending.append(token_id)
        stream = self._stream
        if stream is not None:
            try:
                piece = stream.step(self._rust, token_id)
            except Exception:
                # "Invalid prefix encountered": this decoder does not extend
                # its previous output. Continue from the same ids in Python.
                self._stream = None
                self._rust = None
                self._prefix_text = self._decode(self._prefix_ids)
                return self._step_window()
            if piece is None:
                return None
            self._emitted()
            return str(piece)
        return self._step_window()

    def _emitted(self) -> None:
        self._prefix_ids = self._pending
        self._pending = []

    def _step_window(self) -> str | None:
        text = self._decode(self._prefix_ids + self._pending)
        prefix = self._prefix_text
        if len(text) <= len(prefix):
            return None  # a skipped special token, or nothing decodable yet
        if text.endswith(REPLACEMENT) and len(self._pending) < _MAX_PENDING:
            return None  # the last character is still incomplete
        # Decoders that only concatenate (byte-level, Metaspace, byte
        # fallback) always extend ``prefix``; for any other, slicing by length
        # is the best that can be done without taking back shown text.
        piece = text[len(prefix) :]
        self._emitted()
        self._prefix_text = self._decode(self._prefix_ids)
        return piece

    def flush(self) -> str:
        """Return the text still held back and reset for a new sequence.

        An incomplete character at the end (the ids stopped in the middle of
        its bytes) is dropped rather than returned as U+FFFD.
        """
        rest = ""
        if self._pending:
            prefix = self._prefix_text if self._stream is None else self._decode(self._prefix_ids)
            text = self._decode(self._prefix_ids + self._pending)
            rest = text[len(prefix) :].rstrip(REPLACEMENT)
        self.reset()
        return rest

    def reset(self) -> None:
        """Forget all ids, ready for a new sequence."""
        self._prefix_ids = []
        self._prefix_text = ""
        self._pending = []
        if self._rust is not None:
            self._stream = _new_decode_stream(self._skip)


def decode_pieces(
    tokenizer: Any,
    ids: Sequence[int],
    *,
    skip_special_tokens: bool = True,
    engine: Engine = "auto",
) -> list[str]:
    """Stream ``ids`` through an :class:`IncrementalDecoder`; return the pieces.

    The last element is the flushed remainder when there is one.
    """
    decoder = IncrementalDecoder(tokenizer, skip_special_tokens=skip_special_tokens, engine=engine)
    pieces = [p for p in map(decoder.step, ids) if p is not None]
    rest = decoder.flush()
    if rest:
        pieces.append(rest)
    return pieces
