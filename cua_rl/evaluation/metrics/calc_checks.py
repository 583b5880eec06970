"""Task-specific Calc checks from OSWorld's `metrics/table.py` (besides compare_table)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.registry import metric


def _city(value: Any) -> str:
    """Accents dropped, lowercased, every run of non-alphanumerics one space."""
    text = unicodedata.normalize("NFKD", "" if value is None else str(value))
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


@metric("compare_conference_city_in_order")
def compare_conference_city_in_order(result: Any, rules: Mapping[str, Any]) -> float:
    """C2:C22 of the active sheet, in order, each containing (after normalization)
    one of the accepted names at that position of `rules.expected` (a name or a
    list of alternatives). Cells past the end of the expected list fail."""
    openpyxl = require("openpyxl", "openpyxl", metric="compare_conference_city_in_order")
    if not result or not Path(result).is_file():
        return 0.0
    try:
        sheet = openpyxl.load_workbook(result).active
    except Exception:  # not a workbook the agent saved
        return 0.0
    expected = rules["expected"]
    cities = [cell.value for row in sheet["C2:C22"] for cell in row]
    for i, city in enumerate(cities):
        if i >= len(expected):
            return 0.0
        entry = expected[i]
        names = [entry] if isinstance(entry, str) else list(entry)
        got = _city(city)
        if not any(_city(name) and _city(name) in got for name in names):
            return 0.0
    return 1.0
