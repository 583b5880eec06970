"""OSWorld's small rule language `{"method": ..., "ref": ...}` used by check_json,
compare_table's check_cell and others: one function so every metric reads a
rule the same way.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Mapping
from typing import Any

from cua_rl.eval_libraries import require

_COMPARISONS = frozenset({"eq", "ne", "le", "lt", "ge", "gt"})


def match_value_to_rule(value: Any, rule: Mapping[str, Any]) -> bool:
    """Whether `value` satisfies `rule`.

    Methods: `re[.FLAG...]` (regex search, e.g. `re.IGNORECASE`), eq/ne/le/lt/ge/gt,
    `approx:T` (|value - ref| <= T after float()), `range.XY` with X, Y in {e, t}
    (ref[0] <X value <Y ref[1]), `str_list_eq`/`str_set_eq` (comma-separated value
    vs a list), `spreadsheet_range` (ref[0] within value within ref[1]).
    """
    method = rule["method"]
    ref = rule.get("ref")
    if method.startswith("re"):
        flags = functools.reduce(
            operator.or_, (getattr(re, f) for f in method.split(".")[1:]), re.RegexFlag(0)
        )
        return isinstance(value, str) and re.search(ref, value, flags) is not None
    if method in _COMPARISONS:
        try:
            return bool(getattr(operator, method)(value, ref))
        except TypeError:  # e.g. None < 3: the value is not what the task wants
            return False
    if method.startswith("approx:"):
        try:
            return abs(float(value) - float(ref)) <= float(method.split(":", 1)[1])
        except (TypeError, ValueError):
            return False
    if method.startswith("range."):
        left, right = method[6], method[7]
        try:
            return bool(
                getattr(operator, "l" + left)(ref[0], value)
                and getattr(operator, "l" + right)(value, ref[1])
            )
        except TypeError:
            return False
    if method in ("str_list_eq", "str_set_eq"):
        if not isinstance(value, str):
            return False
        container = list if method == "str_list_eq" else set
        return container(value.strip("\"'").split(",")) == container(ref)
    if method == "spreadsheet_range":
        cells = require("openpyxl.worksheet.cell_range", "openpyxl", metric="spreadsheet_range")
        inner, outer = cells.MultiCellRange(ref[0]), cells.MultiCellRange(ref[1])
        return all(r in value for r in inner) and all(r in outer for r in value)
    raise ValueError(f"unknown rule method {method!r}")


KNOWN_METHODS = (
    "re",
    "eq",
    "ne",
    "le",
    "lt",
    "ge",
    "gt",
    "approx:",
    "range.",
    "str_list_eq",
    "str_set_eq",
    "spreadsheet_range",
)


def method_is_known(method: Any) -> bool:
    """For spec checks: whether `match_value_to_rule` understands `method`."""
    if not isinstance(method, str):
        return False
    if method in _COMPARISONS or method in ("str_list_eq", "str_set_eq", "spreadsheet_range"):
        return True
    if method == "re" or method.startswith("re."):
        return all(hasattr(re, f) for f in method.split(".")[1:])
    if method.startswith("approx:"):
        try:
            float(method.split(":", 1)[1])
            return True
        except ValueError:
            return False
    return bool(re.fullmatch(r"range\.[et][et]", method))
