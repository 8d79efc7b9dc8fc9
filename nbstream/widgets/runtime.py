"""The front end, shared: one widget per kernel carries the bundle and the CSS.

Each nbstream widget's own ``_esm`` is a small loader (``js/src/loader.ts``,
~2 KB) that names this model in its ``_runtime`` trait and imports the bundle
from it. So the ~194 KB bundle and ~23 KB of CSS travel once per kernel, and
a notebook saved with widget state (JupyterLab's "save widget state",
nbclient's ``store_widget_state=True``) stores them once, however many widgets
it shows; a reopened notebook or its nbconvert HTML renders from that saved
copy with no kernel.

The heavy renderers are *chunks* (``js/src/chunks.ts``): Temml for math
(``static/math.js``, ~208 KB), highlight.js for code (``static/highlight.js``,
~68 KB), the table of HTML's named character references
(``static/entities.js``, ~23 KB; the bundle decodes ``&amp;``, ``&lt;``,
``&gt;``, ``&quot;``, ``&apos;`` and ``&nbsp;`` itself) and linkify-it, which
finds bare URLs and e-mail addresses (``static/linkify.js``, ~12 KB); and
``static/glyphs.js`` (~3 KB), which lays the characters of a long history out
hidden before a reader scrolls back to them, so that the browser has found their
fonts (``js/src/glyphs.ts``), sent only when a view asks; and ``static/tools.js``
(~6 KB), the cards of a reply's tool calls (``js/src/toolcard.ts``): a plain chat
never shows one. The
runtime carries a chunk in its ``chunks`` trait only once a message needs it:
the pump thread notes what it sends (:func:`note_bodies`: a formula, a
fenced code block naming a language, a rarer ``&name;``, a URL scheme or an
address in the text; a reply's first tool part), and a view that meets one asks (a
:class:`~nbstream.widgets.protocol.ChunkMsg`). So a notebook saved after math
appeared holds the math chunk, and renders it with no kernel and no network;
one with plain chats holds none, and a page parses none until it needs it (the
tools chunk, sent with the update that shows a reply's first call, the view
imports at once, so that the card renders without a wait).

The runtime is a plain ``@jupyter-widgets/base`` ``WidgetModel`` (no view, no
anywidget), so every widget manager (JupyterLab, Notebook 7, nbconvert's
html-manager) can restore it. :func:`runtime_ref` creates it on first use,
on whichever thread builds the first widget (under a lock), and again if it
was closed (``Widget.close_all()``).

Front ends known not to render nbstream's updates are found here too:
:func:`warn_unsupported_frontend` warns once, when a widget is built
(``nbstream.doctor()`` reports the same problem, with the fix).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import re
import sys
import threading
import typing
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import ipywidgets
import traitlets

from .protocol import ChunkName, DeltaBody
from .wire import BadViewMessage, ViewMessageFilter, parse_view_msg

log = logging.getLogger("nbstream")

_STATIC = Path(__file__).parent.parent / "static"
_MISSING_BUNDLE = """
export default { render({ el }) {
  el.textContent =
    "nbstream: the front end is not built (run `make setup`, or `npm run build` in js/).";
} };
"""


#: the chunks there are (``static/<name>.js``), see the module docstring
CHUNKS: tuple[ChunkName, ...] = typing.get_args(ChunkName)
#: the chunks the text the kernel sends may need (:func:`needed_chunks`); the others
#: only go when a view asks ("glyphs": a view with a long history to warm fonts for) or,
#: "tools", with a reply's first tool part (:func:`has_tool_part`)
TEXT_CHUNKS: tuple[ChunkName, ...] = ("math", "highlight", "entities", "linkify")

#: text that may render as math in the view (js/src/math.ts): ``$$``, ``\(``, ``\[``,
#: or ``$…$`` by Pandoc's rule (no space inside either dollar, no digit after the
#: closing one: "$5 and $10" is not math). Finding more than the view renders only
#: costs sending the chunk; the view asks for it anyway when it meets a formula
_MATH = re.compile(r"\$\$|\\[(\[]|\$(?=[^\s$])(?:[^$\\]|\\.)*?(?<=[^\s\\])\$(?!\d)")
#: a fenced code block naming a language (js/src/markdown.ts: highlighted in the view)
_CODE = re.compile(r"^[ \t]{0,3}(?:```|~~~)[ \t]*[A-Za-z0-9_+#.-]", re.MULTILINE)
#: a named character reference as markdown-it reads one, but for those the bundle
#: decodes itself (js/src/entities.ts)
_ENTITY = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|nbsp);)[A-Za-z][A-Za-z0-9]{1,31};")
#: text where linkify-it may find a link (js/src/linkify.ts MAYBE_LINK, the same
#: pattern): a scheme it knows, ``//``, or an ``@`` after a character an address's
#: name may end with
_LINK = re.compile(r"(?:https?|ftp|mailto):|//|[-!#$%&'*+/=?^_`{|}~a-zA-Z0-9]@",
                   re.IGNORECASE)


def needed_chunks(text: str) -> set[ChunkName]:
    """The chunks the view needs to render ``text`` (Markdown): "math", "highlight",
    "entities", "linkify"."""
    needed: set[ChunkName] = set()
    if _MATH.search(text):
        needed.add("math")
    if _CODE.search(text):
        needed.add("highlight")
    if _ENTITY.search(text):
        needed.add("entities")
    if _LINK.search(text):
        needed.add("linkify")
    return needed


class Runtime(ipywidgets.Widget):  # type: ignore[misc]
    """The front-end bundle and CSS, synced once per kernel (see the module docstring).

    ``chunks`` is written under ``_lock`` by :meth:`provide`, from the pump thread
    (the text it sends) or the thread that handles comm messages (a view asks).
    """

    #: the ES module every nbstream view renders with (js/src/index.ts, bundled)
    bundle = traitlets.Unicode("").tag(sync=True)
    #: the widgets' stylesheet, added to the page once per version
    css = traitlets.Unicode("").tag(sync=True)
    #: a hash of both and the chunks: views share one import per page and version
    version = traitlets.Unicode("").tag(sync=True)
    #: the chunks sent so far: name -> ES module text (static/<name>.js)
    chunks = traitlets.Dict(default_value={}).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lock = threading.Lock()
        self._ignored = ViewMessageFilter()
        self.on_msg(self._on_view_msg)

    def provide(self, name: str) -> bool:
        """Send chunk ``name`` to the views (once); returns whether it was new."""
        if name not in CHUNKS:
            raise ValueError(f"unknown chunk {name!r}; the chunks are {CHUNKS}")
        with self._lock:
            if name in self.chunks:
                return False
            code = _read(f"{name}.js", "")
            if not code:
                log.warning("nbstream: the %s chunk is not built (npm run build in js/)", name)
                return False
            self.chunks = {**self.chunks, name: code}
        return True

    def missing(self) -> bool:
        """Whether a chunk that text may need is still to be sent (cheap: the pump asks
        before scanning text)."""
        return any(name not in self.chunks for name in TEXT_CHUNKS)

    def note_text(self, texts: Iterable[str]) -> None:
        """Send the chunks that ``texts`` (Markdown about to reach the views) needs."""
        for text in texts:
            if not self.missing():
                return
            for name in needed_chunks(text) - set(self.chunks):
                self.provide(name)

    def _on_view_msg(self, _widget: Any, content: Any, _buffers: Sequence[Any]) -> None:
        # the main thread or a subshell thread: a view met a formula or a code block.
        # The view is not trusted: a message that does not fit its type is ignored
        try:
            msg = parse_view_msg(content)
            if msg["kind"] != "chunk":
                raise BadViewMessage(f"{msg['kind']}: not a message to the runtime")
            self.provide(msg["name"])
        except BadViewMessage as bad:
            self._ignored.note(str(bad), content)
        except Exception:
            log.exception("nbstream: handling a view message to the runtime failed")


def _read(name: str, fallback: str) -> str:
    path = _STATIC / name
    return path.read_text(encoding="utf-8") if path.exists() else fallback


#: the module the runtime carries as its bundle; benchmarks set "standalone.js" (every
#: chunk inside: what a view parsed before chunks existed) before the first widget
_bundle_file = "widget.js"


def _new_runtime() -> Runtime:
    bundle = _read(_bundle_file, _MISSING_BUNDLE)
    css = _read("widget.css", "")
    parts = [bundle, css, *(_read(f"{name}.js", "") for name in CHUNKS)]
    version = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return Runtime(bundle=bundle, css=css, version=version)


_runtime: Runtime | None = None
_lock = threading.Lock()


def shared_runtime() -> Runtime:
    """The kernel's runtime widget, created (its comm opened) on first use."""
    global _runtime
    with _lock:
        if _runtime is None or _runtime.comm is None:
            _runtime = _new_runtime()
        return _runtime


