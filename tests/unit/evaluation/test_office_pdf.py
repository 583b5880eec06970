"""PDF and EPUB metrics on files generated here (PyMuPDF writes the PDFs)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from cua_rl.evaluation import get_metric

pymupdf = pytest.importorskip("pymupdf", reason="needs the eval extra")


def run(name: str, *args: object, **options: object) -> float:
    return get_metric(name).func(*args, **options)


def pdf(path: Path, pages: list[str], image_color: str | None = None) -> str:
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        page.insert_text((72, 72), text)
        if image_color is not None:
            from PIL import Image, ImageDraw

            img = Image.new("RGB", (64, 64), image_color)
            ImageDraw.Draw(img).rectangle((0, 0, 31, 31), fill="white")
            data = io.BytesIO()
            img.save(data, "PNG")
            page.insert_image(pymupdf.Rect(72, 100, 172, 200), stream=data.getvalue())
    doc.save(str(path))
    return str(path)


def test_compare_pdfs(tmp_path: Path) -> None:
    gold = pdf(tmp_path / "g.pdf", ["Invoice 243729", "Total 42"])
    assert run("compare_pdfs", pdf(tmp_path / "a.pdf", ["Invoice 243729", "Total 42"]), gold) == 1.0
    score = run("compare_pdfs", pdf(tmp_path / "b.pdf", ["Invoice 999999", "Total 42"]), gold)
    assert 0.5 < score < 1.0
    assert run("compare_pdfs", str(tmp_path / "missing.pdf"), gold) == 0.0
    other = pdf(tmp_path / "c.pdf", ["Completely different"])
    assert run("compare_pdfs", [gold, other], [gold, gold]) < 1.0
    assert run("compare_pdfs", [gold, gold], [gold, gold]) == 1.0


def test_check_pdf_pages(tmp_path: Path) -> None:
    one = pdf(tmp_path / "one.pdf", ["a"])
    two = pdf(tmp_path / "two.pdf", ["a", "b"])
    rules = {"relation": "eq", "ref_value": 1}
    assert run("check_pdf_pages", one, rules) == 1.0
    assert run("check_pdf_pages", two, rules) == 0.0
    assert run("check_pdf_pages", None, rules) == 0.0


def test_compare_pdf_images(tmp_path: Path) -> None:
    gold = pdf(tmp_path / "g.pdf", ["receipt"], image_color="black")
    assert (
        run(
            "compare_pdf_images", pdf(tmp_path / "a.pdf", ["other text"], image_color="black"), gold
        )
        == 1.0
    )
    assert run("compare_pdf_images", pdf(tmp_path / "b.pdf", ["receipt"]), gold) == 0.0
    assert (
        run("compare_pdf_images", pdf(tmp_path / "c.pdf", ["x"]), pdf(tmp_path / "d.pdf", ["y"]))
        == 1.0
    )  # no images on either side


def epub(path: Path, chapter: str) -> str:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/epub+zip")
        z.writestr("toc.ncx", "<ncx>\n<navPoint id='x'/>\n<docTitle>Book</docTitle>\n</ncx>\n")
        z.writestr(
            "content.opf",
            f"<package>\n<dc:identifier>{path.name}</dc:identifier>\n"
            "<dc:title>Book</dc:title>\n</package>\n",
        )
        z.writestr("text/ch1.html", f"<html><body>\n<p>{chapter}</p>\n</body></html>")
    return str(path)


def test_compare_epub(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "g").mkdir()
    gold = epub(tmp_path / "g" / "book.epub", "Once upon a time")
    assert run("compare_epub", epub(tmp_path / "r" / "book.epub", "Once upon a time"), gold) == 1.0
    assert run("compare_epub", epub(tmp_path / "r" / "other.epub", "Something else"), gold) < 1.0
    junk = tmp_path / "r" / "junk.epub"
    junk.write_text("not a zip")
    assert run("compare_epub", str(junk), gold) == 0.0
