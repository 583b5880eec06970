"""Task-specific Writer checks on .docx/.odt (python-docx), following OSWorld's `docs.py`.

Most take the agent's document first and the gold second; the "evaluate_*"
and "check_*_14" ones first require the texts to match (compare_docx_files)
and then check one formatting property on the agent's document. A document
that is missing or does not open scores 0.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Mapping
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.metrics.docs import _open_docx, compare_docx_files
from cua_rl.evaluation.registry import metric

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _docs(*paths: Any, name: str) -> list[Any] | None:
    docs = [_open_docx(p, name) for p in paths]
    return None if any(d is None for d in docs) else docs


@metric("compare_font_names")
def compare_font_names(result: Any, rules: Mapping[str, Any]) -> float:
    """Every run of every body paragraph has the explicit font `rules.font_name`."""
    docs = _docs(result, name="compare_font_names")
    if docs is None:
        return 0.0
    want = rules["font_name"]
    return float(all(run.font.name == want for p in docs[0].paragraphs for run in p.runs))


@metric("compare_subscript_contains")
def compare_subscript_contains(result: Any, expected: Any) -> float:
    """Some aligned run (same paragraph and run index) is subscript in both."""
    docs = _docs(result, expected, name="compare_subscript_contains")
    if docs is None:
        return 0.0
    for p1, p2 in zip(docs[0].paragraphs, docs[1].paragraphs, strict=False):
        for r1, r2 in zip(p1.runs, p2.runs, strict=False):
            if r1.font.subscript and r2.font.subscript:
                return 1.0
    return 0.0


@metric("has_page_numbers_in_footers")
def has_page_numbers_in_footers(result: Any) -> float:
    """Every section's footer has a digit in its first paragraph (a rendered page
    number field keeps its last computed value there)."""
    docs = _docs(result, name="has_page_numbers_in_footers")
    if docs is None:
        return 0.0
    for section in docs[0].sections:
        paras = section.footer.paragraphs
        if not any(ch.isdigit() for ch in (paras[0].text if paras else "")):
            return 0.0
    return 1.0


@metric("is_first_line_centered")
def is_first_line_centered(result: Any) -> float:
    docs = _docs(result, name="is_first_line_centered")
    if docs is None or not docs[0].paragraphs:
        return 0.0
    enum = require("docx.enum.text", "python-docx", metric="is_first_line_centered")
    alignment = docs[0].paragraphs[0].paragraph_format.alignment
    return float(alignment == enum.WD_PARAGRAPH_ALIGNMENT.CENTER)


@metric("contains_page_break")
def contains_page_break(result: Any, rules: Mapping[str, Any] | None = None) -> float:
    """At least one page break (`w:br w:type="page"` in a body run); exactly
    `rules.page_break_count` of them when given."""
    docs = _docs(result, name="contains_page_break")
    if docs is None:
        return 0.0
    count = sum(
        1
        for p in docs[0].paragraphs
        for run in p.runs
        for br in run.element.iter(f"{_W}br")
        if br.get(f"{_W}type") == "page"
    )
    want = (rules or {}).get("page_break_count")
    if want is not None and count != want:
        return 0.0
    return float(count > 0)


@metric("check_tabstops")
def check_tabstops(
    result: Any, expected: Any, *, word_number_split_by_tabstop: int | None = None, index: int = 0
) -> float:
    """1 minus the mean (over non-blank paragraphs) of the summed tab-stop position
    differences relative to the gold's text width; 0 when paragraph or tab-stop
    counts or alignments differ. With `word_number_split_by_tabstop`, the
    `index`-th tab-separated part of each paragraph must have that many words."""
    docs = _docs(result, expected, name="check_tabstops")
    if docs is None:
        return 0.0
    enum = require("docx.enum.text", "python-docx", metric="check_tabstops")
    paras1 = [p for p in docs[0].paragraphs if p.text.strip()]
    paras2 = [p for p in docs[1].paragraphs if p.text.strip()]
    if len(paras1) != len(paras2):
        return 0.0
    if word_number_split_by_tabstop is not None:
        for p in paras1:
            parts = p.text.split("\t")
            if index >= len(parts):
                return 0.0
            if (
                len([w for w in re.split(r"\s", parts[index]) if w.strip()])
                != word_number_split_by_tabstop
            ):
                return 0.0
    section = docs[1].sections[0]
    width = section.page_width - section.left_margin - section.right_margin

    def kept(stop: Any) -> bool:
        clear = enum.WD_TAB_ALIGNMENT.CLEAR
        return not (
            stop.alignment == clear
            or (stop.alignment == enum.WD_TAB_ALIGNMENT.LEFT and stop.position == 0)
        )

    if not paras1:
        return 0.0  # OSWorld divides by the paragraph count here
    minus = 0.0
    for p1, p2 in zip(paras1, paras2, strict=True):
        tabs1 = [t for t in p1.paragraph_format.tab_stops if kept(t)]
        tabs2 = [t for t in p2.paragraph_format.tab_stops if kept(t)]
        if len(tabs1) != len(tabs2):
            return 0.0
        if any(t1.alignment != t2.alignment for t1, t2 in zip(tabs1, tabs2, strict=True)):
            return 0.0
        minus += (
            sum(abs(t1.position - t2.position) for t1, t2 in zip(tabs1, tabs2, strict=True)) / width
        )
    return 1.0 - minus / len(paras1)


def delta_e_2000(rgb1: tuple[int, int, int], rgb2: tuple[int, int, int]) -> float:
    """CIEDE2000 difference of two sRGB colors (0..255 channels), through
    skimage's rgb2lab and deltaE_ciede2000 exactly as OSWorld computes it."""
    name = "evaluate_colored_words_in_tables"
    np = require("numpy", "numpy", metric=name)
    color = require("skimage.color", "scikit-image", metric=name)
    lab1 = color.rgb2lab(np.asarray(rgb1, dtype=float) / 255.0)
    lab2 = color.rgb2lab(np.asarray(rgb2, dtype=float) / 255.0)
    return float(color.deltaE_ciede2000(lab1, lab2))


