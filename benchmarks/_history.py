"""Long conversations of model-shaped Markdown, for the long-chat benchmark and tests.

``history(n)`` is an OpenAI-style ``[{"role", "content"}, ...]`` of ``n`` messages
(questions and answers alternating) that ``ChatWidget(source, messages=...)``
takes. The answers are what models write: headings, bullet and numbered lists,
tables, code blocks in several languages, inline and display math, CJK text and
emoji, long and short paragraphs. 1,000 messages hold about 0.6 MB of Markdown.

The one place the long-chat figures get their text from: when the shared corpus
of model answers lands (``benchmarks/corpus/*.md``, one answer per file), its
answers are used instead of the built-in ones below, so every benchmark streams
the same text. Deterministic for a given ``seed``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent / "corpus"

QUESTIONS = [
    "How do I read a CSV file in Python and group it by a column?",
    "Explain the difference between a process and a thread.",
    "What is the derivative of x^2 sin(x)?",
    "Can you write a Rust function that reverses a linked list?",
    "用中文解释一下什么是梯度下降？",
    "Compare SQL joins with an example table.",
    "Why is my JavaScript fetch call returning a pending promise?",
    "Give me a checklist for reviewing a pull request 🙂",
    "How does attention work in a transformer?",
    "Write a bash one-liner that counts lines in all .py files.",
    "What is Bayes' theorem, with a worked example?",
    "Summarise the trade-offs of microservices.",
]

_TOPICS = ["the cache", "the scheduler", "the parser", "the tokenizer", "the index",
           "the renderer", "the pipeline", "the database", "the request", "the model"]
_VERBS = ["reads", "writes", "updates", "streams", "checks", "sorts", "merges", "splits"]
_WORDS = " ".join([
    "the value of each step depends on what came before so we keep a running total",
    "and compare it with the expected result before moving on to the next item in the",
    "list which keeps memory bounded and the code simple"]).split(" ")


def _sentence(rng: random.Random, n: int = 14) -> str:
    words = [rng.choice(_WORDS) for _ in range(n)]
    return f"{rng.choice(_TOPICS).capitalize()} {rng.choice(_VERBS)} " + " ".join(words) + "."


def _para(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng) for _ in range(sentences))


def _python(rng: random.Random) -> str:
    col = rng.choice(["city", "team", "year", "label"])
    return (
        "```python\nimport pandas as pd\n\n"
        f"df = pd.read_csv(\"data.csv\")\n"
        f"summary = df.groupby(\"{col}\")[\"value\"].agg([\"mean\", \"count\"])\n"
        "for key, row in summary.iterrows():\n"
        f"    print(f\"{{key}}: {{row['mean']:.2f}} ({{row['count']}} rows)\")\n```"
    )


def _rust(rng: random.Random) -> str:
    return (
        "```rust\npub fn reverse<T>(head: Option<Box<Node<T>>>) -> Option<Box<Node<T>>> {\n"
        "    let mut prev = None;\n    let mut cur = head;\n"
        "    while let Some(mut node) = cur {\n        cur = node.next.take();\n"
        "        node.next = prev;\n        prev = Some(node);\n    }\n    prev\n}\n```"
    )


def _js(rng: random.Random) -> str:
    n = rng.randint(2, 9)
    return (
        "```javascript\nasync function load(url) {\n"
        "  const res = await fetch(url);\n"
        "  if (!res.ok) throw new Error(`HTTP ${res.status}`);\n"
        f"  return (await res.json()).items.slice(0, {n});\n}}\n```"
    )


def _bash(rng: random.Random) -> str:
    return "```bash\nfind . -name '*.py' -print0 | xargs -0 wc -l | sort -n | tail -5\n```"


def _sql(rng: random.Random) -> str:
    return (
        "```sql\nSELECT u.name, COUNT(o.id) AS orders\nFROM users u\n"
        "LEFT JOIN orders o ON o.user_id = u.id\nGROUP BY u.name\nORDER BY orders DESC;\n```"
    )


def _table(rng: random.Random) -> str:
    rows = "\n".join(
        f"| {rng.choice(_TOPICS)} | {rng.randint(1, 999)} | {rng.choice(_VERBS)} |"
        for _ in range(rng.randint(3, 5)))
    return "| part | cost (ms) | what it does |\n|:-----|---------:|--------------|\n" + rows


def _list(rng: random.Random, numbered: bool = False) -> str:
    items = []
    for i in range(rng.randint(3, 5)):
        mark = f"{i + 1}." if numbered else "-"
        items.append(f"{mark} **{rng.choice(_TOPICS)}** {_sentence(rng, 8)}")
        if i == 1:
            items.append(f"   - {_sentence(rng, 6)}")
    return "\n".join(items)


def _math(rng: random.Random) -> str:
    a = rng.randint(2, 9)
    return (
        f"The derivative is $\\frac{{d}}{{dx}}\\left(x^{a} \\sin x\\right) = "
        f"{a}x^{{{a - 1}}} \\sin x + x^{a} \\cos x$, and over a full period\n\n"
        f"$$\\int_0^{{2\\pi}} \\sin^2(x)\\,dx = \\pi$$\n\n"
        "With Bayes' theorem, $P(A \\mid B) = \\frac{P(B \\mid A)\\,P(A)}{P(B)}$."
    )


def _cjk(rng: random.Random) -> str:
    return rng.choice([
        "梯度下降是一种优化算法：每一步都沿着损失函数的负梯度方向更新参数，学习率决定步长。",
        "注意力机制计算查询与键的相似度，再用归一化的权重对值求加权和。🚀",
        "数据库连接有内连接、左连接和全连接三种常见形式，选择取决于需要保留哪些行。",
    ])


_SECTIONS = [
    lambda r: f"## {r.choice(['Overview', 'How it works', 'Example', 'Details'])}\n\n"
              f"{_para(r, 3)}",
    lambda r: f"### Steps\n\n{_list(r, numbered=True)}",
    lambda r: _list(r),
    lambda r: f"Here is an example:\n\n{r.choice([_python, _rust, _js, _bash, _sql])(r)}",
    lambda r: f"{_para(r, 1)}\n\n{_table(r)}",
    lambda r: _math(r),
    lambda r: f"{_cjk(r)}\n\n{_para(r, 1)} ✅",
    lambda r: f"> {_sentence(r, 12)}",
]


def _builtin_answer(rng: random.Random) -> str:
    parts = [_para(rng, rng.randint(1, 3))]
    for section in rng.sample(_SECTIONS, k=rng.randint(3, 4)):
        parts.append(section(rng))
    parts.append(rng.choice(["Hope this helps! 🙂", "Let me know if you want more detail.",
                             f"In short: {_sentence(rng, 8)}"]))
    return "\n\n".join(parts)


def answers(count: int, seed: int = 0) -> list[str]:
    """``count`` model-shaped answers: the shared corpus's when it exists, else built in."""
    rng = random.Random(seed)
    files = sorted(CORPUS.glob("*.md")) if CORPUS.is_dir() else []
    if files:
        texts = [f.read_text(encoding="utf-8") for f in files]
        return [texts[i % len(texts)] for i in range(count)]
    return [_builtin_answer(rng) for _ in range(count)]


def history(messages: int, seed: int = 0) -> list[dict[str, Any]]:
    """``messages`` messages, a question first, then questions and answers alternating."""
    rng = random.Random(seed + 1)
    replies = answers((messages + 1) // 2, seed)
    out: list[dict[str, Any]] = []
    for i in range(messages):
        if i % 2 == 0:
            q = rng.choice(QUESTIONS)
            out.append({"role": "user", "content": f"{q} (question {i // 2 + 1})"})
        else:
            answer = f"{replies[i // 2]}\n\n*Answer {i // 2 + 1}.*"
            out.append({"role": "assistant", "content": answer})
    return out


def markdown_bytes(msgs: list[dict[str, Any]]) -> int:
    """UTF-8 bytes of the messages' text."""
    return sum(len(str(m["content"]).encode()) for m in msgs)


if __name__ == "__main__":
    h = history(1000)
    print(f"{len(h)} messages, {markdown_bytes(h) / 1e6:.2f} MB of Markdown")
    print(h[1]["content"])
