"""Attachments from what is in the kernel: figures, images, tables, arrays, files, rich reprs.

:func:`attach` turns one object into an :class:`~nbstream.core.attachment.Attachment`
(what ``chat.send(text, attachments=[...])`` does with each item):

==============================  ===================================================
object                          becomes
==============================  ===================================================
``Attachment``                  itself
matplotlib ``Figure`` / ``Axes``  a PNG of the figure (``savefig``, tight bounding box);
(anything with ``savefig``)
PIL ``Image``                   PNG (JPEG / WebP when it was one), EXIF orientation
                                applied, metadata dropped
numpy array                     ``(h, w, 3|4)`` of ``uint8``: an image; 1-D or 2-D: a
                                table (CSV)
pandas / polars ``DataFrame``,  a table as CSV text (``max_table_rows`` rows,
``Series``                      ``max_table_columns`` columns, ``max_text_chars``
                                characters at most; the note says the shape and
                                what was left out)
``str`` / ``Path``              a file: an image, a text file (UTF-8; cut at
                                ``max_text_chars`` with the cut said), or another
                                file kept as bytes (a PDF...: only a source that
                                takes its type takes it)
``bytes``, a binary file object  an image (PNG, JPEG, GIF, WebP: found by their first
                                bytes); other bytes need ``name=`` and ``mime=``
anything else                   its rich repr, as IPython shows it:
                                ``_repr_mimebundle_``, ``_repr_png_``, ``_repr_jpeg_``,
                                ``_repr_svg_``, ``_repr_markdown_``, ``_repr_latex_``,
                                ``_repr_json_``, ``_repr_html_`` (the images first
                                when the source takes images, the texts first
                                otherwise); an object with none is refused
==============================  ===================================================

Images larger than ``max_image_side`` pixels on their longer side are
downscaled before they are sent (the note says from what size). Image and
file contents are hostile input: images are decoded (Pillow) before they are
taken, a file claiming to be text must be UTF-8, and names lose any folder
part and control characters.

:func:`from_upload` does the same for what the view sends (a pasted or
dropped file): nothing it claims is trusted (the type is found from the
bytes and the name); :func:`check_message` checks a message's attachments
against a widget's :class:`~nbstream.core.attachment.AttachmentLimits` and
what its source takes; :func:`preview` makes what the view shows of one
(a small image, or the start of a text).

Pure functions (Pillow, pandas, polars, numpy and matplotlib imported only
when an object of theirs is given): any thread; converting runs on the
thread that sends (the caller's cell, or the view's send).
"""

from __future__ import annotations

import base64
import codecs
import io
import mimetypes
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .checks import short
from .core.attachment import (
    RASTER_TYPES,
    Attachment,
    AttachmentLimits,
    AttachmentTooLarge,
    MessageTooLarge,
    Preview,
    TooManyAttachments,
    UnsupportedAttachment,
    human_bytes,
    kind_of,
    takes,
)

__all__ = [
    "Attachment",
    "AttachmentLimits",
    "Preview",
    "attach",
    "attach_all",
    "check_message",
    "clean_name",
    "from_upload",
    "preview",
]

#: Pillow refuses images above this many pixels before decoding them (a decompression bomb)
MAX_PIXELS = 64_000_000
#: characters of a text attachment the view receives (its excerpt)
EXCERPT_CHARS = 2000
#: a preview above this many bytes is made a JPEG (then lower quality) instead
PREVIEW_PNG_BYTES = 64 * 1024
PREVIEW_MAX_BYTES = 96 * 1024
#: the longest name kept (characters)
MAX_NAME = 160
PILLOW_HINT = "pip install pillow"

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
#: file types mimetypes does not know, by extension
_EXTRA_TYPES = {
    ".ipynb": "application/x-ipynb+json", ".yaml": "application/yaml",
    ".yml": "application/yaml", ".toml": "application/toml", ".log": "text/plain",
    ".r": "text/x-r", ".jl": "text/x-julia", ".rs": "text/x-rust", ".ts": "text/x-typescript",
    ".tsx": "text/x-typescript", ".jsx": "text/javascript", ".go": "text/x-go",
    ".ini": "text/plain", ".cfg": "text/plain", ".rst": "text/x-rst",
}
_PIL_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp",
                "GIF": "image/gif", "MPO": "image/jpeg"}
