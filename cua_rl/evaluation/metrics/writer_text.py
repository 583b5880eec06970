"""Writer text comparisons (python-docx) from OSWorld's `docs.py`: line breaks,
reference lists, de-duplicated records."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.metrics.docs import _open_docx
from cua_rl.evaluation.registry import metric


def _docx_paragraphs(path: Any, name: str) -> list[str] | None:
    if not path or not str(path).endswith(".docx"):
        return None
    doc = _open_docx(path, name)
    return None if doc is None else [p.text for p in doc.paragraphs]


@metric("compare_docx_files_and_ignore_new_lines")
def compare_docx_files_and_ignore_new_lines(
    result: Any, expected: Any, *, ignore_blanks: bool = True
) -> float:
    """Like compare_docx_files after dropping empty paragraphs (so extra blank
    lines between paragraphs do not count)."""
    name = "compare_docx_files_and_ignore_new_lines"
    paras1, paras2 = _docx_paragraphs(result, name), _docx_paragraphs(expected, name)
    if paras1 is None or paras2 is None:
        return 0.0
    paras1 = [p for p in paras1 if p != ""]
    paras2 = [p for p in paras2 if p != ""]
    if ignore_blanks:

        def squash(paras: list[str]) -> str:
            return re.sub(r"\s+", " ", "\n".join(paras)).strip()

        return float(squash(paras1) == squash(paras2))
    return float(paras1 == paras2)


@metric("compare_references")
def compare_references(
    result: Any,
    expected: Any,
    *,
    reference_indicator: str = "References",
    reference_base_result: float = 0.5,
    content_only: bool = False,
) -> float:
    """Similarity of the non-blank paragraphs after the first paragraph that is
    exactly `reference_indicator`: the mean fuzzy ratio r of aligned entries,
    rescaled to (r - base) / (1 - base) when r >= base + 0.01, else 0.

    Neither document having the heading scores 1, only one having it 0.
    `content_only` is accepted (a task passes it) and, as in OSWorld, unused.
    """
    del content_only
    fuzz = require("rapidfuzz.fuzz", "rapidfuzz", metric="compare_references")
    paras1 = _docx_paragraphs(result, "compare_references")
    paras2 = _docx_paragraphs(expected, "compare_references")
    if paras1 is None or paras2 is None:
        return 0.0
    has1, has2 = reference_indicator in paras1, reference_indicator in paras2
    if not has1 and not has2:
        return 1.0
    if not has1 or not has2:
        return 0.0
    refs1 = [p for p in paras1[paras1.index(reference_indicator) + 1 :] if p.strip()]
    refs2 = [p for p in paras2[paras2.index(reference_indicator) + 1 :] if p.strip()]
    if len(refs1) != len(refs2):
        return 0.0
    if not refs1:
        return 0.0  # OSWorld divides by zero here
    mean = sum(fuzz.ratio(a, b) / 100.0 for a, b in zip(refs1, refs2, strict=True)) / len(refs1)
    if mean >= reference_base_result + 0.01:
        return (mean - reference_base_result) / (1 - reference_base_result)
    return 0.0


def _records(path: Any) -> tuple[list[str], list[str]] | None:
    """(non-blank stripped lines, train ids: 2nd field of 4-field comma lines)."""
    paras = _docx_paragraphs(path, "compare_unique_train_records")
    if paras is None:
        return None
    lines = [p.strip() for p in paras if p.strip()]
    return lines, [ln.split(",")[1].strip() for ln in lines if len(ln.split(",")) == 4]


@metric("compare_unique_train_records")
def compare_unique_train_records(result: Any, expected: Any) -> float:
    """`expected` is [gold, original]: every result line comes from the original,
    no train id repeats, the ids are the gold's and the line count is the gold's."""
    if not isinstance(expected, list) or len(expected) < 2 or not result:
        return 0.0
    if not all(p and Path(p).is_file() for p in (result, expected[0], expected[1])):
        return 0.0
    got, gold, original = _records(result), _records(expected[0]), _records(expected[1])
    if got is None or gold is None or original is None:
        return 0.0
    lines, ids = got
    if not set(lines) <= set(original[0]):
        return 0.0
    if len(ids) != len(set(ids)) or set(ids) != set(gold[1]):
        return 0.0
    return float(len(lines) == len(gold[0]))