@metric("evaluate_colored_words_in_tables")
def evaluate_colored_words_in_tables(
    result: Any, expected: Any, *, threshold: float = 3.5
) -> float:
    """Same text as the gold, and in every table every run starting with a vowel
    is red and every other non-empty run blue (CIEDE2000 within `threshold`)."""
    if not compare_docx_files(result, expected):
        return 0.0
    docs = _docs(result, name="evaluate_colored_words_in_tables")
    if docs is None:
        return 0.0
    for table in docs[0].tables:
        for row in table.rows:
            for cell in row.cells:
                for para in cell.paragraphs:
                    for run in para.runs:
                        if not run.text:
                            continue
                        rgb = run.font.color.rgb
                        if rgb is None:
                            return 0.0  # OSWorld fails on an uncolored run too (it raises)
                        want = (255, 0, 0) if run.text[0].lower() in "aeiou" else (0, 0, 255)
                        if delta_e_2000(tuple(rgb), want) > threshold:
                            return 0.0
    return 1.0


@metric("check_highlighted_words")
def check_highlighted_words(result: Any, expected: Any) -> float:
    """Same text as the gold .odt and no span left with a yellow (#ffff00)
    background: the task is to remove the highlighting."""
    etree = require("lxml.etree", "lxml", metric="check_highlighted_words")
    if not compare_docx_files(result, expected):
        return 0.0
    text = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
    style = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
    fo = "{urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0}"
    try:
        with zipfile.ZipFile(result) as z:
            root = etree.fromstring(z.read("content.xml"))
    except (OSError, KeyError, zipfile.BadZipFile, etree.XMLSyntaxError):
        return 0.0
    yellow = {
        s.get(f"{style}name")
        for s in root.iter(f"{style}style")
        if any(prop.get(f"{fo}background-color") == "#ffff00" for prop in s)
    }
    return float(
        not any(span.get(f"{text}style-name") in yellow for span in root.iter(f"{text}span"))
    )


@metric("evaluate_strike_through_last_paragraph")
def evaluate_strike_through_last_paragraph(result: Any, expected: Any) -> float:
    """Same text as the gold and every run of the last paragraph struck through."""
    if not compare_docx_files(result, expected):
        return 0.0
    docs = _docs(result, name="evaluate_strike_through_last_paragraph")
    if docs is None or not docs[0].paragraphs:
        return 0.0
    return float(all(run.font.strike for run in docs[0].paragraphs[-1].runs))


@metric("check_italic_font_size_14")
def check_italic_font_size_14(result: Any, expected: Any) -> float:
    """Same text as the gold and every italic run set to 14 pt."""
    if not compare_docx_files(result, expected):
        return 0.0
    docs = _docs(result, name="check_italic_font_size_14")
    if docs is None:
        return 0.0
    return float(
        all(
            run.font.size is not None and run.font.size.pt == 14
            for p in docs[0].paragraphs
            for run in p.runs
            if run.italic
        )
    )


@metric("compare_docx_images")
def compare_docx_images(result: Any, expected: Any) -> float:
    """The documents' images (in relationship order) decode to identical pixels."""
    from PIL import Image, UnidentifiedImageError

    docs = _docs(result, expected, name="compare_docx_images")
    if docs is None:
        return 0.0
    blobs = [
        [rel.target_part.blob for rel in d.part.rels.values() if "image" in rel.reltype]
        for d in docs
    ]
    if len(blobs[0]) != len(blobs[1]):
        return 0.0
    try:
        for a, b in zip(blobs[0], blobs[1], strict=True):
            with Image.open(io.BytesIO(a)) as img1, Image.open(io.BytesIO(b)) as img2:
                if img1.tobytes() != img2.tobytes():
                    return 0.0
    except (UnidentifiedImageError, OSError):
        return 0.0
    return 1.0
