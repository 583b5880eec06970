"""Metrics of OSWorld's multi-app tasks on exported documents: place names typed
into a Word document (`fuzzy_place_math`, `metrics/general.py`). OSWorld's
`compare_htmls` and `is_expected_installed_extensions` live with the browser
family (metrics/chrome.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)

PathLike = str | Path | None


@metric("fuzzy_place_math")
def fuzzy_place_math(result_file_path: PathLike, rules: Mapping[str, Any]) -> float:
    """The document must hold exactly three words (whitespace-separated over all
    paragraphs); each scores its best rapidfuzz ratio against `rules.expected`,
    and the score is their mean."""
    docx = require("docx", "python-docx", metric="fuzzy_place_math")
    fuzz = require("rapidfuzz.fuzz", "rapidfuzz", metric="fuzzy_place_math")
    if not result_file_path or not Path(result_file_path).is_file():
        return 0.0
    try:
        document = docx.Document(str(result_file_path))
    except Exception as exc:  # noqa: BLE001 - python-docx raises many types on bad files
        log.info("fuzzy_place_math: cannot open %s: %s", result_file_path, exc)
        return 0.0
    words = [w for paragraph in document.paragraphs for w in paragraph.text.split()]
    if len(words) != 3:
        return 0.0
    answers = rules["expected"]
    return sum(max([0.0] + [fuzz.ratio(w, a) / 100 for a in answers]) for w in words) / 3
