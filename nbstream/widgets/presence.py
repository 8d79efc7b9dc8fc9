"""Which views of a widget are on a page, and what happens when the last one leaves.

A view says hello with its own id when it renders and bye when it is removed
from the page (its output cleared, its cell run again: js/src/chat.ts). When
the last view of a widget said bye and none says hello within ``grace``
seconds, the widget stops its running replies (``StreamingWidget``), so that a
server does not go on generating for nobody. Only a view's explicit bye
counts: a page that reloads, or whose messages never reach the kernel, says
nothing, and nothing is stopped for it. A notebook tab closed in JupyterLab
says bye when the notebook's session closes, just before JupyterLab disposes
the page's kernel connection (js/src/connection.ts; the views' own removal
comes after it, when nothing can be sent). A closed browser tab (a Notebook 7
notebook is a page of its own) says nothing, as a reload does: the kernel
cannot tell them apart, and a reload must not stop the reply, so such a reply
runs to its end, as a running cell would.

Threads: :class:`ViewRoster` is called by the view-message handler (the
kernel's main thread, or a subshell's) and guarded by its lock; its grace
timer runs ``on_gone`` on a timer thread of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["MAX_VIEWS", "VIEW_GONE_GRACE", "ViewRoster"]

#: seconds a widget whose last view said bye waits for another view before it stops its
#: running replies (a re-rendered output says hello again well within it)
VIEW_GONE_GRACE = 5.0
#: most view ids a widget keeps (a hostile view cannot grow the set without bound)
MAX_VIEWS = 64


class ViewRoster:
    """The views of one widget that are on a page (their ids, from hello and bye)."""

    def __init__(self, on_gone: Callable[[], object], grace: float) -> None:
        self._on_gone = on_gone
        self._grace = grace
        self._lock = threading.Lock()
        self._views: set[str] = set()
        self._timer: threading.Timer | None = None
        self._closed = False

    def hello(self, view: str) -> None:
        """View ``view`` is on the page (again)."""
        with self._lock:
            if len(self._views) < MAX_VIEWS:
                self._views.add(view)
            self._cancel()

    def bye(self, view: str) -> None:
        """View ``view`` left the page; the last one starts the grace period."""
        with self._lock:
            if view not in self._views:
                return
            self._views.discard(view)
            if self._views or self._closed:
                return
            self._cancel()
            self._timer = threading.Timer(self._grace, self._check)
            self._timer.name = "nbstream-view-gone"
            self._timer.daemon = True
            self._timer.start()

    def close(self) -> None:
        """The widget closed: nothing more to watch."""
        with self._lock:
            self._closed = True
            self._cancel()

    def _cancel(self) -> None:
        # caller holds the lock
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        with self._lock:
            gone = not self._views and not self._closed and self._timer is not None
            self._timer = None
        if gone:
            self._on_gone()