_EXT = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "image/gif": ".gif"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


# -------------------------------------------------------------------- API
def attach(
    obj: Any,
    *,
    name: str | None = None,
    mime: str | None = None,
    limits: AttachmentLimits | None = None,
    prefer_images: bool = True,
) -> Attachment:
    """``obj`` as an :class:`~nbstream.core.attachment.Attachment` (see the module
    docstring for what each kind of object becomes).

    ``name`` names it (default: the file's name, or ``figure.png``, ``table.csv``...);
    ``mime`` says what a ``str`` or ``bytes`` holds (``attach("a, b", mime="text/csv",
    name="x.csv")``: a ``str`` with a ``mime`` is content, not a path). ``limits``
    bounds the conversion (image side, text length, table size; default
    :class:`~nbstream.core.attachment.AttachmentLimits`). ``prefer_images``: for an
    object tried by its rich repr, whether an image form goes before a text form.

    Raises :class:`TypeError` for an object that has no image, text or file form,
    :class:`FileNotFoundError` for a path that does not exist, and
    :class:`~nbstream.core.attachment.AttachmentError` (a :class:`ValueError`) for a
    content that is not what it claims (an image Pillow cannot read, a text that is
    not UTF-8) or too large to read.
    """
    lim = limits if limits is not None else AttachmentLimits()
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise TypeError(f"attach(name=...) must be a non-empty str, got {short(name)}")
    if mime is not None and (not isinstance(mime, str) or "/" not in mime):
        raise TypeError(f"attach(mime=...) must be a MIME type such as 'text/csv', got "
                        f"{short(mime)}")
    got = _convert(obj, name, mime.lower() if mime else None, lim, prefer_images)
    if name is not None and got.name != clean_name(name):
        got = _renamed(got, clean_name(name))
    return got


def attach_all(items: object, *, limits: AttachmentLimits | None = None,
               accepts: Iterable[str] = ("*/*",), where: str = "send") -> tuple[Attachment, ...]:
    """Every item of ``items`` (a list, or one object) converted with :func:`attach`;
    names made unique within the message (``figure.png``, ``figure-2.png``). The
    error of a bad item names ``where(attachments=...)`` and its position."""
    if items is None:
        return ()
    listed: list[Any] = list(items) if isinstance(items, (list, tuple)) else [items]
    # (one object otherwise: a path is one file, not a list of characters)
    patterns = list(accepts)
    images = any(p in ("*", "*/*") or p.lower().startswith("image/") for p in patterns)
    out: list[Attachment] = []
    for i, item in enumerate(listed):
        try:
            out.append(attach(item, limits=limits, prefer_images=images))
        except (TypeError, ValueError, OSError) as exc:
            at = f"{where}(attachments=...)" + (f": item {i}" if len(listed) > 1 else "")
            try:
                named = type(exc)(f"{at}: {exc}")
            except Exception:  # an error type that takes other arguments
                raise exc from None
            raise named from exc
    return unique_names(out)


def unique_names(attachments: Sequence[Attachment]) -> tuple[Attachment, ...]:
    """``attachments`` with names made unique (``a.png``, ``a-2.png``), in order."""
    seen: set[str] = set()
    out: list[Attachment] = []
    for a in attachments:
        name = a.name
        stem, dot, ext = name.rpartition(".")
        if not dot or not stem:
            stem, ext = name, ""
        n = 1
        while name.lower() in seen:
            n += 1
            name = f"{stem}-{n}.{ext}" if ext else f"{stem}-{n}"
        seen.add(name.lower())
        out.append(a if name == a.name else _renamed(a, name))
    return tuple(out)