def runtime_ref() -> str:
    """How a widget's ``_runtime`` trait names the runtime: ``IPY_MODEL_<model id>``."""
    return f"IPY_MODEL_{shared_runtime().model_id}"


def standalone() -> bool:
    """Whether widgets carry the whole front end themselves (no shared runtime).

    So in marimo, which renders each anywidget on its own and is not known to
    restore a plain ipywidgets model that no cell displays; there the notebook
    is not saved with widget state anyway.
    """
    marimo = sys.modules.get("marimo")
    try:
        return bool(marimo is not None and marimo.running_in_notebook())
    except Exception:  # an old or partial marimo: be safe, carry the bundle
        return marimo is not None


def widget_esm() -> str:
    """The ``_esm`` of every nbstream widget: the small loader (``static/loader.js``),
    or the whole front end, chunks included (``static/standalone.js``), where there is
    no shared runtime (:func:`standalone`).

    The text, not the Path: anywidget connects every instance of a class whose
    ``_esm`` is a file to that file's change signal (hot reload), keeping each
    widget alive for ever; a str keeps closed widgets collectable."""
    return _read("standalone.js" if standalone() else "loader.js", _MISSING_BUNDLE)


def widget_css() -> str:
    """The ``_css`` of every nbstream widget: none (the runtime adds it), or the
    stylesheet where there is no shared runtime."""
    return _read("widget.css", "") if standalone() else ""


