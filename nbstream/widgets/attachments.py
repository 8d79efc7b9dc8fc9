"""Attachments on the widget side: what a user turn carries, and what the view
may send (issue #21).

* :func:`prepare` pairs each :class:`~nbstream.core.attachment.Attachment` of a
  new user turn with its :class:`~nbstream.core.attachment.Preview` (a small
  image, or the start of a text): an :class:`~nbstream.core.attachment.Attached`.
  It runs on the thread that sends (the caller's cell, or the view's Send),
  never on the pump: decoding and downscaling an image must not hold up every
  widget's stream. How a turn's attachments travel to the view (its meta lists
  them, each preview once as a binary buffer under ``m<i>.a<k>``) is the
  wire's (``wire.py``, ``protocol.py``); the attachment itself stays in the
  kernel: a view never needs it, and a saved notebook holds only the previews.
* :func:`policy` is the synced ``attachment_policy`` trait: what the view
  checks before it sends (types the source takes, the limits), so the user
  hears at once; the kernel checks everything again.
* :func:`parse_upload` reads the files of a view's Send (their shape and their
  buffers already checked against the protocol by ``wire.parse_view_msg``):
  the view is not trusted, so each is checked and converted like a file on
  disk (:func:`nbstream.attachments.from_upload`).

Pure functions and immutable data: any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..attachments import attach_all, check_message, from_upload, preview, unique_names
from ..core.attachment import (
    Attached,
    Attachment,
    AttachmentLimits,
    ChatTooLarge,
    MessageTooLarge,
    TooManyAttachments,
    human_bytes,
)
from ..sources.base import Source
from .protocol import MAX_UPLOAD_BYTES, MAX_UPLOAD_COUNT, AttachmentPolicy
from .wire import ViewFile

__all__ = ["attached_for", "chat_bytes", "check_chat", "parse_upload", "policy", "prepare"]


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
        max_count=min(limits.max_count, MAX_UPLOAD_COUNT),
        max_bytes=limits.max_bytes,
        max_message_bytes=min(limits.max_message_bytes, MAX_UPLOAD_BYTES),
        max_chat_bytes=limits.max_chat_bytes,
        max_image_side=limits.max_image_side,
    )


def parse_upload(files: Sequence[ViewFile], limits: AttachmentLimits
                 ) -> tuple[Attachment, ...]:
    """The attachments of a view's Send, from its files (``wire.view_files``).

    Raises the :class:`~nbstream.core.attachment.AttachmentError` of the limit or
    the content the user should hear about (too many, too large, not an image or
    a text...).
    """
    if len(files) > limits.max_count:
        raise TooManyAttachments(f"{len(files)} attachments; a message takes at most "
                                 f"{limits.max_count}")
    total = sum(len(f.data) for f in files)
    if total > MAX_UPLOAD_BYTES:
        raise MessageTooLarge(f"the attachments come to {human_bytes(total)}, more than the "
                              f"{human_bytes(MAX_UPLOAD_BYTES)} one Send can carry")
    return unique_names([from_upload(f.name, f.data, limits) for f in files])
