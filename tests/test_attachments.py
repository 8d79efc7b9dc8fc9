"""Attachments from kernel objects (#21): each kind of object converted, bad ones refused
with a clear error, names and contents treated as hostile, and the limits, each with its
own error. No kernel, no browser: nbstream.attachments and nbstream.core.attachment."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import polars as pl
import pytest
from PIL import Image

from nbstream import Attachment, AttachmentError, AttachmentLimits, attach
from nbstream.attachments import (
    MAX_PIXELS,
    attach_all,
    check_message,
    clean_name,
    from_upload,
    preview,
    unique_names,
)
from nbstream.core.attachment import (
    AttachmentTooLarge,
    MessageTooLarge,
    TooManyAttachments,
    UnsupportedAttachment,
    kind_of,
    mime_matches,
    parse_text_block,
    takes,
    text_block,
)


def png_bytes(size: tuple[int, int] = (40, 30), color: tuple[int, ...] = (200, 30, 30),
              mode: str = "RGB", **save: Any) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, color).save(buf, "PNG", **save)
    return buf.getvalue()


def decoded(a: Attachment) -> Image.Image:
    im = Image.open(io.BytesIO(a.data))
    im.load()
    return im


# ------------------------------------------------------------------ images
def test_a_matplotlib_figure_and_its_axes_become_a_png_with_their_size() -> None:
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    ax.plot([1, 3, 2])
    try:
        a = attach(fig)
        assert (a.name, a.mime, a.kind) == ("figure.png", "image/png", "image")
        im = decoded(a)
        assert im.format == "PNG" and im.size == (a.width, a.height)
        assert 200 < a.width <= 400 and 150 < a.height <= 300  # tight bounding box
        assert attach(ax).data == a.data  # an Axes: its figure
        assert attach(fig, name="trend").name == "trend"
    finally:
        plt.close(fig)


def test_a_pil_image_keeps_its_kind_and_a_large_one_is_downscaled_with_a_note() -> None:
    small = attach(Image.new("RGB", (64, 48), (1, 2, 3)))
    assert (small.mime, small.width, small.height, small.note) == ("image/png", 64, 48, "")
    big = attach(Image.new("RGB", (5000, 2500), (9, 9, 9)))
    assert (big.width, big.height) == (2048, 1024)
    assert big.note == "downscaled from 5000×2500 px"
    assert decoded(big).size == (2048, 1024)
    bound = attach(Image.new("RGB", (600, 300)), limits=AttachmentLimits(max_image_side=100))
    assert (bound.width, bound.height) == (100, 50)
    buf = io.BytesIO()
    Image.new("RGB", (50, 40), (250, 0, 0)).save(buf, "JPEG")
    photo = Image.open(io.BytesIO(buf.getvalue()))
    assert attach(photo).mime == "image/jpeg"  # a photo stays a JPEG


def test_image_files_are_decoded_metadata_dropped_and_orientation_applied(tmp_path: Path) -> None:
    plain = tmp_path / "plain.png"
    plain.write_bytes(png_bytes())
    a = attach(plain)
    assert a.data == plain.read_bytes()  # nothing to change: the bytes as they are
    # EXIF (a GPS position, say) and an orientation: re-encoded, rotated, metadata gone
    im = Image.new("RGB", (60, 20), (0, 0, 255))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to show
    exif[0x010F] = "SecretCam"
    buf = io.BytesIO()
    im.save(buf, "JPEG", exif=exif.tobytes())
    path = tmp_path / "photo.jpg"
    path.write_bytes(buf.getvalue())
    b = attach(path)
    assert (b.mime, b.width, b.height) == ("image/jpeg", 20, 60)
    assert b"SecretCam" not in b.data and "exif" not in decoded(b).info
    # an animated GIF: its first frame, as a PNG (servers take still images)
    frames = [Image.new("RGB", (10, 10), (i * 80, 0, 0)) for i in range(3)]
    gif = io.BytesIO()
    frames[0].save(gif, "GIF", save_all=True, append_images=frames[1:])
    g = attach(gif.getvalue())
    assert g.mime == "image/png" and g.note == "the first frame of an animation"


def test_a_numpy_array_is_an_image_or_a_table_and_other_shapes_are_refused() -> None:
    img = attach(np.zeros((20, 30, 3), np.uint8))
    assert (img.mime, img.width, img.height) == ("image/png", 30, 20)
    table = attach(np.arange(6).reshape(3, 2))
    assert (table.mime, table.text) == ("text/csv", "0,1\n2,3\n4,5\n")
    assert "an array of shape (3, 2), int64" in table.note
    assert attach(np.array([0.5, 1.25])).text == "0.5\n1.25\n"
    with pytest.raises(TypeError, match=r"array of shape \(2, 2, 2, 2\)"):
        attach(np.zeros((2, 2, 2, 2)))


# ------------------------------------------------------------------ tables
def test_a_dataframe_becomes_csv_bounded_with_the_cut_said() -> None:
    df = pd.DataFrame({"region": ["n", "s"], "units": [3, 4]})
    a = attach(df)
    assert (a.name, a.mime, a.kind) == ("table.csv", "text/csv", "text")
    assert a.text == "region,units\nn,3\ns,4\n"  # a default index is left out
    assert a.note == "2 rows × 2 columns"
    big = pd.DataFrame(np.arange(1000 * 60).reshape(1000, 60))
    cut = attach(big, limits=AttachmentLimits(max_table_rows=5, max_table_columns=3))
    assert cut.text.splitlines() == ["0,1,2", "0,1,2", "60,61,62", "120,121,122", "180,181,182",
                                     "240,241,242"]
    assert cut.note == "1,000 rows × 60 columns; the first 5 rows and the first 3 columns shown"
    chars = attach(big, limits=AttachmentLimits(max_text_chars=1000))
    assert len(chars.text) <= 1000 and chars.text.endswith("\n")  # whole lines only
    assert chars.note.endswith("; cut at the character limit")
    indexed = attach(pd.Series([1.5, 2.5], index=pd.Index(["a", "b"], name="k"), name="v"))
    assert indexed.text == "k,v\na,1.5\nb,2.5\n"  # a meaningful index is kept


def test_a_polars_dataframe_becomes_csv_too() -> None:
    df = pl.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    a = attach(df, limits=AttachmentLimits(max_table_rows=2))
    assert a.text == "a,b\n1,x\n2,y\n"
    assert a.note == "3 rows × 2 columns; the first 2 rows shown"
    assert attach(pl.Series("s", [1, 2])).text == "s\n1\n2\n"


# ------------------------------------------------------------------- files
def test_text_files_become_text_and_a_long_one_is_cut_with_the_cut_said(tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Résumé\nça va 😀\n", encoding="utf-8")
    a = attach(notes)
    assert (a.name, a.mime, a.kind, a.text, a.note) == (
        "notes.md", "text/markdown", "text", "# Résumé\nça va 😀\n", "")
    log = tmp_path / "server.log"  # an extension mimetypes does not know
    log.write_bytes(b"line\n" * 50_000)
    cut = attach(log, limits=AttachmentLimits(max_text_chars=1000))
    assert cut.mime == "text/plain" and len(cut.text) == 1000
    assert cut.note == "the first 1,000 characters of a 244.1 KB file"
    odd = tmp_path / "data.weird"
    odd.write_text("just text", encoding="utf-8")
    assert attach(odd).mime == "text/plain"  # unknown type, but UTF-8 text
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbfa,b\n")
    assert attach(bom).text == "a,b\n"


def test_other_files_are_kept_as_files_and_bad_paths_are_refused(tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4\n%\xe2\xe3\n")
    a = attach(pdf)
    assert (a.mime, a.kind, a.data) == ("application/pdf", "file", pdf.read_bytes())
    blob = tmp_path / "data.bin"
    blob.write_bytes(bytes(range(256)))
    assert attach(blob).mime == "application/octet-stream"
    with pytest.raises(FileNotFoundError, match=r"no such file: 'nope\.csv'; a str in "
                       r"attachments= is a file path"):
        attach("nope.csv")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        attach(tmp_path)
    fake = tmp_path / "fake.png"
    fake.write_bytes(b"<html><script>alert(1)</script></html>")
    with pytest.raises(UnsupportedAttachment, match=r"named as an image \(image/png\) but is "
                       "not a PNG"):
        attach(fake)
    bad_text = tmp_path / "latin1.csv"
    bad_text.write_bytes("café".encode("latin-1"))
    with pytest.raises(UnsupportedAttachment, match=r"'latin1\.csv' \(text/csv\) is not UTF-8"):
        attach(bad_text)
    big = tmp_path / "big.zip"
    big.write_bytes(b"PK" + bytes(2000))
    with pytest.raises(AttachmentTooLarge, match=r"'big\.zip' is 2\.0 KB; an attachment takes"):
        attach(big, limits=AttachmentLimits(max_bytes=1000))


def test_bytes_and_file_objects() -> None:
    a = attach(png_bytes())
    assert (a.name, a.mime) == ("image.png", "image/png")
    with pytest.raises(TypeError, match="need a name and a type"):
        attach(b"%PDF-1.7 whatever")
    assert attach(b"%PDF", name="r.pdf").mime == "application/pdf"
    assert attach(b"%PDF", mime="application/pdf").name == "file.pdf"
    assert attach("a,b\n1,2\n", mime="text/csv", name="x.csv").text == "a,b\n1,2\n"
    f = io.BytesIO(png_bytes((7, 5)))
    assert attach(f).width == 7
    assert attach(io.StringIO("hello"), name="h.txt").text == "hello"
    with pytest.raises(UnsupportedAttachment, match="not an image Pillow can read"):
        attach(b"\x89PNG\r\n\x1a\n" + b"\x00" * 30)


def test_an_image_too_large_to_decode_is_refused_before_decoding() -> None:
    # a PNG whose header claims 20,000 × 20,000 pixels (a decompression bomb)
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data))
    bomb = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 20000, 20000, 8, 2,
                                                              0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))
    assert MAX_PIXELS < 20000 * 20000
    with pytest.raises(AttachmentTooLarge, match=r"'image\.png' is too large an image to decode"):
        attach(bomb)
    medium = io.BytesIO()  # under Pillow's own limit, over ours: refused before decoding
    Image.new("1", (9000, 8000)).save(medium, "PNG")
    with pytest.raises(AttachmentTooLarge, match=r"9000×8000 px \(72 megapixels\)"):
        attach(medium.getvalue())


# ------------------------------------------------------------- rich reprs
class OnlyPng:
    def _repr_png_(self) -> bytes:
        return png_bytes((9, 9))


class Both:
    def _repr_png_(self) -> bytes:
        return png_bytes((9, 9))

    def _repr_markdown_(self) -> str:
        return "**both**"


class Bundle:
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"image/png": base64.b64encode(png_bytes((3, 4))).decode(),
                "text/plain": "Bundle()"}


class OnlyHtml:
    def _repr_html_(self) -> str:
        return "<b onclick=x>hi</b>"


def test_unknown_objects_are_tried_by_their_rich_repr() -> None:
    assert attach(OnlyPng()).width == 9
    assert attach(Both()).mime == "image/png"
    assert attach(Both(), prefer_images=False).text == "**both**"  # a source without images
    b = attach(Bundle())
    assert (b.mime, b.width, b.height) == ("image/png", 3, 4)
    h = attach(OnlyHtml())
    assert (h.name, h.mime, h.text) == ("page.html", "text/html", "<b onclick=x>hi</b>")
    from IPython.display import Markdown

    assert attach(Markdown("*x*")).mime == "text/markdown"
    with pytest.raises(TypeError, match=r"cannot attach function .*has no rich repr"):
        attach(lambda: 1)
    with pytest.raises(TypeError, match="cannot attach object"):
        attach(object())


def test_attach_all_names_the_bad_item_and_makes_names_unique(tmp_path: Path) -> None:
    fig, _ = plt.subplots()
    try:
        got = attach_all([fig, fig, pd.DataFrame({"a": [1]})])
        assert [a.name for a in got] == ["figure.png", "figure-2.png", "table.csv"]
        with pytest.raises(TypeError, match=r"send\(attachments=\.\.\.\): item 1: cannot attach"):
            attach_all([fig, object()])
        with pytest.raises(FileNotFoundError, match=r"send\(attachments=\.\.\.\): no such file"):
            attach_all("missing.txt")  # one path, not a list of characters
    finally:
        plt.close(fig)
    assert [a.name for a in unique_names([Attachment.from_text("x", "a.txt")] * 3)] == [
        "a.txt", "a-2.txt", "a-3.txt"]


# ------------------------------------------------------------------- names
@pytest.mark.parametrize(("raw", "clean"), [
    ("../../etc/passwd", "passwd"),
    ("C:\\Users\\me\\secret.png", "secret.png"),
    ("<img src=x onerror=alert(1)>.png", "<img src=x onerror=alert(1)>.png"),  # text, never HTML
    ("evil\u202egnp.exe", "evilgnp.exe"),  # no right-to-left override
    ("a\x00b\nc.txt", "abc.txt"),
    (".hidden", "hidden"),
    ("", "attachment"),
])
def test_names_lose_folders_and_control_characters(raw: str, clean: str) -> None:
    assert clean_name(raw) == clean


def test_a_long_name_is_shortened_keeping_its_extension() -> None:
    name = clean_name("x" * 500 + ".csv")
    assert len(name) <= 160 and name.endswith("….csv")


# ------------------------------------------------------------- what a source takes
def test_kinds_and_mime_patterns() -> None:
    assert [kind_of(m) for m in ("image/png", "image/svg+xml", "text/csv", "application/json",
                                 "application/vnd.api+json", "application/pdf")] == [
        "image", "text", "text", "text", "text", "file"]
    assert mime_matches("image/png", "image/*") and mime_matches("x/y", "*/*")
    assert not mime_matches("image/png", "text/*")
    svg = Attachment.from_text("<svg/>", "a.svg", "image/svg+xml")
    assert takes({"text/*"}, svg)  # markup: given as text
    assert not takes({"text/*"}, attach(png_bytes()))
    assert takes({"text/*", "image/*"}, attach(png_bytes()))


def test_each_limit_has_its_own_error() -> None:
    lim = AttachmentLimits(max_count=2, max_bytes=100, max_message_bytes=150)
    t = [Attachment.from_text("x" * 60, f"{i}.txt") for i in range(3)]
    with pytest.raises(TooManyAttachments, match="3 attachments; a message takes at most 2"):
        check_message(t, lim, {"*/*"}, "S")
    with pytest.raises(AttachmentTooLarge, match=r"'big\.txt' is 101 B"):
        check_message([Attachment.from_text("x" * 101, "big.txt")], lim, {"*/*"}, "S")
    with pytest.raises(MessageTooLarge, match="come to 180 B; a message takes at most 150 B"):
        check_message([Attachment.from_text("x" * 90, f"{i}.txt") for i in range(2)], lim,
                      {"*/*"}, "S")
    with pytest.raises(UnsupportedAttachment, match=r"Tiny takes no images \(it takes text/\*\);"
                       r" 'image\.png' \(image/png\) cannot be sent: use a vision model"):
        check_message([attach(png_bytes())], AttachmentLimits(), {"text/*"}, "Tiny")
    for error in (TooManyAttachments, AttachmentTooLarge, MessageTooLarge, UnsupportedAttachment):
        assert issubclass(error, AttachmentError) and issubclass(error, ValueError)
    with pytest.raises(ValueError, match=r"max_count=\.\.\.\) must be positive"):
        AttachmentLimits(max_count=0)
    with pytest.raises(TypeError, match="must be an int"):
        AttachmentLimits(max_bytes=1.5)  # type: ignore[arg-type]


# ------------------------------------------------------------------ uploads
def test_an_upload_is_typed_by_its_bytes_never_by_what_the_view_says() -> None:
    lim = AttachmentLimits()
    img = from_upload("../shot.png", png_bytes(), lim)
    assert (img.name, img.mime) == ("shot.png", "image/png")
    jpeg = io.BytesIO()
    Image.new("RGB", (10, 10)).save(jpeg, "JPEG")
    assert from_upload("wrongly named.png", jpeg.getvalue(), lim).mime == "image/jpeg"
    with pytest.raises(UnsupportedAttachment, match="named as an image"):
        from_upload("x.png", b"<script>alert(1)</script>", lim)
    svg = from_upload("a.svg", b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)">'
                      b"<script>alert(2)</script></svg>", lim)
    assert (svg.mime, svg.kind) == ("image/svg+xml", "text")  # markup, for a model: text
    exe = from_upload("tool.exe", b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff", lim)
    assert exe.kind == "file" and exe.data.startswith(b"MZ")  # kept, refused by the source


# ------------------------------------------------------------------ previews
def test_previews_are_small_and_text_previews_are_excerpts() -> None:
    big = attach(Image.effect_noise((1500, 1000), 90).convert("RGB"))
    p = preview(big, 384)
    assert max(p.width, p.height) == 384 and p.data is not None
    assert p.mime == "image/jpeg" and len(p.data) <= 96 * 1024  # noise: a JPEG, bounded
    flat = preview(attach(Image.new("RGBA", (800, 400), (0, 0, 0, 0))), 384)
    assert (flat.mime, flat.width, flat.height) == ("image/png", 384, 192)
    text = preview(Attachment.from_text("x" * 5000, "x.txt"))
    assert text.data is None and text.excerpt == "x" * 2000
    svg = preview(Attachment.from_text("<svg/>", "a.svg", "image/svg+xml"))
    assert (svg.data, svg.mime) == (b"<svg/>", "image/svg+xml")
    assert preview(Attachment("r.pdf", "application/pdf", b"%PDF")) == type(p)()


def test_a_text_block_names_the_attachment_and_reads_back() -> None:
    a = Attachment.from_text("a,b\n1,2", 'we"ird <name>.csv', "text/csv", note="2 rows")
    block = text_block(a)
    assert block == ('<attachment name="we&quot;ird &lt;name&gt;.csv" type="text/csv" '
                     'note="2 rows">\na,b\n1,2\n</attachment>')
    back = parse_text_block(block)
    assert back is not None and (back.name, back.mime, back.text, back.note) == (
        a.name, a.mime, a.text, a.note)
    assert parse_text_block("just a question") is None