def check_message(attachments: Sequence[Attachment], limits: AttachmentLimits,
                  accepts: Iterable[str], label: str, where: str = "send") -> None:
    """Raise when ``attachments`` break ``limits`` (count, bytes per attachment, bytes
    per message) or when a source that takes ``accepts`` (named ``label``) cannot take
    one of them; each with its own error (see :mod:`nbstream.core.attachment`)."""
    if len(attachments) > limits.max_count:
        raise TooManyAttachments(f"{where}(attachments=...): {len(attachments)} attachments; a "
                                 f"message takes at most {limits.max_count} "
                                 "(AttachmentLimits.max_count)")
    total = 0
    patterns = list(accepts)
    for a in attachments:
        if a.size > limits.max_bytes:
            raise AttachmentTooLarge(f"{where}(attachments=...): {a.name!r} is "
                                     f"{human_bytes(a.size)}; an attachment takes at most "
                                     f"{human_bytes(limits.max_bytes)} "
                                     "(AttachmentLimits.max_bytes)")
        total += a.size
        if not takes(patterns, a):
            raise UnsupportedAttachment(
                f"{where}(attachments=...): {label} {_refusal(a, patterns)}")
    if total > limits.max_message_bytes:
        raise MessageTooLarge(f"{where}(attachments=...): the attachments come to "
                              f"{human_bytes(total)}; a message takes at most "
                              f"{human_bytes(limits.max_message_bytes)} "
                              "(AttachmentLimits.max_message_bytes)")


def _refusal(a: Attachment, accepts: list[str]) -> str:
    what = {"image": "images", "file": f"{a.mime} files", "text": "text"}[a.kind]
    takes_now = ", ".join(sorted(accepts)) or "nothing"
    hint = ""
    if a.kind == "image":
        hint = (": use a vision model (TransformersSource with a processor, OpenAISource on a "
                "vision server)")
    elif a.kind == "file":
        hint = (": convert it to text first, or use a source that takes it (e.g. "
                "OpenAISource(..., accepts=...) for a server that reads it)")
    return (f"takes no {what} (it takes {takes_now}); {a.name!r} ({a.mime}) cannot be "
            f"sent{hint}")


# ------------------------------------------------------------------ uploads
def from_upload(name: object, data: bytes, limits: AttachmentLimits) -> Attachment:
    """A file the view sent (pasted, dropped or picked): its type is found from its
    bytes and its name, never taken from the view; checked and converted like a file
    on disk. Raises :class:`~nbstream.core.attachment.AttachmentError` when it is not
    an image, a UTF-8 text or a file of a known type, or is too large."""
    clean = clean_name(name if isinstance(name, str) else "")
    if len(data) > limits.max_bytes and _sniff_image(data) is None:
        raise AttachmentTooLarge(f"{clean!r} is {human_bytes(len(data))}; an attachment takes "
                                 f"at most {human_bytes(limits.max_bytes)}")
    return _from_file_bytes(data, clean, limits, size=len(data))


