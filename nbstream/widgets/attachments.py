"""Attachments on the widget side: what a user turn carries to the view, and what
the view sends (issue #21).

* :func:`prepare` pairs each :class:`~nbstream.core.attachment.Attachment` of a
  new user turn with its :class:`~nbstream.attachments.Preview` (a small image,
  or the start of a text). It runs on the thread that sends (the caller's
  cell, or the view's Send), never on the pump: decoding and downscaling an
  image must not hold up every widget's stream.
* On the wire (see ``protocol.py``): the turn's meta lists its attachments
  (:func:`attachment_metas`: name, type, size, pixels, note, a text's excerpt,
  and where the preview is); each image preview travels once under its own key
  ``m<i>.a<k>`` as a binary buffer (:func:`preview_buffers`), in the update
  that carries the meta, never again (a turn's meta sent again carries no
  buffer), and in the state a view created later or a saved notebook gets.
  The attachment itself stays in the kernel: a view never needs it, and a
  saved notebook holds only the previews.
* :func:`policy` is the synced ``attachment_policy`` trait: what the view
  checks before it sends (types the source takes, the limits), so the user
  hears at once; the kernel checks everything again (:func:`parse_upload`).
* :func:`parse_upload` reads a view's ``send`` with attachments (descriptors and
  binary buffers): the view is not trusted, so each buffer is checked and
  converted like a file on disk (:func:`nbstream.attachments.from_upload`).

Pure functions and immutable data: any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..attachments import Preview, attach_all, check_message, from_upload, preview, unique_names
from ..core.attachment import (
    Attachment,
    AttachmentLimits,
    AttachmentTooLarge,
    ChatTooLarge,
    MessageTooLarge,
    TooManyAttachments,
    human_bytes,
)
from ..sources.base import Source
from .protocol import AttachmentMeta, AttachmentPolicy, PreviewMeta

__all__ = ["UPLOAD_BYTES", "Attached", "attached_for", "attachment_metas", "chat_bytes",
           "check_chat", "parse_upload", "policy", "prepare", "preview_buffers", "preview_key"]

#: the most bytes one Send from the view carries: Jupyter's server closes a websocket
#: whose message passes 10 MiB (tornado's ``websocket_max_message_size``)
UPLOAD_BYTES = 8 << 20
#: longest name the view may send (longer ones are refused)
MAX_UPLOAD_NAME = 1000


@dataclass(frozen=True)
class Attached:
    """One attachment of a user turn, with what the view is shown of it."""

    attachment: Attachment
    preview: Preview


def prepare(attachments: Sequence[Attachment], limits: AttachmentLimits) -> tuple[Attached, ...]:
    """Each attachment with its preview (the caller's thread: this decodes images)."""
    return tuple(Attached(a, preview(a, limits.preview_side)) for a in attachments)


def attached_for(attachments: object, sources: Sequence[Source], limits: AttachmentLimits,
                 where: str) -> tuple[Attached, ...]:
    """``attachments`` (what a user passed to ``send``) converted, checked against
    ``limits`` and what every one of ``sources`` takes, with their previews: the
    caller's thread; it raises before anything changes."""
    if attachments is None or (isinstance(attachments, (list, tuple)) and not attachments):
        return ()
    accepts = [s.accepts for s in sources]
    shared = frozenset.intersection(*accepts) if len(accepts) > 1 else accepts[0]
    got = attach_all(attachments, limits=limits, accepts=shared, where=where)
    for s in sources:
        check_message(got, limits, s.accepts, s.label, where)
    return prepare(got, limits)


def preview_key(turn_id: str, k: int) -> str:
    """The state key of the preview of attachment ``k`` (from 1) of message ``turn_id``."""
    return f"{turn_id}.a{k}"


def attachment_metas(turn_id: str, attached: Sequence[Attached]) -> list[AttachmentMeta]:
    """What a turn's meta says of its attachments."""
    out: list[AttachmentMeta] = []
    for k, item in enumerate(attached, start=1):
        a, p = item.attachment, item.preview
        meta = AttachmentMeta(name=a.name, mime=a.mime, size=a.size, kind=a.kind)
        if a.width is not None and a.height is not None:
            meta["width"], meta["height"] = a.width, a.height
        if a.note:
            meta["note"] = a.note
        if p.excerpt is not None:
            meta["excerpt"] = p.excerpt
        if p.data is not None:
            meta["preview"] = PreviewMeta(key=preview_key(turn_id, k), mime=p.mime,
                                          width=p.width, height=p.height)
        out.append(meta)
    return out


def preview_buffers(turn_id: str, attached: Sequence[Attached]) -> dict[str, bytes]:
    """The preview keys of a turn and their bytes (sent as binary buffers)."""
    return {preview_key(turn_id, k): item.preview.data
            for k, item in enumerate(attached, start=1) if item.preview.data is not None}


def chat_bytes(attachments: Iterable[Attachment]) -> int:
    """Bytes of ``attachments``, each content counted once (an edited question keeps
    its attachments: the same content in two branches)."""
    seen: dict[str, int] = {}
    for a in attachments:
        seen[a.digest] = a.size
    return sum(seen.values())


def check_chat(held: Iterable[Attachment], new: Sequence[Attachment],
               limits: AttachmentLimits, where: str = "send") -> None:
    """Raise :class:`~nbstream.core.attachment.ChatTooLarge` when ``new`` would take
    the conversation's attachments (``held``) past ``limits.max_chat_bytes``."""
    if not new:
        return
    held = list(held)
    before, after = chat_bytes(held), chat_bytes([*held, *new])
    if after > limits.max_chat_bytes:
        raise ChatTooLarge(f"{where}(attachments=...): the conversation holds "
                           f"{human_bytes(before)} of attachments; these "
                           f"{human_bytes(after - before)} would pass its limit of "
                           f"{human_bytes(limits.max_chat_bytes)} "
                           "(AttachmentLimits.max_chat_bytes); clear the chat, or start a new one")


def policy(limits: AttachmentLimits, accepts: Sequence[Iterable[str]]) -> AttachmentPolicy:
    """The ``attachment_policy`` trait: an attachment must match one pattern of each
    entry of ``accepts`` (one per source: a Compare asks each of them)."""
    return AttachmentPolicy(
        accepts=[sorted(a) for a in accepts],
        max_count=limits.max_count,
        max_bytes=limits.max_bytes,
        max_message_bytes=min(limits.max_message_bytes, UPLOAD_BYTES),
        max_chat_bytes=limits.max_chat_bytes,
        max_image_side=limits.max_image_side,
    )


class UploadRefused(ValueError):
    """A malformed upload from the view (not the user's doing: ignored, not shown)."""


def parse_upload(raw: object, buffers: Sequence[Any], limits: AttachmentLimits,
                 ) -> tuple[Attachment, ...]:
    """The attachments of a view's ``send`` (``raw``: its ``attachments`` field, a list
    of ``{"name", "size"}``; ``buffers``: their bytes, in order).

    Raises :class:`UploadRefused` for a message of the wrong shape, and the
    :class:`~nbstream.core.attachment.AttachmentError` of the limit or the content
    the user should hear about (too many, too large, not an image or a text...).
    """
    if raw is None:
        if buffers:
            raise UploadRefused("buffers without attachments")
        return ()
    if not isinstance(raw, list) or len(raw) != len(buffers):
        raise UploadRefused("attachments do not match the buffers")
    if len(raw) > limits.max_count:
        raise TooManyAttachments(f"{len(raw)} attachments; a message takes at most "
                                 f"{limits.max_count}")
    total = 0
    out: list[Attachment] = []
    for item, buf in zip(raw, buffers, strict=True):
        if not isinstance(item, dict):
            raise UploadRefused("an attachment that is not an object")
        name = item.get("name")
        if not isinstance(name, str) or not name or len(name) > MAX_UPLOAD_NAME:
            raise UploadRefused("an attachment without a usable name")
        data = bytes(memoryview(buf).cast("B"))
        total += len(data)
        if total > UPLOAD_BYTES:
            raise MessageTooLarge(f"the attachments come to more than "
                                  f"{human_bytes(UPLOAD_BYTES)}, what one Send can carry")
        if len(data) > max(limits.max_bytes, UPLOAD_BYTES):
            raise AttachmentTooLarge(f"{name!r} is {human_bytes(len(data))}")
        out.append(from_upload(name, data, limits))
    return unique_names(out)