def widget_runtime_ref() -> str:
    """A new widget's ``_runtime``: :func:`runtime_ref`, or "" where there is none."""
    return "" if standalone() else runtime_ref()


def markdown_of(body: DeltaBody) -> str:
    """The Markdown a view renders of a delta ``body``: its answer and reasoning text,
    and a tool result's ``text/markdown`` display (a tool call's arguments are JSON,
    shown plain)."""
    if isinstance(body, str):
        return body
    out: list[str] = []
    for run in body:
        if run[0] in ("answer", "reasoning"):
            out.append(run[1])
        elif run[0] == "tool_result" and len(run) > 3:
            display: Any = run[3]
            markdown = display.get("text/markdown") if isinstance(display, dict) else None
            if isinstance(markdown, str):
                out.append(markdown)
    return "\n".join(out)


def has_tool_part(body: DeltaBody) -> bool:
    """Whether a delta ``body`` holds a run of the tool loop (a call's arguments, a
    result, a new round): what a view shows with the tools chunk (js/src/toolcard.ts;
    the view's buffer.ts takes the same runs out of the reply's text)."""
    return not isinstance(body, str) and any(
        run[0] not in ("answer", "reasoning") for run in body)


def note_bodies(bodies: Iterable[DeltaBody]) -> None:
    """Send the chunks the delta ``bodies`` need to the views, through the kernel's
    runtime (the pump thread calls it with what it sends; nothing where widgets carry
    the whole front end): those their Markdown needs, and the tools chunk with the
    first tool part."""
    rt = _runtime
    if rt is None or rt.comm is None:
        return
    if "tools" not in rt.chunks:
        bodies = list(bodies)
        if any(has_tool_part(b) for b in bodies):
            rt.provide("tools")
    if rt.missing():
        rt.note_text(markdown_of(b) for b in bodies)


#: the first marimo whose comms accept sends from any thread of the session
MARIMO_MIN = (0, 23, 14)

_warned: set[str] = set()


def running_in_marimo() -> bool:
    """Whether this kernel is a marimo notebook's (marimo imported and running one)."""
    try:
        import marimo

        return bool(marimo.running_in_notebook())
    except Exception:
        return False


def version_tuple(version: str | None) -> tuple[int, ...]:
    """``"0.23.14"`` as ``(0, 23, 14)``: the first three numbers (``()`` for none)."""
    if not version:
        return ()
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3])


def _marimo_version() -> str | None:
    try:
        return importlib.metadata.version("marimo")
    except importlib.metadata.PackageNotFoundError:
        return None


def warn_unsupported_frontend() -> None:
    """Warn once, at a widget's construction, where updates are known not to render."""
    if "marimo" in sys.modules and "marimo" not in _warned and running_in_marimo():
        version = _marimo_version()
        if version and version_tuple(version) < MARIMO_MIN:
            _warned.add("marimo")
            warnings.warn(
                f"nbstream needs marimo >= {'.'.join(map(str, MARIMO_MIN))} (this is "
                f"{version}): older marimo drops updates sent from background threads and "
                "the widget stays empty. Upgrade marimo.",
                RuntimeWarning, stacklevel=3)
