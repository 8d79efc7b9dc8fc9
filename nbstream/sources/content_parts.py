"""What each API makes of a user turn's attachments (see :mod:`nbstream.core.attachment`).

One function per shape, each tested on its own:

* :func:`~nbstream.core.attachment.text_block`: a text attachment (a file, a
  table rendered as CSV, an SVG's markup) as text in the prompt, in an
  ``<attachment>`` element that names it (defined with the contract type, so
  that a conversation's ``to_messages()`` export reads back).
* :func:`user_text`: a user turn as one text (its content, then its text
  attachments): what a source whose model takes text only is given.
* :func:`chat_content`: OpenAI ``/v1/chat/completions`` content parts: ``text``,
  ``image_url`` with a ``data:`` URL, ``file`` with ``file_data`` (a server that
  reads files, such as OpenAI's own for PDFs).
* :func:`responses_content`: the Responses API's ``input_text``,
  ``input_image`` and ``input_file`` items.

A message without attachments keeps a plain string content in every shape,
so requests without attachments are exactly as before. Pure functions: any
thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.attachment import Attachment, parse_text_block, text_block
from ..core.pieces import ChatMessage

__all__ = ["chat_content", "parse_text_block", "responses_content", "text_block", "user_text"]

def attachments_of(message: ChatMessage) -> Sequence[Attachment]:
    """The attachments of ``message`` (none for most)."""
    return message.get("attachments", ())


def user_text(message: ChatMessage) -> str:
    """A user turn as one text: its content, then each text attachment's
    :func:`text_block`, a blank line apart. Images and files are not text: a
    source that takes none refuses them before this is called."""
    blocks = [message["content"]]
    blocks += [text_block(a) for a in attachments_of(message) if a.kind == "text"]
    return "\n\n".join(b for b in blocks if b)


def chat_content(message: ChatMessage) -> str | list[dict[str, Any]]:
    """The ``content`` of ``message`` for ``/v1/chat/completions``: its text when it
    has no attachments, else content parts: the text, then per attachment an
    ``image_url`` (a ``data:`` URL), a ``text`` part (:func:`text_block`) or a
    ``file`` (``filename`` and ``file_data``, a ``data:`` URL)."""
    atts = attachments_of(message)
    if not atts:
        return message["content"]
    parts: list[dict[str, Any]] = []
    if message["content"]:
        parts.append({"type": "text", "text": message["content"]})
    for a in atts:
        if a.kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": a.data_url()}})
        elif a.kind == "text":
            parts.append({"type": "text", "text": text_block(a)})
        else:
            parts.append({"type": "file", "file": {"filename": a.name,
                                                   "file_data": a.data_url()}})
    return parts


def responses_content(message: ChatMessage) -> str | list[dict[str, Any]]:
    """The ``content`` of ``message`` as a Responses API input message: its text
    when it has no attachments, else ``input_text`` (the text, and each text
    attachment's :func:`text_block`), ``input_image`` (``image_url``: a ``data:``
    URL) and ``input_file`` (``filename`` and ``file_data``) items, in order."""
    atts = attachments_of(message)
    if not atts:
        return message["content"]
    items: list[dict[str, Any]] = []
    if message["content"]:
        items.append({"type": "input_text", "text": message["content"]})
    for a in atts:
        if a.kind == "image":
            items.append({"type": "input_image", "image_url": a.data_url(), "detail": "auto"})
        elif a.kind == "text":
            items.append({"type": "input_text", "text": text_block(a)})
        else:
            items.append({"type": "input_file", "filename": a.name, "file_data": a.data_url()})
    return items
