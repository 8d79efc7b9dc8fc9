"""The documentation's links lead somewhere, and the README's picture is there.

Every relative link and image of README.md, CONTRIBUTING.md, benchmarks/README.md and
docs/*.md must name a file or folder of the repository, and a ``#fragment`` must name a
heading of the Markdown file it points into (as GitHub makes anchors from headings).
A file renamed or a heading reworded without its links fails here, in the fast tests.
"""

from __future__ import annotations

import re
import struct
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "benchmarks" / "README.md",
        *sorted((REPO / "docs").glob("*.md"))]

#: [text](target) and ![alt](target); a target has no spaces (titles are not used here)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(text: str) -> str:
    """``text`` without its fenced and indented code blocks (links there are code)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced and not line.startswith("    "):
            out.append(line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    kept = "".join(c for c in text if unicodedata.category(c)[0] in "LNM" or c in " -_")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(doc: Path) -> None:
    found = links(doc)
    assert found, f"{doc} has no links at all: is the pattern broken?"
    broken = []
    for target in found:
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        where, _, fragment = target.partition("#")
        dest = (doc.parent / where).resolve() if where else doc
        if not dest.is_relative_to(REPO) or not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading #{fragment} in {dest.relative_to(REPO)}")
    assert not broken, f"{doc.relative_to(REPO)}: " + "; ".join(broken)


def test_slug_follows_github() -> None:
    assert slug("`kernel_bench.py`: nbstream against the naive ways, side by side") == (
        "kernel_benchpy-nbstream-against-the-naive-ways-side-by-side")
    assert slug("A turn's bytes") == "a-turns-bytes"
    assert slug("2026-11-30, under load") == "2026-11-30-under-load"


def test_the_readme_shows_its_picture() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "](docs/chat.png)" in readme.split("## Install")[0], "the picture comes first"
    data = (REPO / "docs" / "chat.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    # a README column is ~900 px wide; the first screen must load at once
    assert 600 <= width <= 1200 and 300 <= height <= 900, (width, height)
    assert len(data) < 150_000, len(data)