def clean_name(name: str) -> str:
    """A file name safe to show and to hand a server: its last path part, no control
    or bidirectional-override characters, at most :data:`MAX_NAME` characters."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = _CONTROL.sub("", name).strip().lstrip(".") or "attachment"
    if len(name) > MAX_NAME:
        _, dot, ext = name.rpartition(".")
        ext = ext[:12] if dot and len(ext) <= 12 else ""
        name = name[: MAX_NAME - len(ext) - 2] + "…" + ("." + ext if ext else "")
    return name


# ------------------------------------------------------------------ previews
def preview(att: Attachment, side: int = 384) -> Preview:
    """The view's preview of ``att``: an image at most ``side`` pixels on its longer
    side (PNG, or JPEG when the PNG would be large; SVG markup as it is, which the
    view shows as an image only), or the first :data:`EXCERPT_CHARS` characters of a
    text. A file has none (the view shows its name, type and size)."""
    if att.mime == "image/svg+xml":
        text = att.text
        data = att.data if att.size <= PREVIEW_MAX_BYTES else None
        return Preview(data, "image/svg+xml" if data else "", att.width or 0, att.height or 0,
                       excerpt=text[:EXCERPT_CHARS])
    if att.kind == "text":
        return Preview(excerpt=att.text[:EXCERPT_CHARS])
    if att.kind != "image":
        return Preview()
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - depends on the environment
        if att.size <= PREVIEW_MAX_BYTES:
            return Preview(att.data, att.mime, att.width or 0, att.height or 0)
        return Preview()
    with Image.open(io.BytesIO(att.data)) as im:
        im.seek(0)
        small = im.convert("RGBA") if im.mode in ("P", "LA", "PA") else im.copy()
    if max(small.size) > side:
        small.thumbnail((side, side), Image.Resampling.LANCZOS)
    if small.mode not in ("RGB", "RGBA", "L"):
        small = small.convert("RGBA")
    data, mime = _encode(small, "PNG"), "image/png"
    if len(data) > PREVIEW_PNG_BYTES:
        flat = _flatten(small)
        quality = 82
        data, mime = _encode(flat, "JPEG", quality=quality), "image/jpeg"
        while len(data) > PREVIEW_MAX_BYTES and quality > 40:
            quality -= 14
            data = _encode(flat, "JPEG", quality=quality)
    return Preview(data, mime, small.size[0], small.size[1])


# ---------------------------------------------------------------- conversion
def _convert(obj: Any, name: str | None, mime: str | None, lim: AttachmentLimits,
             prefer_images: bool) -> Attachment:
    if isinstance(obj, Attachment):
        return obj
    if isinstance(obj, str) and mime is not None:  # content, with its type
        return _from_content(obj.encode("utf-8"), name or "text" + _ext_for(mime), mime, lim)
    if isinstance(obj, (str, os.PathLike)):
        return _from_path(obj, lim)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return _from_bytes(bytes(obj), name, mime, lim)
    if _is_file_object(obj):
        return _from_file_object(obj, name, mime, lim)
    module = type(obj).__module__.split(".")[0]
    if module == "matplotlib" and not callable(getattr(obj, "savefig", None)):
        fig = getattr(obj, "figure", None)  # an Axes
        if fig is not None and callable(getattr(fig, "savefig", None)):
            obj = fig
    if callable(getattr(obj, "savefig", None)) and module in ("matplotlib", "seaborn"):
        return _from_figure(obj, name, lim)
    if module == "PIL" and _is_pil_image(obj):
        return _from_pil(obj, name or "image", lim, note="")
    if module == "pandas" and _is_pandas(obj):
        return _from_pandas(obj, name, lim)
    if module == "polars" and _is_polars(obj):
        return _from_polars(obj, name, lim)
    if module == "numpy" and type(obj).__name__ == "ndarray":
        return _from_array(obj, name, lim)
    found = _from_rich_repr(obj, name, lim, prefer_images)
    if found is not None:
        return found
    if callable(getattr(obj, "savefig", None)):  # a figure of another library
        return _from_figure(obj, name, lim)
    raise TypeError(
        f"cannot attach {type(obj).__name__} {short(obj)}: it is neither a figure, an image, "
        "a table, an array nor a file, and has no rich repr (_repr_png_, _repr_markdown_, "
        "_repr_html_...); attach a text of it with attach(str(x), mime='text/plain', "
        "name='x.txt')")


def _renamed(a: Attachment, name: str) -> Attachment:
    return Attachment(name, a.mime, a.data, a.width, a.height, a.note)


def _ext_for(mime: str) -> str:
    return _EXT.get(mime) or mimetypes.guess_extension(mime) or ""


def _from_path(path: str | os.PathLike[str], lim: AttachmentLimits) -> Attachment:
    p = Path(os.fspath(path)).expanduser()
    if not p.exists():
        hint = ("; a str in attachments= is a file path: to attach a text, use "
                "nbstream.attach(text, mime='text/plain', name='notes.txt')"
                if isinstance(path, str) else "")
        raise FileNotFoundError(f"no such file: {os.fspath(path)!r}{hint}")
    if p.is_dir():
        raise IsADirectoryError(f"{os.fspath(path)!r} is a folder; attach its files one by one")
    size = p.stat().st_size
    name = clean_name(p.name)
    mime = _type_of_name(name)
    if mime is not None and kind_of(mime) == "text":
        # read only what can be kept (a 1 GB log costs its first characters)
        with p.open("rb") as f:
            head = f.read(lim.max_text_chars * 4 + 4)
        return _text(head, name, mime, lim, size=size)
    with p.open("rb") as f:
        data = f.read(max(lim.max_bytes, _image_read_limit(lim)) + 1)
    return _from_file_bytes(data, name, lim, size=size)


def _image_read_limit(lim: AttachmentLimits) -> int:
    # an image larger than max_bytes may still be sent once downscaled: read more of it
    return 4 * lim.max_bytes


def _from_file_bytes(data: bytes, name: str, lim: AttachmentLimits, *, size: int) -> Attachment:
    """A file's content (the first bytes of a file of ``size`` bytes)."""
    sniffed = _sniff_image(data)
    named = _type_of_name(name)
    if sniffed is not None:
        if size > len(data):
            raise AttachmentTooLarge(f"{name!r} is {human_bytes(size)}; an image file takes "
                                     f"at most {human_bytes(_image_read_limit(lim))}")
        return _image_bytes(data, name, lim)
    if named is not None and kind_of(named) == "image":
        raise UnsupportedAttachment(f"{name!r} is named as an image ({named}) but is not a "
                                    "PNG, JPEG, GIF or WebP image")
    if named is not None and kind_of(named) == "text":
        return _text(data, name, named, lim, size=size)
    if named is None or named == "application/octet-stream":
        text = _as_text(data, complete=size <= len(data))
        if text is not None:
            return _text(data, name, "text/plain", lim, size=size)
    if size > lim.max_bytes:
        raise AttachmentTooLarge(f"{name!r} is {human_bytes(size)}; an attachment takes at "
                                 f"most {human_bytes(lim.max_bytes)}")
    return Attachment(name, named or "application/octet-stream", data[: lim.max_bytes])


