"""What a user message carries besides its text: attachments, and their limits.

An :class:`Attachment` is immutable data: a name, a MIME type and the bytes a
model is given (an image already downscaled, a table already rendered as
text), with what the conversion did said in ``note``. It is part of the
contract between the widgets and the sources (a user turn of the
conversation a source is handed carries its ``attachments``; see
:class:`~nbstream.core.pieces.ChatMessage`), so it lives here, importing
nothing else of nbstream. Converting kernel objects into attachments is
:mod:`nbstream.attachments`; what each API makes of them,
:mod:`nbstream.sources.content_parts`.

Three kinds, by MIME type (:attr:`Attachment.kind`):

* ``"image"``: PNG, JPEG, WebP or GIF, given to a model as an image;
* ``"text"``: ``text/*``, JSON, XML, YAML and SVG markup, given as text (so any
  source takes it: its text is put into the prompt);
* ``"file"``: anything else (a PDF...), given only to a source whose
  :attr:`~nbstream.sources.base.Source.accepts` names its type.

A source declares what it takes as MIME patterns (``"image/*"``, ``"text/*"``,
``"application/pdf"``, ``"*/*"``); :func:`takes` says whether it takes one
attachment. The limits a widget checks (count and bytes per message, bytes
per chat, bytes per attachment) and the bounds of conversion (image side,
text length, table rows) are one :class:`AttachmentLimits`. Each limit has its
own error (:class:`TooManyAttachments`, :class:`AttachmentTooLarge`,
:class:`MessageTooLarge`, :class:`ChatTooLarge`), all :class:`AttachmentError`
(a :class:`ValueError`).

A user turn of a widget holds each of its attachments with what the view is
shown of it (:class:`Attached`: the attachment and its :class:`Preview`, a small
image or a text's start, made once by :func:`nbstream.attachments.preview`).

Pure data and functions: any thread.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ANY_TYPE",
    "RASTER_TYPES",
    "TEXT_ONLY",
    "Attached",
    "Attachment",
    "AttachmentError",
    "AttachmentKind",
    "AttachmentLimits",
    "AttachmentTooLarge",
    "ChatTooLarge",
    "MessageTooLarge",
    "Preview",
    "TooManyAttachments",
    "UnsupportedAttachment",
    "human_bytes",
    "kind_of",
    "mime_matches",
    "parse_text_block",
    "takes",
    "text_block",
]

#: How a model is given an attachment: as an image, as text (put into the prompt),
#: or as a file (only to a source that names its type).
AttachmentKind = Literal["image", "text", "file"]

#: the image types models take as images (OpenAI's list; vision processors read them all)
RASTER_TYPES: frozenset[str] = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})
#: types given to a model as text besides ``text/*``
_TEXTUAL: frozenset[str] = frozenset({
    "application/json", "application/xml", "application/yaml", "application/x-yaml",
    "application/toml", "application/javascript", "application/x-python",
    "application/x-sh", "application/sql", "application/x-ipynb+json", "image/svg+xml",
})
#: what a source takes by default: text (an attachment's text goes into the prompt)
TEXT_ONLY: frozenset[str] = frozenset({"text/*"})
#: every type (sources that hand the messages on as they are: tests, scripts)
ANY_TYPE: frozenset[str] = frozenset({"*/*"})


def kind_of(mime: str) -> AttachmentKind:
    """How an attachment of type ``mime`` is given to a model (see the module docstring)."""
    mime = mime.lower()
    if mime in RASTER_TYPES:
        return "image"
    if mime.startswith("text/") or mime in _TEXTUAL or mime.endswith(("+json", "+xml")):
        return "text"
    return "file"


def mime_matches(mime: str, pattern: str) -> bool:
    """Whether ``mime`` matches ``pattern`` (``"image/png"``, ``"image/*"`` or ``"*/*"``)."""
    mime, pattern = mime.lower(), pattern.lower()
    if pattern in ("*", "*/*"):
        return True
    if pattern.endswith("/*"):
        return mime.startswith(pattern[:-1])
    return mime == pattern


def takes(accepts: Iterable[str], attachment: Attachment) -> bool:
    """Whether a source that takes ``accepts`` (MIME patterns) takes ``attachment``:
    an image or a file when a pattern matches its type, a text when a pattern matches
    its type or ``text/plain`` (its text goes into the prompt)."""
    patterns = list(accepts)
    if any(mime_matches(attachment.mime, p) for p in patterns):
        return True
    return attachment.kind == "text" and any(mime_matches("text/plain", p) for p in patterns)


@dataclass(frozen=True)
class Attachment:
    """One attachment of a user message, as a model is given it.

    ``data`` is the content (UTF-8 for a text kind); ``width`` and ``height``
    the size of an image in pixels; ``note`` what the conversion did, said to
    the user and the model (``"downscaled from 4000x3000 px"``, ``"the first
    200 of 10,000 rows"``). Build one with :func:`nbstream.attach` (from a
    figure, an image, a table, a file...) or :meth:`from_text` /
    :meth:`from_bytes`.
    """

    name: str
    mime: str
    data: bytes = field(repr=False)
    width: int | None = None
    height: int | None = None
    note: str = ""
    #: a hash of the content (sha256, hex): the same content is stored once in a file
    digest: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Attachment name must be a non-empty str, got {self.name!r}")
        if not isinstance(self.mime, str) or "/" not in self.mime:
            raise TypeError(f"Attachment mime must be a MIME type such as 'image/png', "
                            f"got {self.mime!r}")
        if not isinstance(self.data, bytes):
            raise TypeError(f"Attachment data must be bytes, got {type(self.data).__name__}")
        object.__setattr__(self, "mime", self.mime.lower())
        object.__setattr__(self, "digest", hashlib.sha256(self.data).hexdigest())
        if self.kind == "text":
            try:
                self.data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"attachment {self.name!r} ({self.mime}) is not UTF-8 text: "
                                 f"{exc}") from None

    @classmethod
    def from_text(cls, text: str, name: str = "text.txt", mime: str = "text/plain",
                  note: str = "") -> Attachment:
        """A text attachment (``mime`` a text type: ``text/markdown``, ``text/csv``...)."""
        if not isinstance(text, str):
            raise TypeError(f"Attachment.from_text takes a str, got {type(text).__name__}")
        if kind_of(mime) != "text":
            raise ValueError(f"Attachment.from_text: {mime!r} is not a text type")
        return cls(name, mime, text.encode("utf-8"), note=note)

    @classmethod
    def from_bytes(cls, data: bytes, name: str, mime: str) -> Attachment:
        """An attachment of ``data`` as it is (no conversion, no check of the content;
        :func:`nbstream.attach` checks and converts)."""
        return cls(name, mime, bytes(data))

    @property
    def kind(self) -> AttachmentKind:
        """``"image"``, ``"text"`` or ``"file"`` (see :func:`kind_of`)."""
        return kind_of(self.mime)

    @property
    def size(self) -> int:
        """Bytes of the content."""
        return len(self.data)

    @property
    def text(self) -> str:
        """The content of a text attachment (a :class:`TypeError` for the other kinds)."""
        if self.kind != "text":
            raise TypeError(f"attachment {self.name!r} is a {self.kind} ({self.mime}), not text")
        return self.data.decode("utf-8")

    def data_url(self) -> str:
        """The content as a ``data:`` URL (what OpenAI's ``image_url`` takes)."""
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    def describe(self) -> str:
        """One line: name, type, size (and pixels, and the note)."""
        parts = [self.mime]
        if self.width is not None and self.height is not None:
            parts.append(f"{self.width}×{self.height} px")
        parts.append(human_bytes(self.size))
        if self.note:
            parts.append(self.note)
        return f"{self.name} ({', '.join(parts)})"

    def __repr__(self) -> str:
        size = f", {self.width}x{self.height}" if self.width is not None else ""
        note = f", note={self.note!r}" if self.note else ""
        return f"Attachment({self.name!r}, {self.mime!r}{size}, {self.size:,} bytes{note})"


@dataclass(frozen=True)
class Preview:
    """What the view shows of an attachment: a small image (``data``, ``mime``,
    ``width``, ``height``), and for a text its start (``excerpt``). Made by
    :func:`nbstream.attachments.preview`."""

    data: bytes | None = None
    mime: str = ""
    width: int = 0
    height: int = 0
    excerpt: str | None = None


@dataclass(frozen=True)
class Attached:
    """One attachment of a user turn, with what the view is shown of it."""

    attachment: Attachment
    preview: Preview


def human_bytes(n: int) -> str:
    """``n`` bytes for people: ``"812 B"``, ``"23.4 KB"``, ``"8.0 MB"`` (powers of 1024)."""
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


# ------------------------------------------------------------ text in a prompt
_BLOCK = re.compile(
    r'\A<attachment name="([^"]*)" type="([^"]*)"(?: note="([^"]*)")?>\n(.*)\n</attachment>\Z',
    re.DOTALL)


def text_block(att: Attachment) -> str:
    """A text attachment as prompt text::

        <attachment name="sales.csv" type="text/csv" note="1,000 rows x 3 columns; ...">
        region,units
        ...
        </attachment>
    """
    note = f' note="{html.escape(att.note, quote=True)}"' if att.note else ""
    return (f'<attachment name="{html.escape(att.name, quote=True)}" '
            f'type="{html.escape(att.mime, quote=True)}"{note}>\n{att.text}\n</attachment>')


def parse_text_block(text: str) -> Attachment | None:
    """The attachment a :func:`text_block` holds, or None when ``text`` is not one."""
    m = _BLOCK.match(text)
    if m is None:
        return None
    name, mime, note, body = (html.unescape(m[1]), html.unescape(m[2]),
                              html.unescape(m[3] or ""), m[4])
    try:
        return Attachment(name, mime, body.encode("utf-8"), note=note)
    except (TypeError, ValueError):
        return None


# ------------------------------------------------------------------- limits
class AttachmentError(ValueError):
    """An attachment that cannot be sent; the message says which and why."""


class UnsupportedAttachment(AttachmentError):
    """The source cannot take this kind of attachment (an image for a text-only model,
    a PDF for a server that takes no files), or the content is not what it claims."""


class AttachmentTooLarge(AttachmentError):
    """One attachment is over :attr:`AttachmentLimits.max_bytes`."""


class TooManyAttachments(AttachmentError):
    """A message has more than :attr:`AttachmentLimits.max_count` attachments."""


class MessageTooLarge(AttachmentError):
    """A message's attachments together are over :attr:`AttachmentLimits.max_message_bytes`."""


class ChatTooLarge(AttachmentError):
    """The attachments of the whole conversation would pass
    :attr:`AttachmentLimits.max_chat_bytes`."""


@dataclass(frozen=True)
class AttachmentLimits:
    """What a widget takes in attachments, checked in the view and again in the kernel.

    Limits (an error each, see the module docstring): ``max_count`` attachments
    per message, ``max_bytes`` per attachment (as given to the model, after
    conversion), ``max_message_bytes`` per message, ``max_chat_bytes`` for the
    whole conversation (every branch; the same content counted once).

    Bounds of conversion (never an error: the result says what was cut):
    images larger than ``max_image_side`` pixels on their longer side are
    downscaled; text files and rendered tables longer than ``max_text_chars``
    are cut there; tables show at most ``max_table_rows`` rows and
    ``max_table_columns`` columns. The view receives a preview of each image at
    most ``preview_side`` pixels on its longer side (what a saved notebook
    keeps of it), never the image itself.
    """

    max_count: int = 10
    max_bytes: int = 8 << 20
    max_message_bytes: int = 16 << 20
    max_chat_bytes: int = 64 << 20
    max_image_side: int = 2048
    max_text_chars: int = 100_000
    max_table_rows: int = 200
    max_table_columns: int = 50
    preview_side: int = 384

    def __post_init__(self) -> None:
        for name in ("max_count", "max_bytes", "max_message_bytes", "max_chat_bytes",
                     "max_image_side", "max_text_chars", "max_table_rows",
                     "max_table_columns", "preview_side"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"AttachmentLimits({name}=...) must be an int, got "
                                f"{type(value).__name__} {value!r}")
            if value < 1:
                raise ValueError(f"AttachmentLimits({name}=...) must be positive, got {value}")
        if self.preview_side < 32:
            raise ValueError(f"AttachmentLimits(preview_side=...) must be at least 32 px, "
                             f"got {self.preview_side}")
