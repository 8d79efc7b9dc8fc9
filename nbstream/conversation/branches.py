"""The shape of a conversation with alternatives: which message follows which, and
which path is shown.

An edited question or a regenerated answer does not replace the old one: it is
a new message with the same parent (a sibling), and the old one stays, with
everything that followed it. The messages form a tree; the conversation shown
(``chat.messages``, what the view lists) is the path from a root to
:attr:`Branches.current`. Switching to a sibling shows the branch below it as
it was last shown (or its newest messages).

Ids only (:class:`~nbstream.conversation.history.History` holds the messages).
Not thread-safe on its own: the history guards it with its lock (the main
thread, the comm thread and the pump read it).
"""

from __future__ import annotations

__all__ = ["Branches"]


class Branches:
    """Parents, children in order of creation, the leaf shown, and the child last
    shown below each message."""

    def __init__(self) -> None:
        self._parent: dict[str, str | None] = {}
        self._children: dict[str | None, list[str]] = {}
        #: below each message (None: the roots), the child on the path last shown
        self._chosen: dict[str | None, str] = {}
        #: the last message of the path shown (None: nothing)
        self.current: str | None = None

    def __contains__(self, mid: object) -> bool:
        return mid in self._parent

    def add(self, mid: str, parent: str | None) -> None:
        """A new message ``mid`` after ``parent`` (None: a first message); it is shown."""
        if mid in self._parent:
            raise ValueError(f"message {mid} is already in the conversation")
        if parent is not None and parent not in self._parent:
            raise ValueError(f"unknown parent {parent}")
        self._parent[mid] = parent
        self._children.setdefault(parent, []).append(mid)
        if parent is not None and parent == self.current:
            # after the message shown last (a new turn): the path above is chosen already
            self._chosen[parent] = mid
            self.current = mid
        else:
            self.show(mid)

    def parent(self, mid: str) -> str | None:
        """The message ``mid`` follows (None: a first message)."""
        return self._parent[mid]

    def siblings(self, mid: str) -> list[str]:
        """The alternatives at ``mid``'s place (``mid`` included), oldest first."""
        return list(self._children[self._parent[mid]])

    def path(self, mid: str | None = None) -> list[str]:
        """The ids from a root to ``mid`` (default: the path shown), in order."""
        node = self.current if mid is None else mid
        out: list[str] = []
        while node is not None:
            out.append(node)
            node = self._parent[node]
        out.reverse()
        return out

    def show(self, mid: str) -> str:
        """Show the branch through ``mid``: below it, the child last shown at each
        step (else the newest). Returns the new :attr:`current`."""
        if mid not in self._parent:
            raise KeyError(mid)
        node = mid
        while self._children.get(node):
            kids = self._children[node]
            node = self._chosen.get(node, kids[-1])
        self.current = node
        path = self.path(node)
        for parent, child in zip([None, *path[:-1]], path, strict=True):
            self._chosen[parent] = child
        return node

    def clear(self) -> None:
        """Forget every message."""
        self._parent.clear()
        self._children.clear()
        self._chosen.clear()
        self.current = None
