"""Which views of a widget are on a page, and what happens when the last one leaves.

A view says hello with its own id when it renders and bye when it is removed
from the page (its output cleared, its cell run again: js/src/chat.ts). When
the last view of a widget said bye and none says hello within ``grace``
seconds, the widget stops its running replies (``StreamingWidget``), so that a
server does not go on generating for nobody. Only a view's explicit bye
counts: a page whose messages never reach the kernel (its connection gone)
says nothing, and nothing is stopped for it. A notebook tab closed in
JupyterLab says bye when the notebook's session closes, just before
JupyterLab disposes the page's kernel connection (js/src/connection.ts; the
views' own removal comes after it, when nothing can be sent).

A page that unloads (a browser tab closed, a Notebook 7 page left, or a
reload: the kernel cannot tell them apart) says a page's bye from its
``pagehide`` event. A reload's views say hello again within seconds, so a
page's bye waits ``page_grace`` (:data:`PAGE_GONE_GRACE`) instead: a reply
goes on through a reload, and one whose page was closed stops within it.

Threads: :class:`ViewRoster` is called by the view-message handler (the
kernel's main thread, or a subshell's) and guarded by its lock; its grace
timer runs ``on_gone`` on a timer thread of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["MAX_VIEWS", "PAGE_GONE_GRACE", "VIEW_GONE_GRACE", "ViewRoster"]

#: seconds a widget whose last view said bye waits for another view before it stops its
#: running replies (a re-rendered output says hello again well within it)
VIEW_GONE_GRACE = 5.0
#: seconds a widget whose last view's page unloaded (closed, or reloading) waits for
#: another view: a reload of JupyterLab shows its views again 2.4-3.2 s after the reload
#: began on a quiet 2-core machine (tests/browser/flow_reload.mjs ``re_render_ms``); the
#: rest is room for a loaded or slow machine
PAGE_GONE_GRACE = 30.0
#: most view ids a widget keeps (a hostile view cannot grow the set without bound)
MAX_VIEWS = 64


class ViewRoster:
    """The views of one widget that are on a page (their ids, from hello and bye)."""

    def __init__(self, on_gone: Callable[[], object], grace: float,
                 page_grace: float | None = None) -> None:
        self._on_gone = on_gone
        self._grace = grace
        self._page_grace = grace if page_grace is None else page_grace
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

    def bye(self, view: str, page: bool = False) -> None:
        """View ``view`` left the page (``page``: the page itself is unloading, maybe to
        reload); the last one starts the grace period (the page's, if it said so)."""
        with self._lock:
            if view not in self._views:
                return
            self._views.discard(view)
            if self._views or self._closed:
                return
            self._cancel()
            grace = self._page_grace if page else self._grace
            self._timer = threading.Timer(grace, self._check)
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
