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

from cua_rl.evaluation.deps import require
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


def _phash(image: Any) -> Any:
    """64-bit perceptual hash (imagehash.phash): sign of the 8x8 low-frequency
    DCT-II block of the 32x32 grayscale image against its median."""
    np = require("numpy", "numpy", metric="compare_pdf_images")
    from PIL import Image

    pixels = np.asarray(image.convert("L").resize((32, 32), Image.Resampling.LANCZOS),
                        dtype=float)
    n = np.arange(32)
    basis = np.cos(np.pi * np.outer(n, 2 * n + 1) / 64)  # DCT-II rows; scale is irrelevant
    low = (basis @ pixels @ basis.T)[:8, :8]
    return (low > np.median(low)).flatten()


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
    """Fraction of embedded images (in order) whose perceptual hashes differ by
    at most 5 bits; a different image count scores 0, no images on both sides 1."""
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
    close = sum(int((_phash(a) != _phash(b)).sum()) <= 5
                for a, b in zip(images1, images2, strict=True))
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
                    lines = z.read(member).decode("utf-8", "replace").splitlines()
                    out = folder / member
                    out.write_text("".join(f"{ln}\n" for ln in lines if drop not in ln))
                    parts.append(out)
            for member in names:
                if member.endswith(".html"):
                    raw = z.read(member).decode("utf-8", "replace")
                    tree = html.fromstring(raw.replace("\n", "").replace("\r", "").encode())
                    out = folder / member
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_text(html.tostring(tree, pretty_print=True, encoding="unicode"))
                    parts.append(out)
    except (zipfile.BadZipFile, OSError):
        return []
    return sorted(parts)


@metric("compare_epub")
def compare_epub(result: Any, expected: Any) -> float:
    """Product of line-diff similarities of the paired normalized parts (sorted by
    path); an unreadable result scores 0."""
    if not _is_file(result) or not _is_file(expected):
        return 0.0
    got = _epub_parts(result, Path(f"{result}.dir"))
    want = _epub_parts(expected, Path(f"{expected}.dir"))
    if not got:
        return 0.0
    score = 1.0
    for a, b in zip(got, want, strict=False):
        score *= diff_text_file(str(a), str(b))
    return score
