"""Writer documents (.docx through python-docx), following OSWorld's `metrics/docs.py`.

compare_docx_files also reads an .odt pair (as OSWorld does through odfpy) with
`odt_paragraphs`; the other metrics read .docx only, and a mixed pair scores 0.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.registry import metric


def _open_docx(path: Any, name: str) -> Any | None:
    """The python-docx Document, or None when the file is absent or not a .docx."""
    docx = require("docx", "python-docx", metric=name)
    if not path or not Path(path).is_file():
        return None
    try:
        return docx.Document(str(path))
    except Exception:  # python-docx raises many types for a non-docx
        return None


_TEXT_NS = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"


def odt_paragraphs(path: Any) -> list[str] | None:
    """Text of every text:p of an .odt's body, like OSWorld's odfpy reading: the
    paragraph's own text nodes plus the text directly inside its text:span
    children (deeper nesting, line breaks and tabs are not text). None when the
    file is not an OpenDocument text."""
    etree = require("lxml.etree", "lxml", metric="compare_docx_files")
    try:
        with zipfile.ZipFile(path) as z:
            root = etree.fromstring(z.read("content.xml"))
    except (OSError, KeyError, zipfile.BadZipFile, etree.XMLSyntaxError):
        return None
    texts = []
    for para in root.iter(f"{_TEXT_NS}p"):
        parts = [para.text or ""]
        for child in para:
            if child.tag == f"{_TEXT_NS}span":
                parts.append(child.text or "")
                parts += [grand.tail or "" for grand in child]
            parts.append(child.tail or "")
        texts.append("".join(parts))
    return texts


def _pair(file1: Any, file2: Any, name: str) -> tuple[Any, Any] | None:
    if (
        not file1
        or not file2
        or not (str(file1).endswith(".docx") and str(file2).endswith(".docx"))
    ):
        return None
    doc1, doc2 = _open_docx(file1, name), _open_docx(file2, name)
    return (doc1, doc2) if doc1 is not None and doc2 is not None else None


@metric("compare_docx_files")
def compare_docx_files(
    file1: Any,
    file2: Any,
    *,
    ignore_blanks: bool = True,
    ignore_case: bool = False,
    ignore_order: bool = False,
    content_only: bool = False,
    fuzzy_match: bool = False,
    delete_empty_lines: bool = False,
) -> float:
    """Paragraph text of two .docx files.

    Default (`ignore_blanks`): the whole texts with whitespace runs collapsed must
    be equal. `content_only`: fuzzy ratio of those texts in [0, 1].
    `ignore_blanks=False`: paragraph by paragraph, equal (or mean fuzzy ratio
    with `fuzzy_match`). `ignore_order` sorts paragraphs first;
    `delete_empty_lines` drops blank paragraphs.
    """
    if file1 and file2 and str(file1).endswith(".odt") and str(file2).endswith(".odt"):
        if not Path(file1).is_file() or not Path(file2).is_file():
            return 0.0
        paras1, paras2 = odt_paragraphs(file1), odt_paragraphs(file2)
        if paras1 is None or paras2 is None:
            return 0.0
    else:
        pair = _pair(file1, file2, "compare_docx_files")
        if pair is None:
            return 0.0
        paras1 = [p.text for p in pair[0].paragraphs]
        paras2 = [p.text for p in pair[1].paragraphs]
    if ignore_order:
        paras1, paras2 = sorted(paras1), sorted(paras2)
    if delete_empty_lines:
        paras1 = [p for p in paras1 if p.strip()]
        paras2 = [p for p in paras2 if p.strip()]

    def case(text: str) -> str:
        return text.lower() if ignore_case else text

    def squash(paras: list[str]) -> str:
        return case(re.sub(r"\s+", " ", "\n".join(paras)).strip())

    if content_only or (ignore_blanks and fuzzy_match):
        fuzz = require("rapidfuzz.fuzz", "rapidfuzz", metric="compare_docx_files")
        return fuzz.ratio(squash(paras1), squash(paras2)) / 100.0
    if ignore_blanks:
        return float(squash(paras1) == squash(paras2))
    if len(paras1) != len(paras2):
        return 0.0
    if fuzzy_match:
        fuzz = require("rapidfuzz.fuzz", "rapidfuzz", metric="compare_docx_files")
        if not paras1:
            return 1.0
        return sum(
            fuzz.ratio(case(a), case(b)) / 100.0 for a, b in zip(paras1, paras2, strict=True)
        ) / len(paras1)
    return float(all(case(a) == case(b) for a, b in zip(paras1, paras2, strict=True)))


@metric("compare_docx_tables")
def compare_docx_tables(file1: Any, file2: Any) -> float:
    """1 when both documents have the same tables with the same (stripped) cell texts."""
    pair = _pair(file1, file2, "compare_docx_tables")
    if pair is None:
        return 0.0
    tables1, tables2 = pair[0].tables, pair[1].tables
    if len(tables1) != len(tables2):
        return 0.0
    for t1, t2 in zip(tables1, tables2, strict=True):
        if len(t1.rows) != len(t2.rows) or len(t1.columns) != len(t2.columns):
            return 0.0
        for i in range(len(t1.rows)):
            for j in range(len(t1.columns)):
                if t1.cell(i, j).text.strip() != t2.cell(i, j).text.strip():
                    return 0.0
    return 1.0


@metric("compare_line_spacing")
def compare_line_spacing(file1: Any, file2: Any) -> float:
    """1 when the texts match (compare_docx_files) and every paragraph has the
    same line spacing as its counterpart."""
    if not compare_docx_files(file1, file2):
        return 0.0
    doc1, doc2 = _pair(file1, file2, "compare_line_spacing") or (None, None)
    if doc1 is None or len(doc1.paragraphs) != len(doc2.paragraphs):
        return 0.0
    return float(
        all(
            p1.paragraph_format.line_spacing == p2.paragraph_format.line_spacing
            for p1, p2 in zip(doc1.paragraphs, doc2.paragraphs, strict=True)
        )
    )
