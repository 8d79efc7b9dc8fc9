"""What a source is: something that turns a conversation into text pieces.

A source runs on a worker thread (never the kernel's main thread, never the
pump). :meth:`Source.generate` is push-style: it calls ``emit(piece)`` for
each piece of text, which lets a model's own streamer callback (transformers'
``put()``) feed the pipeline without an extra queue or thread.

``emit`` may block: that is backpressure, when the pipeline's unsent buffer is
full. ``emit`` raises :class:`Cancelled` once the reply was stopped, so a
source unwinds at the next piece even if it never looks at ``cancel``; sources
that can stop sooner (between two tokens, before a request) should also watch
the ``cancel`` event.

A source with a slow start overrides :meth:`Source.prepare`; while it runs, the
reply shows "loading model…", and the source may say more with
:func:`report_loading` (``report_loading("preparing the model", 0.42)`` shows
"preparing the model… 42%"; see :mod:`nbstream.core.loading`).
"""

from __future__ import annotations

import reprlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from ..core.attachment import TEXT_ONLY, UnsupportedAttachment, takes
from ..core.loading import report_loading
from ..core.pieces import Cancelled, ChatMessage, Outcome, Reasoning, ToolCallDelta, ToolSchema

if TYPE_CHECKING:
    from ..generation import GenerationOptions

__all__ = ["Cancelled", "ChatMessage", "Emit", "Outcome", "Reasoning", "Source", "SourceError",
           "ToolCallDelta", "ToolSchema", "check_source", "report_loading", "source_name"]


#: what a source calls per piece: a ``str`` (answer text) or a :class:`Reasoning`. The
#: pipeline's ``emit`` also takes :class:`ToolCallDelta` pieces (a source with
#: ``supports_tools``); the type says text, so such a source casts (``toolcalls.emit_call``)
Emit = Callable[[str], None]


