"""The benchmark corpus (benchmarks/corpus, benchmarks/_corpus.py): model-shaped
answers, cut into tokenizer-sized pieces, the same from Python and from the
browser scenarios' loader (tests/browser/corpus.mjs)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
from conftest import BROWSER_DIR, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import _corpus as corpus


def test_every_answer_is_there_and_pieces_join_back() -> None:
    answers = corpus.answers()
    assert len(answers) >= 15
    for a in answers:
        pieces = corpus.split_pieces(a.text)
        assert "".join(pieces) == a.text, a.name
        assert all(pieces), a.name
    # pieces are tokenizer-sized, not words: ~3 characters over the corpus
    text = "".join(a.text for a in answers)
    mean = len(text) / sum(len(corpus.split_pieces(a.text)) for a in answers)
    assert 2.5 <= mean <= 4.0, mean


def test_the_corpus_is_shaped_like_model_output() -> None:
    """Every construct the issue names is there, more than once where it matters."""
    text = "\n".join(a.text for a in corpus.answers())
    langs = set(re.findall(r"^```([a-z]+)$", text, re.M))
    assert {"python", "rust", "sql", "typescript", "yaml", "bash"} <= langs, langs
    assert len(re.findall(r"^#{1,4} ", text, re.M)) >= 30  # headings
    assert len(re.findall(r"^\s*[-*] ", text, re.M)) >= 60  # bullet items
    assert len(re.findall(r"^ {2,}[-*] |^ {2,}\d+\. ", text, re.M)) >= 10  # nested items
    assert len(re.findall(r"^\d+\. ", text, re.M)) >= 15  # numbered items
    assert len(re.findall(r"^\|[-:| ]+\|$", text, re.M)) >= 10  # tables' delimiter rows
    assert len(re.findall(r"\$\$", text)) >= 20  # display math
    assert len(re.findall(r"(?<!\$)\$[^$\n]+\$(?!\$)", text)) >= 30  # inline math
    assert "\\(" in text and "\\[" in text  # the other two delimiters
    assert len(re.findall(r"[\u4e00-\u9fff]", text)) >= 400  # Chinese
    assert re.search(r"[\u3040-\u30ff]", text) and re.search(r"[\uac00-\ud7af]", text)
    assert len(re.findall(r"[\U0001F300-\U0001FAFF]", text)) >= 25  # emoji
    paragraphs = [p for p in text.split("\n\n") if p and p[0].isalpha()]
    assert max(map(len, paragraphs)) > 500 and min(map(len, paragraphs)) < 120
    assert any(a.reasoning for a in corpus.answers())  # a thinking model's reasoning


def test_a_stream_is_exactly_n_pieces_from_any_answer() -> None:
    n = len(corpus.answers())
    for start in (0, 3, n - 1, n + 2):
        pieces = corpus.corpus_pieces(1500, start)
        assert len(pieces) == 1500
        assert corpus.corpus_text(1500, start) == "".join(pieces)
    # long streams cycle through the answers, a blank line between two
    long = corpus.corpus_text(20_000)
    assert long.startswith(corpus.answers()[0].text + corpus.SEPARATOR)
    assert corpus.answers()[-1].text in long
    assert corpus.corpus_text(100, start=n) == corpus.corpus_text(100, start=0)
    with pytest.raises(ValueError, match="positive"):
        corpus.corpus_pieces(0)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
@pytest.mark.parametrize(("pieces", "start"), [(20_000, 0), (1500, 3), (777, 17)])
def test_the_browser_loader_gives_the_same_text(pieces: int, start: int) -> None:
    out = subprocess.run(
        ["node", str(BROWSER_DIR / "corpus.mjs"), str(pieces), str(start)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    got = json.loads(out)
    assert got["answers"] == len(corpus.answers())
    assert got["text"] == corpus.corpus_text(pieces, start)
