"""What each source makes of attachments (#21): OpenAI chat-completions content parts (the
request as a recording server receives it), the Responses API's input items, a tiny
random-weight vision model answering through TransformersSource (its processor built in
code, and the same model saved as a folder), and text-only models given texts in the
prompt and refusing images."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _model_fixtures import tiny_model, tiny_tokenizer, tiny_vision
from _servers import ServerProcess, start_fake_server
from PIL import Image

from nbstream import Attachment, ChatWidget, attach
from nbstream.core.attachment import UnsupportedAttachment
from nbstream.sources import ChatMessage
from nbstream.sources.content_parts import chat_content, responses_content, user_text


def png(size: tuple[int, int] = (40, 30), color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


IMAGE = attach(png())
TABLE = attach(pd.DataFrame({"a": [1, 2]}), name="t.csv")
PDF = Attachment("report.pdf", "application/pdf", b"%PDF-1.4 tiny")
ASKED: ChatMessage = {"role": "user", "content": "What is this?",
                      "attachments": (IMAGE, TABLE, PDF)}
TABLE_TEXT = ('<attachment name="t.csv" type="text/csv" note="2 rows × 1 column">\n'
              "a\n1\n2\n\n</attachment>")


# ---------------------------------------------------------------- the shapes
def test_chat_completions_content_parts() -> None:
    assert chat_content({"role": "user", "content": "plain"}) == "plain"  # as before
    assert chat_content(ASKED) == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": IMAGE.data_url()}},
        {"type": "text", "text": TABLE_TEXT},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF.data_url()}},
    ]
    assert IMAGE.data_url().startswith("data:image/png;base64,iVBORw0KGgo")


def test_responses_api_input_items() -> None:
    assert responses_content({"role": "user", "content": "plain"}) == "plain"
    assert responses_content(ASKED) == [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": IMAGE.data_url(), "detail": "auto"},
        {"type": "input_text", "text": TABLE_TEXT},
        {"type": "input_file", "filename": "report.pdf", "file_data": PDF.data_url()},
    ]


def test_a_text_only_prompt_holds_the_question_then_each_text() -> None:
    assert user_text({"role": "user", "content": "Sum it", "attachments": (TABLE,)}) == \
        f"Sum it\n\n{TABLE_TEXT}"


# -------------------------------------------------------- OpenAI, for real
@pytest.fixture(scope="module")
def fake() -> Iterator[ServerProcess]:
    server = start_fake_server()
    yield server
    server.stop()


@pytest.mark.server
def test_openai_source_sends_content_parts_to_the_server(fake: ServerProcess) -> None:
    from nbstream.sources import OpenAISource
    from nbstream.sources.sse import DEFAULT_ACCEPTS

    src = OpenAISource("fake", base_url=fake.base_url, accepts=DEFAULT_ACCEPTS | {"application/pdf"})
    chat = ChatWidget(src)
    chat.send("What is this?", attachments=[IMAGE, TABLE, PDF]).wait(20)
    chat.send("And?").wait(20)
    first, second = [r["body"]["messages"] for r in fake.requests()[-2:]]
    assert first == [{"role": "user", "content": chat_content(ASKED)}]
    # turn 2: the history carries turn 1 with its parts; the new question is a plain string
    assert second[0] == first[0] and second[2] == {"role": "user", "content": "And?"}
    assert second[1]["role"] == "assistant" and second[1]["content"]


@pytest.mark.server
def test_responses_source_sends_input_items_to_the_server(fake: ServerProcess) -> None:
    from nbstream.sources.responses import ResponsesSource
    from nbstream.sources.sse import DEFAULT_ACCEPTS

    src = ResponsesSource("fake", fake.base_url, accepts=DEFAULT_ACCEPTS | {"application/pdf"})
    chat = ChatWidget(src, system_prompt="Be brief.")
    chat.send("What is this?", attachments=[IMAGE, TABLE, PDF]).wait(20)
    chat.send("And?").wait(20)
    first, second = [r["body"] for r in fake.requests()[-2:]]
    assert fake.requests()[-1]["path"] == "/v1/responses"
    assert first["instructions"] == "Be brief."
    assert first["input"] == [{"role": "user", "content": responses_content(ASKED)}]
    assert [i["type"] for i in first["input"][0]["content"]] == [
        "input_text", "input_image", "input_text", "input_file"]
    # turn 2: turn 1 with its items in the history; the new question a plain string
    assert second["input"][0] == first["input"][0]
    assert second["input"][2] == {"role": "user", "content": "And?"}
    with pytest.raises(UnsupportedAttachment, match="fake takes no application/pdf files"):
        ChatWidget(ResponsesSource("fake", fake.base_url)).send("read", attachments=[PDF])


@pytest.mark.server
def test_openai_source_refuses_at_send_what_it_is_not_told_the_server_takes(
        fake: ServerProcess) -> None:
    from nbstream.sources import OpenAISource

    before = len(fake.requests())
    chat = ChatWidget(OpenAISource("fake", base_url=fake.base_url))
    with pytest.raises(UnsupportedAttachment, match=r"fake takes no application/pdf files"):
        chat.send("read it", attachments=[PDF])
    text_only = ChatWidget(OpenAISource("fake", base_url=fake.base_url, accepts={"text/*"}))
    with pytest.raises(UnsupportedAttachment, match="fake takes no images"):
        text_only.send("see it", attachments=[IMAGE])
    assert len(fake.requests()) == before  # nothing reached the server
    with pytest.raises(TypeError, match="accepts must be a collection of MIME patterns"):
        OpenAISource("fake", base_url=fake.base_url, accepts="image/*")


# ------------------------------------------------------ a tiny vision model
class Spy:
    """Wraps ``model.generate`` and keeps the keyword arguments of each call."""

    def __init__(self, model: Any) -> None:
        self.calls: list[dict[str, Any]] = []
        real = model.generate

        def generate(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(dict(kwargs))
            return real(*args, **kwargs)

        model.generate = generate


@pytest.mark.transformers  # random-weight models through the real generate()
def test_a_tiny_vision_model_answers_about_an_image_through_its_processor() -> None:
    from nbstream.sources import TransformersSource

    model, processor = tiny_vision()
    spy = Spy(model)
    src = TransformersSource(model, processor=processor, max_new_tokens=6)
    assert src.reads_images and {"image/png", "image/jpeg", "text/*"} <= src.accepts
    chat = ChatWidget(src)
    assert "image/png" in chat.attachment_policy["accepts"][0]
    reply = chat.send("What color is this?", attachments=[IMAGE, TABLE])
    reply.wait(120)
    assert reply.status == "done" and reply.stats["tokens"] == 6 and reply.text
    (call,) = spy.calls
    pixels = call["pixel_values"]
    assert tuple(pixels.shape) == (1, 3, 32, 32) and pixels.dtype == model.dtype
    ids = call["input_ids"][0].tolist()
    image_id = processor.tokenizer.convert_tokens_to_ids("<image>")
    assert ids.count(image_id) == 16  # the image's 4 × 4 patches, where the image part is
    prompt = processor.tokenizer.decode(ids)
    assert "What color is this?" in prompt and '<attachment name="t.csv"' in prompt
    assert prompt.index("<image>") < prompt.index("What color is this?")
    # the next turn's history holds the image again (the model sees the whole conversation)
    chat.send("Again?").wait(120)
    assert spy.calls[1]["input_ids"][0].tolist().count(image_id) == 16


@pytest.mark.transformers  # random-weight models through the real generate()
def test_a_vision_model_folder_is_loaded_with_its_processor(tmp_path: Path) -> None:
    from nbstream.sources import TransformersSource

    model, processor = tiny_vision()
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    src = TransformersSource(tmp_path, max_new_tokens=4)
    assert src.reads_images  # found in the folder, before anything is loaded
    chat = ChatWidget(src)
    reply = chat.send("Describe it", attachments=[attach(png((64, 48), (0, 90, 200)))])
    reply.wait(180)
    assert reply.status == "done", reply.reason
    assert type(src.model).__name__ == "LlavaForConditionalGeneration"
    assert src.processor is not None and reply.outcome.usage["prompt_tokens"] > 16


@pytest.mark.transformers  # random-weight models through the real generate()
def test_a_text_only_model_gets_texts_in_its_prompt_and_refuses_images() -> None:
    from nbstream.sources import TransformersSource

    model, tok = tiny_model(), tiny_tokenizer()
    spy = Spy(model)
    src = TransformersSource(model, tok, max_new_tokens=3)
    assert src.accepts == frozenset({"text/*"}) and not src.reads_images
    chat = ChatWidget(src)
    chat.send("Sum it", attachments=[TABLE]).wait(120)
    prompt = tok.decode(spy.calls[0]["input_ids"][0].tolist())
    assert f"Sum it\n\n{TABLE_TEXT}" in prompt
    with pytest.raises(UnsupportedAttachment, match="takes no images"):
        chat.send("See it", attachments=[IMAGE])
    assert len(chat.messages) == 2  # the refused question changed nothing
    # and generate itself refuses an image that reached it some other way
    with pytest.raises(UnsupportedAttachment, match=r"takes no images of type image/png"):
        src.generate_with([{"role": "user", "content": "x", "attachments": (IMAGE,)}],
                          lambda piece: None, threading.Event(), {})
