"""PDF and EPUB metrics (PyMuPDF), following OSWorld's `chrome.py`, `pdf.py`, `others.py`.

Text is extracted with PyMuPDF as in OSWorld, because another extractor puts
spaces and line breaks elsewhere and would move the fuzzy scores.
"""

from __future__ import annotations

import io
import logging
import operator
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.metrics.files import diff_text_file
from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)


def _pymupdf(name: str) -> Any:
    return require("pymupdf", "pymupdf", metric=name)


def _is_file(path: Any) -> bool:
    return bool(path) and Path(path).is_file()


def pdf_text(path: Any, *, name: str = "compare_pdfs") -> str:
    """All pages' text, concatenated and stripped."""
    pymupdf = _pymupdf(name)
    with pymupdf.open(str(path)) as doc:
        return "".join(page.get_text() for page in doc).strip()


@metric("compare_pdfs")
def compare_pdfs(result: Any, expected: Any) -> float:
    """Mean fuzzy ratio (0..1) of the texts of paired PDFs (single paths or lists).

    A pair that cannot be read (missing or not a PDF) adds 0 to the sum but
    still counts in the mean, as in OSWorld.
    """
    fuzz = require("rapidfuzz.fuzz", "rapidfuzz", metric="compare_pdfs")
    _pymupdf("compare_pdfs")
    if not isinstance(expected, list):
        result, expected = [result], [expected]
    if not isinstance(result, list) or not expected:
        return 0.0
    total = 0.0
    for got, want in zip(result, expected, strict=False):
        if not _is_file(got) or not _is_file(want):
            continue
        try:
            total += fuzz.ratio(pdf_text(got), pdf_text(want)) / 100.0
        except Exception as exc:  # PyMuPDF raises its own types for a damaged file
            log.info("compare_pdfs: cannot read %s or %s: %s", got, want, exc)
    return total / len(expected)


@metric("check_pdf_pages")
def check_pdf_pages(result: Any, rules: Mapping[str, Any]) -> float:
    """1 when the page count satisfies `relation` (eq, lt, ge, ...) against `ref_value`."""
    pymupdf = _pymupdf("check_pdf_pages")
    if not _is_file(result):
        return 0.0
    try:
        with pymupdf.open(str(result)) as doc:
            pages = doc.page_count
    except Exception:  # not a PDF
        return 0.0
    return float(getattr(operator, rules["relation"])(pages, rules["ref_value"]))


def _pdf_images(path: Any) -> list[Any]:
    from PIL import Image, UnidentifiedImageError

    pymupdf = _pymupdf("compare_pdf_images")
    images = []
    with pymupdf.open(str(path)) as doc:
        for page in doc:
            for info in page.get_images(full=True):
                data = doc.extract_image(info[0])["image"]
                try:
                    images.append(Image.open(io.BytesIO(data)))
                except UnidentifiedImageError:
                    log.info("compare_pdf_images: an image of %s cannot be decoded", path)
    return images


@metric("compare_pdf_images")
def compare_pdf_images(result: Any, expected: Any) -> float:
    """Fraction of embedded images (in order) whose perceptual hashes
    (`imagehash.phash`, OSWorld's reference) differ by at most 5 bits; a
    different image count scores 0, no images on both sides 1."""
    imagehash = require("imagehash", "imagehash", metric="compare_pdf_images")
    if not _is_file(result) or not _is_file(expected):
        return 0.0
    try:
        images1, images2 = _pdf_images(result), _pdf_images(expected)
    except Exception as exc:  # PyMuPDF raises its own types for a damaged file
        log.info("compare_pdf_images: cannot read the PDFs: %s", exc)
        return 0.0
    if len(images1) != len(images2):
        return 0.0
    if not images1:
        return 1.0
    close = sum(
        imagehash.phash(a) - imagehash.phash(b) <= 5 for a, b in zip(images1, images2, strict=True)
    )
    return close / len(images1)


def _epub_parts(path: Any, folder: Path) -> list[Path]:
    """toc.ncx without navPoint lines, content.opf without dc:identifier lines and
    every .html re-serialized without line breaks: volatile parts left out."""
    html = require("lxml.html", "lxml", metric="compare_epub")
    folder.mkdir(parents=True, exist_ok=True)
    parts: list[Path] = []
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            for member, drop in (("toc.ncx", "navPoint"), ("content.opf", "dc:identifier")):
                if member in names:
                    lines = z.read(member).decode("utf-8").splitlines()
                    out = folder / member
                    out.write_text(
                        "".join(f"{ln}\n" for ln in lines if drop not in ln), encoding="utf-8"
                    )
                    parts.append(out)
            for member in names:
                if member.endswith(".html"):
                    raw = z.read(member).decode("utf-8")
                    tree = html.fromstring(raw.replace("\n", "").replace("\r", "").encode())
                    out = folder / member
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_text(
                        html.tostring(tree, pretty_print=True, encoding="unicode"), encoding="utf-8"
                    )
                    parts.append(out)
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError):  # OSWorld raises on the last
        return []
    return sorted(parts)


@metric("compare_epub")
def compare_epub(result: Any, expected: Any) -> float:
    """Mean line-diff similarity of the paired normalized parts (sorted by path),
    divided by the result's part count as in OSWorld (a part the expected book
    lacks counts 0); an unreadable result scores 0."""
    if not _is_file(result) or not _is_file(expected):
        return 0.0
    got = _epub_parts(result, Path(f"{result}.dir"))
    want = _epub_parts(expected, Path(f"{expected}.dir"))
    if not got:
        return 0.0
    total = sum(diff_text_file(str(a), str(b)) for a, b in zip(got, want, strict=False))
    return total / len(got)
