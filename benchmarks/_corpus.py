"""The benchmark corpus: model-shaped answers that the browser benchmarks stream.

``benchmarks/corpus/*.md`` holds answers written for the project the way chat
models write them: headings, bullet and numbered lists (nested), tables, code
blocks in several languages (Python, Rust, SQL, TypeScript, YAML, Bash,
Nginx, Dockerfile), inline and display math in the four delimiters the view
renders, Chinese, Japanese and Korean text, emoji, long and short paragraphs.
An answer may have reasoning beside it (``NAME.reasoning.md``), as a thinking
model streams it before the answer.

A stream of ``n`` pieces is the answers one after another (from answer
``start``, cycling), separated by a blank line, cut to exactly ``n`` pieces.
Pieces are shaped like a modern tokenizer's (:func:`split_pieces`): about 3
characters each over the corpus (the embedded SmolLM2's byte-level tokenizer
makes 2.8 on the same text; a CJK character is one piece or two here, one to
three tokens there), never the whole words of ``ScriptedSource``'s own split.

The same texts are read by the browser scenarios (``tests/browser/corpus.mjs``
mirrors :func:`answers` and :func:`corpus_text`; a test checks that both give
the same text). Used by the benchmarks in this folder (imported as
``_corpus``) and, through :func:`kernel_source`, by the notebooks they write,
which build the same pieces in the kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"

#: between two answers of one stream
SEPARATOR = "\n\n"

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
#: one piece: line breaks together; otherwise blanks before a chunk of one kind
#: (1-2 CJK characters, up to 6 letters, up to 3 digits, up to 3 marks, an
#: underscore run), or trailing blanks alone
_PIECE = re.compile(
    rf"\n+|[^\S\n]*(?:[{_CJK}]{{1,2}}|(?:(?![{_CJK}])[^\W\d_]){{1,6}}|\d{{1,3}}"
    rf"|(?:(?![{_CJK}])[^\w\s]){{1,3}}|_+)|[^\S\n]+"
)


@dataclass(frozen=True)
class Answer:
    """One answer of the corpus: its file's stem, its Markdown, its reasoning ("" if none)."""

    name: str
    text: str
    reasoning: str


@cache
def answers() -> tuple[Answer, ...]:
    """Every answer, in the order of its file name."""
    found = []
    for path in sorted(CORPUS_DIR.glob("*.md")):
        if path.name.endswith(".reasoning.md"):
            continue
        reasoning = path.with_name(path.stem + ".reasoning.md")
        found.append(Answer(
            name=path.stem,
            text=path.read_text(encoding="utf-8").strip("\n"),
            reasoning=reasoning.read_text(encoding="utf-8").strip("\n")
            if reasoning.exists() else "",
        ))
    if not found:
        raise FileNotFoundError(f"no answers in {CORPUS_DIR}")
    return tuple(found)


def split_pieces(text: str) -> list[str]:
    """``text`` in tokenizer-sized pieces; their concatenation is ``text``."""
    pieces = _PIECE.findall(text)
    if sum(map(len, pieces)) != len(text):  # a character no alternative takes
        raise ValueError("split_pieces lost characters")
    return pieces


def corpus_pieces(pieces: int, start: int = 0) -> list[str]:
    """Exactly ``pieces`` pieces of the answers from answer ``start`` on (cycling)."""
    if pieces < 1:
        raise ValueError(f"pieces must be positive, got {pieces}")
    all_answers = answers()
    out: list[str] = []
    i = start
    while len(out) < pieces:
        if out:
            out.append(SEPARATOR)
        out.extend(split_pieces(all_answers[i % len(all_answers)].text))
        i += 1
    return out[:pieces]


def corpus_text(pieces: int, start: int = 0) -> str:
    """The text of :func:`corpus_pieces`."""
    return "".join(corpus_pieces(pieces, start))


def kernel_source() -> str:
    """A cell's first lines that make ``corpus_pieces`` and ``corpus_text`` importable in a
    kernel (started anywhere on this machine)."""
    return (
        f"import sys as _sys\n"
        f"_sys.path.insert(0, {str(CORPUS_DIR.parent)!r})\n"
        f"from _corpus import corpus_pieces, corpus_text\n"
    )