def _type_of_name(name: str) -> str | None:
    ext = os.path.splitext(name)[1].lower()
    if ext in _EXTRA_TYPES:
        return _EXTRA_TYPES[ext]
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed.lower() if guessed else None


def _sniff_image(data: bytes) -> str | None:
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _as_text(data: bytes, complete: bool = True) -> str | None:
    """``data`` as UTF-8 text, or None when it is binary (not UTF-8, or NUL bytes).
    ``complete``: ``data`` is the whole content (else the start of a longer one: a
    character cut at its end is dropped)."""
    if b"\x00" in data:
        return None
    decoder = codecs.getincrementaldecoder("utf-8-sig")("strict")
    try:
        return str(decoder.decode(data, final=complete))
    except UnicodeDecodeError:
        return None


def _text(data: bytes, name: str, mime: str, lim: AttachmentLimits, *, size: int,
          note: str = "") -> Attachment:
    text = _as_text(data, complete=size <= len(data))
    if text is None:
        raise UnsupportedAttachment(f"{name!r} ({mime}) is not UTF-8 text")
    notes = [note] if note else []
    if len(text) > lim.max_text_chars or size > len(data):
        whole = (f"a {human_bytes(size)} file" if size > len(data)
                 else f"{len(text):,} characters")
        text = text[: lim.max_text_chars]
        notes.append(f"the first {len(text):,} characters of {whole}")
    return Attachment(name, mime, text.encode("utf-8"), note="; ".join(notes))


def _from_content(data: bytes, name: str, mime: str, lim: AttachmentLimits) -> Attachment:
    """Content given with its type (``attach(x, mime=...)``)."""
    kind = kind_of(mime)
    if kind == "text":
        return _text(data, clean_name(name), mime, lim, size=len(data))
    if kind == "image":
        return _image_bytes(data, clean_name(name), lim)
    if len(data) > lim.max_bytes:
        raise AttachmentTooLarge(f"{name!r} is {human_bytes(len(data))}; an attachment takes at "
                                 f"most {human_bytes(lim.max_bytes)}")
    return Attachment(clean_name(name), mime, data)


def _from_bytes(data: bytes, name: str | None, mime: str | None,
                lim: AttachmentLimits) -> Attachment:
    if mime is not None:
        default = {"image": "image", "text": "text"}.get(kind_of(mime), "file")
        return _from_content(data, name or default + _ext_for(mime), mime, lim)
    sniffed = _sniff_image(data)
    if sniffed is not None:
        return _image_bytes(data, clean_name(name or "image" + _EXT[sniffed]), lim)
    if name is not None:
        return _from_file_bytes(data, clean_name(name), lim, size=len(data))
    raise TypeError("bytes that are not a PNG, JPEG, GIF or WebP image need a name and a type: "
                    "attach(data, name='report.pdf', mime='application/pdf')")


