"""Saved-notebook size: what N nbstream widgets add to a notebook saved with widget state.

Executes a notebook of N ChatWidgets, each with one finished reply, with
nbclient's ``store_widget_state=True`` (what ``jupyter nbconvert --execute``
and JupyterLab's "save widget state" keep), and reports the file's size and
each widget model's state size beyond its conversation. The previous way
(every widget storing the whole bundle as its own ``_esm``/``_css``) is
measured in the same run by a subclass that does exactly that; so is the
runtime as it was before the heavy renderers became chunks (its bundle held
Temml, highlight.js and the table of character references:
``runtime._bundle_file = "standalone.js"``), and a
chat whose reply has math and code (the runtime then holds those chunks,
once). An ``ipywidgets.HTML`` holding the same reply is the baseline.

    .venv/bin/python benchmarks/saved_notebook.py              # 1 and 8 widgets
    .venv/bin/python benchmarks/saved_notebook.py --widgets 1,8,32

Sizes, not times: the figures do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
REPLY = "A short reply, streamed. " * 40  # ~1 KB of text per widget
#: the same size, with a formula and a code block (the chunks come with it)
REPLY_RICH = ("A reply with $e^{i\\pi} + 1 = 0$ and code:\n\n```python\nprint('hi')\n```\n"
              + "More text. " * 80)

WAYS = {
    "nbstream": "from nbstream import ChatWidget as W\n",
    "bundle per widget (previous)": (
        # the previous way: every instance stores the bundle and the CSS in its state
        "from pathlib import Path\n"
        "import nbstream, traitlets\n"
        "from nbstream import ChatWidget\n"
        "_static = Path(nbstream.__file__).parent / 'static'\n"
        "class W(ChatWidget):\n"
        "    _esm = (_static / 'widget.js').read_text()\n"
        "    _css = (_static / 'widget.css').read_text()\n"
        "    @traitlets.default('_runtime')\n"
        "    def _no_runtime(self):\n"
        "        return ''\n"
    ),
    "nbstream, chunks in the bundle (previous)": (
        # the runtime's bundle held every chunk, loaded or not
        "import nbstream.widgets.runtime as _rt\n"
        "_rt._bundle_file = 'standalone.js'\n"
        "from nbstream import ChatWidget as W\n"
    ),
}


def cells(way: str, n: int, reply: str = REPLY) -> list[str]:
    return [
        WAYS[way] + "from nbstream.sources import ScriptedSource\n"
        f"chats = [W(ScriptedSource({reply!r}, rate=100000)) for _ in range({n})]\n"
        "for c in chats:\n"
        "    c.send('hi').wait(30)\n"
        "    display(c)",
    ]


def html_cells(n: int) -> list[str]:
    return [
        "import ipywidgets\n"
        f"hs = [ipywidgets.HTML({REPLY!r}) for _ in range({n})]\n"
        "for h in hs:\n"
        "    display(h)",
    ]


def execute(sources: list[str], out: Path | None = None) -> dict[str, Any]:
    """Run the cells with nbclient (store_widget_state); return the saved notebook as a dict."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    NotebookClient(nb, timeout=120, kernel_name="python3", store_widget_state=True).execute(env=env)
    text = nbformat.writes(nb)
    if out is not None:
        out.write_text(text)
    return dict(json.loads(text))


_MESSAGE_KEY = re.compile(r"^m\d+(\.\d+)?$")


def measure(nb: dict[str, Any]) -> dict[str, Any]:
    """File size; per model: state bytes, and bytes beyond its conversation text."""
    text = json.dumps(nb, indent=1)
    state = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    models = []
    for mid, m in state.items():
        st = m.get("state", {})
        size = len(json.dumps(m))
        # the conversation: one key per message and per delta (m3, m3.1, ...), or the
        # whole `conversation` list of notebooks saved before per-message state
        convo = sum(len(json.dumps({k: v})) for k, v in st.items() if _MESSAGE_KEY.match(k))
        convo += len(json.dumps(st.get("conversation", []))) + len(json.dumps(st.get("value", "")))
        has = "last_id" in st or "conversation" in st
        models.append({"id": mid, "model": m.get("model_name"), "bytes": size,
                       "beyond_text": size - convo, "has_conversation": has})
    return {"file_bytes": len(text), "models": models}


def per_widget_beyond_text(m: dict[str, Any]) -> list[int]:
    """Each widget model's state beyond its text (the runtime and layout models excluded)."""
    return [x["beyond_text"] for x in m["models"] if x["has_conversation"]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--widgets", default="1,8")
    args = ap.parse_args(argv)
    ns = [int(x) for x in args.widgets.split(",")]
    rows = []
    for n in ns:
        for way in WAYS:
            m = measure(execute(cells(way, n)))
            per = per_widget_beyond_text(m)
            rows.append((way, n, m["file_bytes"], max(per), len(m["models"])))
            print(f"[{way} ×{n}] {m['file_bytes']:,} bytes", file=sys.stderr)
        m = measure(execute(cells("nbstream", n, REPLY_RICH)))
        rows.append(("nbstream, a reply with math and code", n, m["file_bytes"],
                     max(per_widget_beyond_text(m)), len(m["models"])))
        m = measure(execute(html_cells(n)))
        rows.append(("ipywidgets.HTML (baseline)", n, m["file_bytes"], None, len(m["models"])))
    print("\nNotebook saved by nbclient with store_widget_state=True; one ~1 KB reply per widget\n")
    print("| way | widgets | saved file | per widget beyond its text | widget models |")
    print("|---|---:|---:|---:|---:|")
    for way, n, size, per, models in rows:
        per_s = f"{per / 1024:.1f} KB" if per is not None else "-"
        print(f"| {way} | {n} | {size / 1024:.0f} KB | {per_s} | {models} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