class SourceError(RuntimeError):
    """A source failed in a way worth a clear message: unreachable, an HTTP error,
    a broken or cut stream.

    ``status_code`` is the HTTP status when a server answered with an error,
    ``body`` the start of what it said (both None otherwise).
    """

    def __init__(self, message: str, *, status_code: int | None = None,
                 body: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class Source(ABC):
    """Base class of every source.

    Subclasses implement :meth:`generate`; those with a slow start (loading a
    model) override :meth:`prepare` and :attr:`prepared`. Sources that hold a
    model share a *lane* through :meth:`lane_key`: replies on one lane run one
    at a time (``concurrency``) in first-in first-out order.
    """

    #: how many replies of this source's lane may run at once
    concurrency: int = 1

    #: whether :meth:`generate_with` hands ``tools`` to the model, which may then call
    #: them by emitting :class:`~nbstream.core.pieces.ToolCallDelta` pieces
    supports_tools: ClassVar[bool] = False

    #: the :class:`~nbstream.generation.GenerationOptions` names this source takes
    #: per reply (in :meth:`generate_with`); none by default
    generation_options: ClassVar[frozenset[str]] = frozenset()

    @property
    def label(self) -> str:
        """Short name shown in the view; ``""`` shows none (errors and logs then use
        :func:`source_name`)."""
        return type(self).__name__

    def lane_key(self) -> Hashable:
        """Sources returning equal keys share one model and one queue."""
        return ("source", id(self))

    @property
    def prepared(self) -> bool:
        """False while :meth:`prepare` still has slow work to do."""
        return True

    def queued(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Called on the thread that asked for a reply (a cell's, or the kernel's main
        thread for the Send button) when the reply is queued, before its worker
        thread starts. Must be quick; an exception is logged and the reply goes on.
        :class:`~nbstream.sources.TransformersSource` hands back the asking thread's
        OpenMP threads here (:mod:`nbstream.sources.transformers.openmp`).
        """

    def prepare(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Load whatever is slow to load. Called on the worker thread, once.

        May call :func:`report_loading` to show what it waits for and how far it got.
        """

    @abstractmethod
    def generate(
        self,
        messages: Sequence[ChatMessage],
        emit: Emit,
        cancel: threading.Event,
    ) -> Outcome | None:
        """Produce the reply to ``messages`` by calling ``emit`` per piece.

        A piece is a ``str`` (answer text) or a :class:`Reasoning` (thinking).
        Return when the reply is complete: an :class:`Outcome` saying why it
        ended (``finish_reason``) with the figures only the source knows
        (usage, tokens, server timings), or None for ``Outcome()`` (ended
        normally). Raise to report an error; the text emitted before is kept.
        """

    def generate_with(
        self,
        messages: Sequence[ChatMessage],
        emit: Emit,
        cancel: threading.Event,
        options: GenerationOptions,
        tools: Sequence[ToolSchema] = (),
    ) -> Outcome | None:
        """:meth:`generate` with per-reply ``options`` (validated names among
        :attr:`generation_options`) over the source's own settings, and the
        ``tools`` the model may call (sources with :attr:`supports_tools`).

        Sources that take options or tools override this; the default has none
        to apply and calls :meth:`generate`.
        """
        if options:
            raise ValueError(f"{source_name(self)} takes no generation options, "
                             f"got {sorted(options)}")
        self.check_tools(tools)
        self.check_attachments(messages)
        return self.generate(messages, emit, cancel)

    def check_tools(self, tools: Sequence[ToolSchema]) -> None:
        """Raise :class:`ValueError` when ``tools`` are given to a source that cannot
        hand them to its model (:attr:`supports_tools` is False)."""
        if tools and not self.supports_tools:
            raise ValueError(f"{source_name(self)} cannot call tools (its model is not "
                             f"given them); got {len(tools)}")

    # -- attachments (#21) ------------------------------------------------------
    @property
    def accepts(self) -> frozenset[str]:
        """The MIME patterns of the attachments this source hands its model
        (``"image/*"``, ``"image/png"``, ``"application/pdf"``, ``"*/*"``...).

        Text attachments go to every source that takes ``text/*`` (their text is
        put into the prompt; see :mod:`nbstream.sources.content_parts`), which is
        the default: a source takes images or files only where it says so. The
        widgets refuse, at ``send``, what their source does not take (and the view
        disables it).
        """
        return TEXT_ONLY

    def check_attachments(self, messages: Sequence[ChatMessage]) -> None:
        """Raise :class:`~nbstream.core.attachment.UnsupportedAttachment` when a
        message carries an attachment this source does not take (:attr:`accepts`)."""
        accepts = self.accepts
        for m in messages:
            for a in m.get("attachments", ()):
                if not takes(accepts, a):
                    raise UnsupportedAttachment(
                        f"{self.label} takes no {a.kind}s of type {a.mime} (it takes "
                        f"{', '.join(sorted(accepts))}): {a.name!r} cannot be sent")

    def options_in_force(self, options: GenerationOptions) -> dict[str, Any]:
        """The generation options a reply asked with ``options`` runs with, the
        source's own defaults included where it knows them (shown on the reply's
        status line). By default: ``options`` as given."""
        return dict(options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def source_name(source: Source) -> str:
    """What errors and logs call ``source``: its :attr:`~Source.label`, or its
    class's name where the label is empty (a source shown without a name)."""
    return source.label or type(source).__name__


def check_source(obj: object, what: str, *, also: str = "") -> Source:
    """``obj`` if it is a :class:`Source`, else a :class:`TypeError` naming ``what``
    (the argument, e.g. ``"ChatWidget(source=...)"``), what else it takes
    (``also``, e.g. ``" (or None for the embedded model)"``), and what to do
    with a Source class, a function or an iterable. The one "is this a source"
    check of the widgets (any thread: it only reads ``obj``)."""
    if isinstance(obj, Source):
        return obj
    hint = ""
    if isinstance(obj, type) and issubclass(obj, Source):
        hint = f"; create one: {obj.__name__}(...)"
    elif callable(obj):
        hint = "; wrap a function in IteratorSource"
    elif hasattr(obj, "__iter__") or hasattr(obj, "__aiter__"):
        hint = "; to show an iterable of str use nbstream.stream()"
    raise TypeError(f"{what} must be a nbstream Source{also}, got {type(obj).__name__} "
                    f"{reprlib.repr(obj)}{hint}")
