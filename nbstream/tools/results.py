"""What a tool returned, in the two forms it travels in: text for the model, a display for the view.

A tool may return text, JSON-able data (dicts, lists, numbers, a pydantic model,
a dataclass), or any object with a rich repr (IPython's ``_repr_mimebundle_``,
``_repr_html_``, ``_repr_markdown_``, ``_repr_png_``, ``_repr_jpeg_``; a
matplotlib figure). The model receives a text form, bounded at
:data:`MAX_MODEL_TEXT` characters with the truncation said in the text; the
view receives that text plus the richest display it can show safely
(HTML and Markdown are sanitized there like model output; images are PNG or
JPEG only, never SVG), each bounded (:data:`DISPLAY_LIMITS`): a display over
its bound is left out and the card says so. What the view gets is also what a
saved notebook keeps, so the same bounds hold there.

Pure functions; any thread (a tool's own thread calls :func:`to_result`).
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DISPLAY_LIMITS", "MAX_MODEL_TEXT", "ToolResult", "bounded", "to_result"]

#: characters of a result the model receives (and the view shows as text)
MAX_MODEL_TEXT = 20_000
#: the displays the view takes, and the most characters of each
DISPLAY_LIMITS: Mapping[str, int] = {
    "text/html": 200_000,
    "text/markdown": 100_000,
    "image/png": 700_000,  # base64: about 512 KB of image
    "image/jpeg": 700_000,
}
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")


@dataclass(frozen=True)
class ToolResult:
    """A tool's result: ``text`` is what the model receives (bounded, truncation said);
    ``display`` holds the richer forms the view shows (MIME type -> data)."""

    text: str
    display: Mapping[str, str] = field(default_factory=dict)
    #: characters of the text form left out (0: whole)
    truncated: int = 0
    #: displays left out for their size: MIME type -> characters
    omitted: Mapping[str, int] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        """The display as the view receives it (``omitted`` included where any)."""
        out: dict[str, Any] = dict(self.display)
        if self.omitted:
            out["omitted"] = dict(self.omitted)
        return out


def bounded(text: str, limit: int = MAX_MODEL_TEXT) -> tuple[str, int]:
    """``text`` cut at ``limit`` characters with the cut said; (text, characters left out)."""
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    return (f"{text[:limit]}\n… [truncated: {cut:,} more characters of {len(text):,} "
            "left out]"), cut


def to_result(value: Any) -> ToolResult:
    """The two forms of ``value``, a tool's return value."""
    if isinstance(value, ToolResult):
        return value
    display: dict[str, str] = {}
    text: str
    if value is None:
        text = "(the tool returned nothing)"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, (bytes, bytearray)):
        text = f"({len(value)} bytes of binary data)"
    elif isinstance(value, (bool, int, float)) or _is_jsonable(value):
        text = json.dumps(value, ensure_ascii=False, indent=1)
    else:
        bundle = _mimebundle(value)
        plain = bundle.pop("text/plain", None)
        for mime, data in bundle.items():
            if mime in DISPLAY_LIMITS and isinstance(data, str):
                display[mime] = data
        dumped = _dumped(value)
        if dumped is not None:
            text = dumped
        elif _is_figure(value):
            titles = [t for ax in value.get_axes() if (t := ax.get_title())]
            named = f" ({'; '.join(titles)})" if titles else ""
            text = f"(a matplotlib figure{named}, shown to the user as an image)"
        elif isinstance(plain, str) and plain:
            text = plain
        else:
            text = repr(value)
    text, cut = bounded(text)
    kept: dict[str, str] = {}
    omitted: dict[str, int] = {}
    for mime, data in display.items():
        if mime.startswith("image/") and not _BASE64.match(data):
            continue
        if len(data) > DISPLAY_LIMITS[mime]:
            omitted[mime] = len(data)
        else:
            kept[mime] = data
    return ToolResult(text, kept, cut, omitted)


def _is_jsonable(value: Any) -> bool:
    if not isinstance(value, (dict, list, tuple)):
        return False
    try:
        json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return False
    return True


def _dumped(value: Any) -> str | None:
    """A pydantic model's or a dataclass's JSON, else None."""
    dump = getattr(value, "model_dump_json", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return str(dump(indent=1))
        except Exception:
            return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return json.dumps(dataclasses.asdict(value), ensure_ascii=False, indent=1,
                              default=str)
        except Exception:
            return None
    return None


def _is_figure(value: Any) -> bool:
    figure = sys.modules.get("matplotlib.figure")
    return figure is not None and isinstance(value, figure.Figure)


def _mimebundle(value: Any) -> dict[str, Any]:
    """What IPython would display for ``value`` (the formats the view can take)."""
    bundle: dict[str, Any] = {}
    method = getattr(value, "_repr_mimebundle_", None)
    if callable(method) and not isinstance(value, type):
        try:
            got = method(include=None, exclude=None)
            data = got[0] if isinstance(got, tuple) else got
            if isinstance(data, Mapping):
                bundle.update(data)
        except Exception:
            pass
    for mime, name in (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
                       ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_")):
        if mime in bundle:
            continue
        method = getattr(value, name, None)
        if not callable(method) or isinstance(value, type):
            continue
        try:
            data = method()
        except Exception:
            continue
        if isinstance(data, tuple):
            data = data[0]
        if isinstance(data, bytes) and mime.startswith("image/"):
            data = base64.b64encode(data).decode("ascii")
        if isinstance(data, str):
            bundle[mime] = data
    if "image/png" not in bundle and _is_figure(value):
        buf = io.BytesIO()
        try:
            value.savefig(buf, format="png", bbox_inches="tight")
            bundle["image/png"] = base64.b64encode(buf.getvalue()).decode("ascii")
        except Exception:
            pass
    for mime, data in list(bundle.items()):
        if isinstance(data, bytes) and mime.startswith("image/"):
            bundle[mime] = base64.b64encode(data).decode("ascii")
    bundle.setdefault("text/plain", _safe_repr(value))
    return bundle


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:
        return f"<{type(value).__name__}: repr failed: {exc}>"