def _is_file_object(obj: object) -> bool:
    return callable(getattr(obj, "read", None)) and not isinstance(obj, type)


def _from_file_object(f: Any, name: str | None, mime: str | None,
                      lim: AttachmentLimits) -> Attachment:
    raw = f.read(max(lim.max_bytes, _image_read_limit(lim)) + 1)
    given = name or os.path.basename(str(getattr(f, "name", "") or "")) or None
    if isinstance(raw, str):  # a text file object
        return _from_content(raw.encode("utf-8"), given or "text.txt", mime or
                             (_type_of_name(given) if given else None) or "text/plain", lim)
    data = bytes(raw)
    if mime is not None:
        return _from_content(data, given or "attachment" + _ext_for(mime), mime, lim)
    if given is not None:
        return _from_file_bytes(data, clean_name(given), lim, size=len(data))
    return _from_bytes(data, None, None, lim)


# ------------------------------------------------------------------- images
def _pil() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise UnsupportedAttachment(f"attaching images needs Pillow: {PILLOW_HINT}") from None
    return Image


def _image_bytes(data: bytes, name: str, lim: AttachmentLimits) -> Attachment:
    """An image file's bytes: decoded (so a broken or hostile file is refused here),
    downscaled when needed; the bytes are kept as they are when nothing had to change."""
    Image = _pil()
    try:
        try:
            im = Image.open(io.BytesIO(data))
        except Image.DecompressionBombError as exc:
            raise AttachmentTooLarge(f"{name!r} is too large an image to decode: {exc}") from None
        fmt = str(im.format or "")
        w, h = im.size
        if w * h > MAX_PIXELS:
            raise AttachmentTooLarge(f"{name!r} is {w}×{h} px ({w * h / 1e6:.0f} megapixels); "
                                     f"an image takes at most {MAX_PIXELS / 1e6:.0f}")
        im.load()
    except AttachmentTooLarge:
        raise
    except Exception as exc:  # Pillow's errors for broken, truncated or bomb images
        raise UnsupportedAttachment(f"{name!r} is not an image Pillow can read: {exc}") from None
    mime = _PIL_FORMATS.get(fmt)
    animated = bool(getattr(im, "is_animated", False))
    metadata = any(k in im.info for k in ("exif", "xmp", "XML:com.adobe.xmp", "comment"))
    oriented = _orientation(im) not in (None, 1)
    keep = (mime in RASTER_TYPES and mime != "image/gif" and max(w, h) <= lim.max_image_side
            and not metadata and not oriented and not animated)
    if keep and mime is not None:
        return Attachment(_with_ext(name, mime), mime, data, w, h)
    note = "the first frame of an animation" if animated else ""
    return _from_pil(im, name, lim, note=note, source_format=fmt)


def _orientation(im: Any) -> int | None:
    try:
        value = im.getexif().get(0x0112)
    except Exception:
        return None
    return int(value) if isinstance(value, int) else None


def _from_pil(im: Any, name: str, lim: AttachmentLimits, *, note: str,
              source_format: str = "") -> Attachment:
    from PIL import ImageOps

    fmt = source_format or str(getattr(im, "format", "") or "")
    if getattr(im, "is_animated", False):
        im.seek(0)
    w0, h0 = im.size
    if w0 * h0 > MAX_PIXELS:
        raise AttachmentTooLarge(f"the image is {w0}×{h0} px; an image takes at most "
                                 f"{MAX_PIXELS / 1e6:.0f} megapixels")
    im = ImageOps.exif_transpose(im) or im
    w0, h0 = im.size
    notes = [note] if note else []
    if max(w0, h0) > lim.max_image_side:
        im = im.copy()
        im.thumbnail((lim.max_image_side, lim.max_image_side), _pil().Resampling.LANCZOS)
        notes.append(f"downscaled from {w0}×{h0} px")
    if fmt in ("JPEG", "MPO") and im.mode in ("RGB", "L", "CMYK"):
        data, mime = _encode(im.convert("RGB") if im.mode == "CMYK" else im, "JPEG",
                             quality=90), "image/jpeg"
    elif fmt == "WEBP":
        data, mime = _encode(im, "WEBP", quality=90), "image/webp"
    else:
        if im.mode not in ("RGB", "RGBA", "L", "LA", "P", "1", "I;16", "I"):
            im = im.convert("RGBA")
        if im.mode in ("I;16", "I"):
            im = im.convert("L")
        data, mime = _encode(im, "PNG"), "image/png"
    return Attachment(_with_ext(clean_name(name), mime), mime, data, im.size[0], im.size[1],
                      note="; ".join(notes))


