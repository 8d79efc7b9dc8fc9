"""ChatWidget: a multi-turn chat with an input box, on any source.

Only the chat's own rules live here (what a send starts, what the source
sees, regenerate); the pipeline is :class:`~nbstream.widgets.widget.StreamingWidget`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import traitlets

from ..checks import check_prompt, check_system_prompt, check_title, short
from ..conversation import transcript
from ..conversation.history import UserTurn
from ..conversation.transcript import StoredMessage, Transcript
from ..core.attachment import Attached, Attachment
from ..core.pieces import FINAL_STATUSES
from ..generation import GenerationOptions, check_generation
from ..options import StreamOptions, Unpack, parse_options, with_options
from ..sources.base import Source, check_source, source_name
from ..sources.content_parts import chat_content
from .protocol import ViewMsg
from .reply import Reply
from .toolturn import DEFAULT_MAX_TOOL_ROUNDS
from .widget import StreamingWidget
from .wire import BadViewMessage

log = logging.getLogger("nbstream")


def resolve_source(source: Source | None, where: str = "ChatWidget") -> Source:
    """``source``, or the embedded default model when None; a clear error otherwise."""
    if source is None:  # the embedded default model, loaded on the first question
        from ..sources.transformers import TransformersSource

        return TransformersSource()
    return check_source(source, f"{where}(source=...)",
                        also=" (or None for the embedded model)")


class ChatWidget(StreamingWidget):
    """A chat that streams a source's answers into the notebook.

    ``ChatWidget()`` uses the embedded default model (SmolLM2-135M-Instruct,
    loaded on the first question). ``ChatWidget(source)`` uses any
    :class:`~nbstream.sources.Source`. Generation runs on a worker thread;
    the cell returns at once and the kernel stays free.

    Stop (the button, Escape, :meth:`stop`, a kernel interrupt during
    ``reply.wait()``) stops the running reply and the queued ones. The
    source sees the conversation with turns alternating user / assistant: a
    prompt whose answer has no text (stopped before its first piece, or
    failed) is left out of what the model sees, with its empty answer.
    The options (``interval``, the time limits, ``max_pending``) are listed
    in ``help(ChatWidget.__init__)``.

    A conversation can have branches: :meth:`edit` (or Edit in the view) and
    :meth:`regenerate` keep the old messages as alternatives; :attr:`messages`
    is the branch shown, :attr:`tree` every branch. :meth:`to_markdown`,
    :meth:`to_messages`, :meth:`save` and :meth:`load` export and load it.
    """

    placeholder = traitlets.Unicode("Ask something… (Enter sends, Shift+Enter: new line)").tag(
        sync=True)

    @with_options
    def __init__(
        self,
        source: Source | None = None,
        *,
        title: str = "",
        system_prompt: str | None = None,
        generation: GenerationOptions | None = None,
        messages: Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Any] | None = None,
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        **options: Unpack[StreamOptions],
    ) -> None:
        """A chat on ``source`` (None: the embedded default model).

        ``title`` is shown in the header; ``system_prompt`` is sent first to
        the model with every question (shown at the top of the chat, where it
        can be edited; see :attr:`system_prompt`). ``generation``: options of
        each reply, such as ``{"temperature": 0.2, "max_new_tokens": 200}``
        (see :attr:`generation`). ``messages`` starts the chat from a
        history: OpenAI-style ``[{"role": "user", "content": "..."}, ...]``
        (what :meth:`to_messages` returns; a first ``system`` message sets the
        system prompt; an assistant's dict may also carry ``reasoning`` and a
        final ``status``), shown at once and seen by the model with the next
        question. ``tools``: functions (or :class:`~nbstream.tools.Tool` objects, MCP
        servers) the model may call (see :attr:`tools`; each call waits for a
        person's approval unless its tool says ``approve=True``), at most
        ``max_tool_rounds`` rounds of calls per question.
        """
        opts = parse_options(ChatWidget.__init__, options)
        check_system_prompt(system_prompt, "ChatWidget")
        check_title(title, "ChatWidget")
        history = transcript.from_messages(messages, "ChatWidget")
        if history.system_prompt is not None:
            if system_prompt is not None:
                raise ValueError("ChatWidget(messages=...) starts with a 'system' message and "
                                 "system_prompt=... is given too: give the system prompt once")
            system_prompt = history.system_prompt
        source = resolve_source(source)
        super().__init__(title=title, options=opts, source_label=source.label, mode="chat")
        self.source = source
        self.system_prompt = system_prompt
        self.generation = generation
        self.max_tool_rounds = max_tool_rounds
        self._set_tools(tools, "ChatWidget")
        self._update_attachment_policy()
        if history.messages:
            self._restore(history.messages, source)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        source: Source | None = None,
        *,
        title: str | None = None,
        system_prompt: str | None = None,
        generation: GenerationOptions | None = None,
        **options: Unpack[StreamOptions],
    ) -> ChatWidget:
        """A chat on ``source`` that starts from the conversation saved in ``path``
        (by :meth:`save`): its messages with their statuses, its title and system
        prompt (``title`` / ``system_prompt`` given here replace them).
        ``generation`` and ``options`` are those of the constructor.

        Raises :class:`~nbstream.conversation.transcript.ConversationFileError` (a
        :class:`ValueError`) naming the file and the line or entry when the file
        is malformed or of an unknown version.
        """
        saved = transcript.read(path)
        chat = cls(source, title=saved.title if title is None else title,
                   system_prompt=saved.system_prompt if system_prompt is None else system_prompt,
                   generation=generation, **options)
        chat._restore(saved.messages, chat.source, saved.current)
        return chat

    # ------------------------------------------------------------- public API
    # ``system_prompt`` (a synced trait of StreamingWidget): setting it, from
    # Python or in the view, applies to the next question; a reply already
    # asked keeps the system prompt it was asked with.

    @property
    def generation(self) -> GenerationOptions:
        """The generation options each new reply is asked with (a copy):
        ``temperature`` (0: greedy), ``top_p``, ``max_new_tokens`` (also spelled
        ``max_tokens``) and ``stop``, for sources that take them
        (``TransformersSource``, ``OpenAISource``), over the source's own settings.

        Set it to a dict (or None: the source's own settings); the names and
        values are checked at once (a clear error names the key). It applies to
        the next question; each reply keeps its own (``reply.generation``), and
        its status line shows the options in force on hover (``reply.options``).
        """
        return cast(GenerationOptions, dict(self._generation))

    @generation.setter
    def generation(self, value: GenerationOptions | None) -> None:
        self._generation = check_generation(
            value, "ChatWidget.generation", label=source_name(self.source),
            supported=self.source.generation_options)

    def send(self, text: str, attachments: Sequence[Any] | None = None) -> Reply:
        """Ask ``text``; returns a :class:`Reply` at once (generation runs on a worker).

        ``attachments``: what the question carries besides its text: matplotlib
        figures, PIL images, pandas / polars tables, numpy arrays, file paths,
        objects with a rich repr, or :func:`nbstream.attach` results (see
        :mod:`nbstream.attachments` for what each becomes). They are converted and
        checked here, in the caller's cell, before anything changes: an object
        that cannot be attached, a source that does not take it (an image for a
        text-only model), or a limit of :attr:`attachment_limits` raises (an
        :class:`~nbstream.core.attachment.AttachmentError`, a ``TypeError`` or a
        ``FileNotFoundError``) and the chat is left as it was.
        """
        check_prompt(text)
        attached = self._attached(attachments, [self.source], "send")
        with self._lock:
            self._check_chat_bytes(tuple(a.attachment for a in attached), "send")
            self._new_turn(text, attached=attached)
            reply = self._new_reply(self.source, text)
        self._launch(reply)
        return reply

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation shown (the branch in view): ``[{"role", "content", "id",
        "status"}, ...]`` (a copy), a question with attachments with its
        ``attachments`` (:class:`~nbstream.core.attachment.Attachment` objects).
        :attr:`tree` has every branch."""
        entries = self._history.path()
        out: list[dict[str, Any]] = []
        for e in entries:
            if isinstance(e, UserTurn):
                item: dict[str, Any] = {"role": "user", "content": e.text, "id": e.id,
                                        "status": "done"}
                if e.attached:
                    item["attachments"] = list(e.attachments)
                out.append(item)
            else:
                m: dict[str, Any] = {"role": "assistant", "content": e.text, "id": e.id,
                                     "status": e.status}
                calls = e.tool_calls
                if calls:  # (#20) every call of every round, with where it stands
                    m["tool_calls"] = [
                        {"id": c.id, "name": c.name, "arguments": c.arguments,
                         "state": c.state, "result": None if c.result is None
                         else c.result.text} for c in calls]
                out.append(m)
        return out

    def to_messages(self, include_reasoning: bool = False) -> list[dict[str, Any]]:
        """The conversation shown, OpenAI-style: ``[{"role", "content"}, ...]``, the
        system prompt first (if any). Every message shown is there, an answer with no
        text too. A reply that called tools is an assistant turn per round, with its
        ``tool_calls``, each followed by a ``"tool"`` turn per call (``tool_call_id``,
        ``name``, and as ``content`` what the model was told). With
        ``include_reasoning``, a reply's reasoning comes first in its content in
        ``<think>`` tags (as ``include_reasoning_in_history`` sends it to the model).
        A question with attachments has OpenAI content parts as its content
        (``text``, ``image_url`` with a ``data:`` URL, ``file``; see
        :func:`~nbstream.sources.content_parts.chat_content`).
        ``ChatWidget(source, messages=chat.to_messages(...))`` reads every form back."""
        out: list[dict[str, Any]] = []
        if self.system_prompt:
            out.append({"role": "system", "content": self.system_prompt})
        for e in self._history.path():
            if isinstance(e, UserTurn):
                out.append({"role": "user", "content": chat_content(e.message())})
            else:  # one assistant turn, or (tool calls) one per round with its tool turns
                out.extend(dict(m) for m in e.history_messages(include_reasoning))
        return out

    def to_markdown(self) -> str:
        """The conversation shown, as Markdown: a ``## You`` / ``## Assistant`` heading
        per message, then its text; a reply that did not end normally says so
        (``*(stopped)*``). What the view's "Copy all" button copies."""
        return transcript.conversation_markdown(
            (m.role, m.content, m.status) for m in self.tree.branch())

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the conversation to ``path`` as JSON (see :mod:`nbstream.conversation.transcript`
        for the format): every message with its reasoning, status, finish reason and
        error, the title and the system prompt. A reply still running is saved as it
        stands, as ``stopped``. Returns the path. :meth:`load` reads it back."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"save(path) takes a file path (str or Path), got "
                            f"{type(path).__name__} {short(path)}")
        return transcript.write(path, self._transcript(live_as_stopped=True))

    @property
    def tree(self) -> Transcript:
        """Every message of every branch (each with its ``parent``; messages with the
        same parent are alternatives: edited questions, regenerated answers), and
        ``current``, the last message of the branch shown: what :meth:`save` writes.
        ``tree.branch()`` is the branch shown."""
        return self._transcript(live_as_stopped=False)

    def regenerate(self) -> Reply | None:
        """Ask the last answer's prompt again. The new answer is an alternative to the
        old one, which stays (the view shows ``< 2 / 2 >`` to switch); a last answer
        still running is stopped first."""
        with self._lock:
            last = next((e for e in reversed(self._history.path()) if isinstance(e, Reply)),
                        None)
            if last is None:
                return None
            last.cancel()
            reply = self._new_reply(self.source, last.prompt, parent=last.parent)
        self._launch(reply)
        return reply

    def edit(self, index: int, text: str, attachments: Sequence[Any] | None = None) -> Reply:
        """Ask ``text`` in place of the user message ``messages[index]``: a new
        branch from that point (the old question and what followed it stay, as an
        alternative the view offers to switch back to), answered at once. A reply
        still streaming in the old branch goes on. Returns the new :class:`Reply`.

        ``attachments``: None keeps the old question's; a list replaces them
        (``[]``: none), as in :meth:`send`."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"edit(index, text): index must be an int (a position in "
                            f"chat.messages), got {type(index).__name__} {short(index)}")
        check_prompt(text, "edit")
        attached = None if attachments is None else \
            self._attached(attachments, [self.source], "edit")
        with self._lock:
            shown = self._history.path()
            if not -len(shown) <= index < len(shown):
                raise IndexError(f"edit(index={index}): the chat shows {len(shown)} messages")
            target = shown[index]
            if not isinstance(target, UserTurn):
                raise ValueError(f"edit(index={index}): message {target.id} is an answer; "
                                 "only a question (a user message) can be edited")
            if attached is not None:
                self._check_chat_bytes(tuple(a.attachment for a in attached), "edit")
            return self._edit(target, text, attached)

    def switch_to(self, id: str) -> list[dict[str, Any]]:
        """Show the branch through message ``id`` (one of the alternatives at its place:
        below it, the messages shown when it was last in view). Returns
        :attr:`messages`."""
        with self._lock:
            if not isinstance(id, str) or id not in self._history:
                raise ValueError(f"switch_to(id={id!r}): no such message; the ids are in "
                                 "chat.tree")
            self._history.show(id)
        self._pump.publish(self._channel, [id])  # (a meta: what wakes the pump)
        return self.messages

    #: what :meth:`continue_` asks, as a user turn after the cut answer
    CONTINUE_PROMPT = "Continue exactly where your last answer was cut off."

    def continue_(self, id: str | None = None) -> Reply:
        """Ask the model to go on from the last reply, cut at the token limit
        (``finish_reason == "length"``; the view's Continue button calls this).

        What the model is sent: the whole history, the cut reply's partial answer
        included (as the assistant's turn), then a user turn :attr:`CONTINUE_PROMPT`.
        This works with every source (no server needs to support continuing a
        message); the new reply is a new message, shown after a "Continue" turn.
        ``id`` names the reply to continue; it must be the last one.
        """
        last = self.last
        if last is None or (id is not None and id != last.id):
            raise ValueError(f"continue_(id={id!r}): only the last reply can be continued"
                             if last is not None else "continue_(): there is no reply yet")
        if not last.done:
            raise ValueError(f"continue_(): reply {last.id} is still {last.status}")
        return self.send(self.CONTINUE_PROMPT)

    def __repr__(self) -> str:
        n = len(self._history.path())
        return f"{type(self).__name__}(source={self.source!r}, messages={n})"

    def _sources(self) -> list[Source]:
        return [self.source]

    # -------------------------------------------------------------- internals
    def _edit(self, target: UserTurn, text: str,
              attached: tuple[Attached, ...] | None = None) -> Reply:
        # caller holds _lock: a new question beside ``target`` (with its attachments,
        # unless others are given), and its answer
        self._new_turn(text, parent=target.parent,
                       attached=target.attached if attached is None else attached)
        reply = self._new_reply(self.source, text)
        self._launch(reply)
        return reply

    def _transcript(self, *, live_as_stopped: bool) -> Transcript:
        """Every message (each parent before its children) and the branch shown."""
        with self._lock:
            entries = self._history.entries()
            current = self._history.current
        out: list[StoredMessage] = []
        for e in entries:
            if isinstance(e, UserTurn):
                m = StoredMessage(e.id, e.parent, "user", e.text, attachments=e.attachments)
            else:
                status, finish = e.status, e.finish_reason
                if live_as_stopped and status not in FINAL_STATUSES:
                    status, finish = "stopped", "cancelled"
                rounds = None
                if e.tool_calls:  # (#20) round by round, with each call as it ended
                    rounds = tuple({"reasoning": r["reasoning"], "content": r["content"],
                                    "tool_calls": [c.saved() for c in r["calls"]]}
                                   for r in e.rounds())
                m = StoredMessage(e.id, e.parent, "assistant", e.text, e.reasoning, status,
                                  finish, e.reason if status in ("error", "timeout") else None,
                                  rounds)
            out.append(m)
        return Transcript(tuple(out), current, self.system_prompt, self.title)

    def _ask(self, text: str, attachments: tuple[Attachment, ...] = ()) -> None:
        self.send(text, list(attachments))

    def _attachment_accepts(self) -> list[frozenset[str]]:
        return [self.source.accepts]

    def _on_command(self, msg: ViewMsg) -> bool:
        if msg["kind"] == "regenerate":
            self.regenerate()
            return True
        if msg["kind"] == "switch":
            if msg["id"] not in self._history:
                raise BadViewMessage("switch to an unknown id")
            self.switch_to(msg["id"])
            return True
        if msg["kind"] == "edit":
            if not msg["text"].strip():
                raise BadViewMessage("edit of a blank text")
            with self._lock:
                target = self._history.get(msg["id"])
                if not isinstance(target, UserTurn):
                    raise BadViewMessage("edit of an unknown or non-user message")
                self._edit(target, msg["text"])
            return True
        if msg["kind"] == "system_prompt":  # an edit in the view
            text = msg["text"]
            self.system_prompt = text if text.strip() else None
            return True
        if msg["kind"] == "continue":
            try:
                self.continue_(msg["id"])
            except ValueError as exc:  # a stale button: nothing to continue
                log.debug("nbstream: %s", exc)
            return True
        return super()._on_command(msg)
