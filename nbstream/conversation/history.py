"""A widget's messages: every prompt and answer, their branches, and what the
model is shown.

:class:`History` holds the entries of one widget in order of creation (each
:class:`UserTurn` and each answer: the widget's ``Reply``), the tree they form
(:class:`~nbstream.conversation.branches.Branches`: who follows whom, which
path is shown), the ids given out, and the entries the views know of (so that
a removal can be told to them). :meth:`History.conversation_before` is what a
reply's source sees: the path to it, turns alternating user / assistant.

Answers are anything with an ``id``, a ``parent``, a ``pane``, a ``text``, its
``tool_calls`` and ``history_messages()`` (:class:`Answer`): this module imports
nothing of the widgets. A user turn holds its attachments (#21) with their previews
(:class:`~nbstream.core.attachment.Attached`, immutable, made on the thread
that asks), and hands them to the model with its text (:meth:`UserTurn.message`).

Thread ownership: every field is guarded by :attr:`History.lock` (an
``RLock``), which the widget also holds around compound steps (a new prompt
and its reply). The main thread and the comm thread (the view's commands) add
and show; the pump thread reads (what to send) and takes removals.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from ..core.attachment import Attached, Attachment
from ..core.pieces import ChatMessage
from .branches import Branches

__all__ = ["Answer", "History", "UserTurn"]


class UserTurn:
    """A prompt in the history (immutable): its text, the message it follows, and
    its attachments with their previews."""

    __slots__ = ("attached", "id", "parent", "text")

    def __init__(self, id: str, text: str, parent: str | None = None,
                 attached: tuple[Attached, ...] = ()) -> None:
        self.id = id
        self.text = text
        self.parent = parent
        self.attached = attached

    @property
    def attachments(self) -> tuple[Attachment, ...]:
        """What the turn carries besides its text."""
        return tuple(a.attachment for a in self.attached)

    def message(self) -> ChatMessage:
        """The turn as a source sees it (its attachments with it)."""
        m: ChatMessage = {"role": "user", "content": self.text}
        if self.attached:
            m["attachments"] = self.attachments
        return m


class Answer(Protocol):
    """What the history needs of an answer (the widget's ``Reply`` is one)."""

    @property
    def id(self) -> str: ...

    #: the message it follows (its prompt, usually)
    parent: str | None
    #: which pane of a Compare widget shows it (None elsewhere)
    pane: int | None

    @property
    def text(self) -> str: ...

    @property
    def tool_calls(self) -> Sequence[object]:
        """The tools it called (#20), every round's (empty: none)."""
        ...

    def history_messages(self, include_reasoning: bool = False) -> list[ChatMessage]:
        """The answer as the model is shown it later: one assistant turn, or (with tool
        calls) an assistant turn per round followed by its ``tool`` turns."""
        ...


A = TypeVar("A", bound=Answer)


class History(Generic[A]):
    """The messages of one widget (see the module docstring); guarded by :attr:`lock`."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._all: list[UserTurn | A] = []
        self._branches = Branches()
        self._ids = itertools.count(1)
        #: the highest message number given out (ids are ``m1 .. m<last_id>``)
        self.last_id = 0
        #: entries by id that the views know of (kept after a Clear until
        #: :meth:`forget_removed` moves them to :attr:`removed`)
        self.known: dict[str, UserTurn | A] = {}
        #: entries removed from the history whose removal the views were not told yet
        self.removed: dict[str, UserTurn | A] = {}

    # every method: the caller may hold ``lock``; each takes it itself
    def new_id(self) -> str:
        """The next message id."""
        with self.lock:
            self.last_id = next(self._ids)
            return f"m{self.last_id}"

    def add(self, entry: UserTurn | A, parent: str | None) -> None:
        """``entry`` follows ``parent`` (None: a first message) and is shown."""
        with self.lock:
            self._all.append(entry)
            self.known[entry.id] = entry
            self._branches.add(entry.id, parent)

    def __contains__(self, mid: object) -> bool:
        with self.lock:
            return mid in self._branches

    def get(self, mid: str | None) -> UserTurn | A | None:
        """The entry ``mid``, if the views know of it."""
        with self.lock:
            return None if mid is None else self.known.get(mid)

    @property
    def current(self) -> str | None:
        """The last message of the branch shown (None: nothing)."""
        with self.lock:
            return self._branches.current

    def show(self, mid: str) -> str | None:
        """Show the branch through ``mid``; returns the last message now shown."""
        with self.lock:
            return self._branches.show(mid)

    def entries(self) -> list[UserTurn | A]:
        """Every entry of every branch, in order of creation (a copy)."""
        with self.lock:
            return list(self._all)

    def answers(self) -> list[A]:
        """Every answer of every branch, in order of creation."""
        with self.lock:
            return [e for e in self._all if not isinstance(e, UserTurn)]

    def path(self, leaf: str | None = None) -> list[UserTurn | A]:
        """The messages on the path to ``leaf`` (default: the path shown), in order;
        nothing for a leaf no longer there (cleared meanwhile)."""
        with self.lock:
            if leaf is not None and leaf not in self._branches:
                return []
            return [self.known[i] for i in self._branches.path(leaf)]

    def clear(self) -> None:
        """Forget every message (the views are told by :meth:`forget_removed`)."""
        with self.lock:
            self._all.clear()
            self._branches.clear()

    def forget_removed(self) -> list[str]:
        """Move the entries the views know of but the history no longer has to
        :attr:`removed`; returns their ids (to tell the views)."""
        with self.lock:
            if len(self._all) == len(self.known):
                # the entries are always among ``known`` (add puts each in both): the same
                # count means nothing left, and a new turn costs no scan of the history
                return []
            present = {e.id for e in self._all}
            gone = [i for i in self.known if i not in present]
            for i in gone:
                self.removed[i] = self.known.pop(i)
            return gone

    def conversation_before(self, reply: A, system_prompt: str | None,
                            include_reasoning: bool = False) -> list[ChatMessage]:
        """What ``reply``'s source sees: ``system_prompt``, then each earlier prompt
        with its answer as shown beside ``reply`` (its pane, in a Compare), then
        ``reply``'s own prompt; earlier answers' reasoning with ``include_reasoning``.
        An earlier answer that called tools is its rounds, each an assistant turn
        with its ``tool_calls`` and a ``tool`` turn per result (OpenAI's shape).

        Turns alternate user / assistant, as chat templates require: a prompt
        whose answer has no text and no tool call (stopped before its first
        piece, failed or timed out at once) is left out together with that empty
        answer. The widget still shows both; only the model does not see them.
        """
        msgs: list[ChatMessage] = []
        if system_prompt:
            msgs.append({"role": "system", "content": system_prompt})
        entries = self.path(reply.id)  # the path to this reply, whichever branch shows
        unanswered: UserTurn | None = None  # the latest prompt, until its answer comes
        for e in entries:
            if e is reply:
                break
            if isinstance(e, UserTurn):
                unanswered = e  # an earlier prompt left unanswered is dropped
            elif (e.pane == reply.pane and unanswered is not None
                  and (e.text or e.tool_calls)):
                msgs.append(unanswered.message())
                msgs.extend(e.history_messages(include_reasoning))
                unanswered = None
        if unanswered is not None:
            msgs.append(unanswered.message())
        return msgs