def _with_ext(name: str, mime: str) -> str:
    ext = _EXT[mime]
    stem, dot, old = name.rpartition(".")
    if dot and stem and ("." + old.lower()) in (ext, ".jpeg", ".jpe") and mime == "image/jpeg":
        return name
    if dot and stem and "." + old.lower() == ext:
        return name
    if dot and stem and old.lower() in ("png", "jpg", "jpeg", "gif", "webp", "bmp", "tif",
                                        "tiff"):
        return f"{stem}{ext}"
    return f"{name}{ext}"


def _encode(im: Any, fmt: str, **options: Any) -> bytes:
    buf = io.BytesIO()
    if fmt == "PNG":
        options.setdefault("optimize", True)
    im.save(buf, format=fmt, **options)
    return buf.getvalue()


def _flatten(im: Any) -> Any:
    """``im`` without transparency (on white), as RGB: what JPEG stores."""
    Image = _pil()
    if im.mode in ("RGBA", "LA"):
        back = Image.new("RGB", im.size, (255, 255, 255))
        back.paste(im, mask=im.getchannel("A"))
        return back
    return im.convert("RGB") if im.mode != "RGB" else im


def _is_pil_image(obj: object) -> bool:
    Image = sys.modules.get("PIL.Image")
    return Image is not None and isinstance(obj, Image.Image)


def _from_figure(fig: Any, name: str | None, lim: AttachmentLimits) -> Attachment:
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", bbox_inches="tight")
    except TypeError:
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    return _image_bytes(buf.getvalue(), clean_name(name or "figure.png"), lim)


# ------------------------------------------------------------------- tables
def _is_pandas(obj: object) -> bool:
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, (pd.DataFrame, pd.Series))


def _is_polars(obj: object) -> bool:
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(obj, (pl.DataFrame, pl.Series))


def _table_note(rows: int, cols: int, shown_rows: int, shown_cols: int, cut: bool) -> str:
    note = f"{rows:,} {'row' if rows == 1 else 'rows'} × {cols:,} " \
        f"{'column' if cols == 1 else 'columns'}"
    left: list[str] = []
    if shown_rows < rows:
        left.append(f"the first {shown_rows:,} rows")
    if shown_cols < cols:
        left.append(f"the first {shown_cols:,} columns")
    if left:
        note += "; " + " and ".join(left) + " shown"
    if cut:
        note += "; cut at the character limit"
    return note


def _bounded_csv(text: str, lim: AttachmentLimits) -> tuple[str, bool]:
    if len(text) <= lim.max_text_chars:
        return text, False
    cut = text.rfind("\n", 0, lim.max_text_chars)
    return text[: cut + 1 if cut > 0 else lim.max_text_chars], True


def _from_pandas(obj: Any, name: str | None, lim: AttachmentLimits) -> Attachment:
    import pandas as pd

    df = obj.to_frame() if isinstance(obj, pd.Series) else obj
    rows, cols = df.shape
    shown = df.iloc[: lim.max_table_rows, : lim.max_table_columns]
    default_index = isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and \
        df.index.step == 1 and df.index.name is None
    text, cut = _bounded_csv(shown.to_csv(index=not default_index), lim)
    note = _table_note(rows, cols, shown.shape[0], shown.shape[1], cut)
    return Attachment(clean_name(name or "table.csv"), "text/csv", text.encode("utf-8"),
                      note=note)


