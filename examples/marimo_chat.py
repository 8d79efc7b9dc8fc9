"""nbstream's chat in marimo: `marimo run examples/marimo_chat.py` (or `marimo edit`).

Needs marimo >= 0.23.14 (older marimo drops messages sent from background
threads, so the widget would stay empty; nbstream warns at construction).
The source here is scripted, so the example is fast, offline and the same every
time (tests/test_browser_marimo_voila.py drives it in a real browser); put
``ChatWidget()`` for the embedded model, or any other source.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App()


@app.cell
def _():
    import time

    import marimo as mo

    from nbstream import ChatWidget
    from nbstream.sources import IteratorSource

    return ChatWidget, IteratorSource, mo, time


@app.cell
def _(IteratorSource, time):
    def answer(messages):
        """Echo the question, then a few words (many when it starts with "long")."""
        question = messages[-1]["content"]
        words = 400 if question.startswith("long") else 12
        yield f"You said: {question}."
        for i in range(words):
            time.sleep(0.02)  # the pace of a small model
            yield f" word{i}"

    source = IteratorSource(answer)
    return (source,)


@app.cell
def _(ChatWidget, mo, source):
    chat = mo.ui.anywidget(ChatWidget(source, title="nbstream in marimo"))
    chat
    return


if __name__ == "__main__":
    app.run()