def _from_polars(obj: Any, name: str | None, lim: AttachmentLimits) -> Attachment:
    import polars as pl

    df = obj.to_frame() if isinstance(obj, pl.Series) else obj
    rows, cols = df.shape
    shown = df.select(df.columns[: lim.max_table_columns]).head(lim.max_table_rows)
    text, cut = _bounded_csv(shown.write_csv(), lim)
    note = _table_note(rows, cols, shown.shape[0], shown.shape[1], cut)
    return Attachment(clean_name(name or "table.csv"), "text/csv", text.encode("utf-8"),
                      note=note)


def _from_array(arr: Any, name: str | None, lim: AttachmentLimits) -> Attachment:
    import numpy as np

    if arr.ndim == 3 and arr.shape[-1] in (3, 4) and arr.dtype == np.uint8:
        Image = _pil()
        im = Image.fromarray(arr, "RGBA" if arr.shape[-1] == 4 else "RGB")
        return _from_pil(im, name or "image.png", lim, note="")
    if arr.ndim not in (1, 2):
        raise TypeError(f"cannot attach an array of shape {arr.shape} ({arr.dtype}): an array "
                        "is a table (1-D or 2-D) or an image (height × width × 3 or 4, uint8); "
                        "for an image of another type, make a PIL image of it first")
    table = arr.reshape(-1, 1) if arr.ndim == 1 else arr
    rows, cols = table.shape
    shown = table[: lim.max_table_rows, : lim.max_table_columns]
    buf = io.StringIO()
    fmt = "%s" if shown.dtype.kind in "OUSb" else ("%d" if shown.dtype.kind in "iu" else "%.6g")
    np.savetxt(buf, shown, delimiter=",", fmt=fmt)
    text, cut = _bounded_csv(buf.getvalue(), lim)
    note = _table_note(rows, cols, shown.shape[0], shown.shape[1], cut)
    note = f"an array of shape {tuple(arr.shape)}, {arr.dtype}: {note}"
    return Attachment(clean_name(name or "array.csv"), "text/csv", text.encode("utf-8"),
                      note=note)


# --------------------------------------------------------------- rich reprs
#: (method, MIME type) in the order an image-taking source prefers them
_REPRS_IMAGES = (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"),
                 ("_repr_svg_", "image/svg+xml"), ("_repr_markdown_", "text/markdown"),
                 ("_repr_latex_", "text/x-latex"), ("_repr_json_", "application/json"),
                 ("_repr_html_", "text/html"))
_REPRS_TEXT = (("_repr_markdown_", "text/markdown"), ("_repr_latex_", "text/x-latex"),
               ("_repr_json_", "application/json"), ("_repr_svg_", "image/svg+xml"),
               ("_repr_html_", "text/html"), ("_repr_png_", "image/png"),
               ("_repr_jpeg_", "image/jpeg"))
_NAMES = {"image/png": "image.png", "image/jpeg": "image.jpg", "image/svg+xml": "image.svg",
          "text/markdown": "text.md", "text/x-latex": "text.tex",
          "application/json": "data.json", "text/html": "page.html"}


def _from_rich_repr(obj: Any, name: str | None, lim: AttachmentLimits,
                    prefer_images: bool) -> Attachment | None:
    order = _REPRS_IMAGES if prefer_images else _REPRS_TEXT
    bundle: dict[str, Any] = {}
    method = getattr(obj, "_repr_mimebundle_", None)
    if callable(method):
        try:
            got = method(include=None, exclude=None)
        except TypeError:
            got = method()
        if isinstance(got, tuple):
            got = got[0]
        if isinstance(got, dict):
            bundle = got
    for attr, mime in order:
        value = bundle.get(mime)
        if value is None:
            fn = getattr(obj, attr, None)
            if not callable(fn):
                continue
            value = fn()
            if isinstance(value, tuple):  # (data, metadata)
                value = value[0]
        if value is None:
            continue
        title = name or _NAMES[mime]
        if kind_of(mime) == "image":
            data = value if isinstance(value, bytes) else base64.b64decode(str(value))
            return _image_bytes(data, clean_name(title), lim)
        if mime == "application/json" and not isinstance(value, str):
            import json

            value = json.dumps(value, indent=1, ensure_ascii=False, default=str)
        if not isinstance(value, str):
            continue
        data = value.encode("utf-8")
        return _text(data, clean_name(title), mime, lim, size=len(data))
    return None
