"""`compare_table`: OSWorld's spreadsheet metric, a sequence of rules that must all hold.

Rule types: `sheet_name`, `sheet_data` (cell values through pandas,
rounded to `precision` digits, exactly as OSWorld compares them),
`sheet_print` (the CSV exports LibreOffice writes beside the book in a
postconfig step), `sheet_fuzzy` and `check_cell` (value and style properties)
here; every structural type OSWorld has (chart, pivot_table, style, freeze,
zoom, data_validation, row_props, col_props, filter, sparkline) in
`table_rules`. Rules run in order and the first that fails ends the check.

Sheets are named like OSWorld does: an int (index into the result's sheets),
`RI<i>`/`RN<name>` for the result, `EI<i>`/`EN<name>` for the expected book.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.metrics.files import read_text_latin1_fallback
from cua_rl.evaluation.metrics.rules import match_value_to_rule, method_is_known
from cua_rl.evaluation.metrics.table_rules import RULE_NEEDS, structural_rule_ok
from cua_rl.evaluation.metrics.xlsx_cells import CELL_PROPS, read_cell_style, read_cell_value
from cua_rl.evaluation.registry import Finding, metric

_NEEDS = {
    "sheet_name": (),
    "sheet_data": ("sheet_idx0", "sheet_idx1"),
    "sheet_print": ("sheet_idx0", "sheet_idx1"),
    "sheet_fuzzy": ("sheet_idx0", "sheet_idx1", "rules"),
    "check_cell": ("sheet_idx", "coordinate", "props"),
    **RULE_NEEDS,
}


def check_table_options(options: Mapping[str, Any]) -> tuple[list[Finding], list[str]]:
    """Spec check of compare_table's `rules`: structure errors and unimplemented types."""
    errors: list[Finding] = []
    missing: list[str] = []
    rules = options.get("rules")
    if not isinstance(rules, list):
        return [(".rules", "an array of table rules")], []
    for i, rule in enumerate(rules):
        at = f".rules[{i}]"
        if not isinstance(rule, Mapping) or not isinstance(rule.get("type"), str):
            errors.append((at, "a rule object with a string 'type'"))
            continue
        kind = rule["type"]
        if kind not in _NEEDS:
            if kind not in missing:
                missing.append(kind)
            continue
        errors += [
            (f"{at}.{k}", f"a value (rule {kind!r} requires '{k}')")
            for k in _NEEDS[kind]
            if k not in rule
        ]
        if kind == "check_cell" and isinstance(rule.get("props"), Mapping):
            for prop, prule in rule["props"].items():
                if prop not in CELL_PROPS:
                    errors.append((f"{at}.props.{prop}", f"one of {sorted(CELL_PROPS)}"))
                elif not isinstance(prule, Mapping) or not method_is_known(prule.get("method")):
                    errors.append(
                        (
                            f"{at}.props.{prop}",
                            "a rule {method, ref} with a known "
                            "method (eq, approx:T, re, range.XY, ...)",
                        )
                    )
    return errors, missing


class _Books:
    """Both workbooks, opened lazily in the forms the rule types need."""

    def __init__(self, result: str, expected: str | None) -> None:
        self.paths = {"R": result, "E": expected}
        self._pandas: dict[str, Any] = {}
        self._openpyxl: dict[str, Any] = {}

    def pandas(self, side: str) -> Any:
        if side not in self._pandas:
            pd = require("pandas", "pandas", metric="compare_table")
            require("openpyxl", "openpyxl", metric="compare_table")
            self._pandas[side] = pd.ExcelFile(self.paths[side], engine="openpyxl")
        return self._pandas[side]

    def openpyxl(self, side: str) -> Any:
        if side not in self._openpyxl:
            openpyxl = require("openpyxl", "openpyxl", metric="compare_table")
            self._openpyxl[side] = openpyxl.load_workbook(self.paths[side])
        return self._openpyxl[side]

    def names(self, side: str) -> list[str]:
        return list(self.pandas(side).sheet_names) if self.paths[side] else []

    def resolve(self, index: int | str) -> tuple[str, str]:
        """(side, sheet name); an unknown index gives an empty name (no such sheet)."""
        if isinstance(index, int):
            names = self.names("R")
            return "R", names[index] if 0 <= index < len(names) else ""
        side, how, rest = index[0], index[1:2], index[2:]
        if side not in "RE" or how not in ("I", "N") or len(index) < 2:
            raise ValueError(f"compare_table: unrecognized sheet index {index!r}")
        if how == "N":
            return side, rest
        names = self.names(side)
        try:
            return side, names[int(rest)]
        except (ValueError, IndexError):
            return side, ""


def _sheet_frame(books: _Books, index: int | str, precision: int) -> Any:
    side, name = books.resolve(index)
    if name not in books.names(side):
        return None
    pd = require("pandas", "pandas", metric="compare_table")
    return pd.read_excel(books.pandas(side), name).round(precision)


def _printed_lines(books: _Books, index: int | str) -> list[str] | None:
    """Lines of `<book>-<sheet>.csv` beside the book, stripped, trailing blanks dropped
    (UTF-8, else Latin-1, as OSWorld reads them)."""
    side, name = books.resolve(index)
    text = read_text_latin1_fallback(f"{os.path.splitext(books.paths[side] or '')[0]}-{name}.csv")
    if text is None:
        return None
    lines = [line.strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _fuzzy_ok(books: _Books, rule: Mapping[str, Any]) -> bool:
    cells = require("openpyxl.worksheet.cell_range", "openpyxl", metric="compare_table")
    utils = require("openpyxl.utils", "openpyxl", metric="compare_table")
    fuzz = require("rapidfuzz.fuzz", "rapidfuzz", metric="compare_table")
    side0, name0 = books.resolve(rule["sheet_idx0"])
    side1, name1 = books.resolve(rule["sheet_idx1"])
    for sub in rule["rules"]:
        for rng in cells.MultiCellRange(sub["range"]):
            for row, col in rng.cells:
                coord = f"{utils.get_column_letter(col)}{row}"
                a = str(read_cell_value(books.paths[side0], name0, coord))
                b = str(read_cell_value(books.paths[side1], name1, coord))
                for old, new in sub.get("normalization", []):
                    a, b = a.replace(old, new), b.replace(old, new)
                if "trim_leadings" in sub:
                    a, b = a.lstrip(sub["trim_leadings"]), b.lstrip(sub["trim_leadings"])
                if "trim_trailings" in sub:
                    a, b = a.rstrip(sub["trim_trailings"]), b.rstrip(sub["trim_trailings"])
                if "ignore_chars" in sub:
                    drop = set(sub["ignore_chars"])
                    a = "".join(ch for ch in a if ch not in drop)
                    b = "".join(ch for ch in b if ch not in drop)
                if sub.get("ignore_case", False):
                    a, b = a.lower(), b.lower()
                kind = sub["type"]
                ok = (
                    b in a
                    if kind == "includes"
                    else a in b
                    if kind == "included_by"
                    else fuzz.ratio(a, b) >= sub.get("threshold", 85.0)
                    if kind == "fuzzy_match"
                    else a == b
                )
                if not ok:
                    return False
    return True


def _cell_ok(books: _Books, rule: Mapping[str, Any]) -> bool:
    side, name = books.resolve(rule["sheet_idx"])
    workbook = books.openpyxl(side)
    if name not in workbook.sheetnames:
        return False
    cell = workbook[name][rule["coordinate"]]
    for prop, prule in rule["props"].items():
        if prop == "value":
            value = read_cell_value(books.paths[side], name, rule["coordinate"])
        else:
            value = read_cell_style(prop, cell)
        if not match_value_to_rule(value, prule):
            return False
    return True


def _rule_ok(books: _Books, rule: Mapping[str, Any]) -> bool:
    kind = rule["type"]
    if kind == "sheet_name":
        return books.names("R") == books.names("E")
    if kind == "sheet_data":
        precision = int(rule.get("precision", 4))
        first = _sheet_frame(books, rule["sheet_idx0"], precision)
        second = _sheet_frame(books, rule["sheet_idx1"], precision)
        return first is not None and second is not None and bool(first.equals(second))
    if kind == "sheet_print":
        first, second = (_printed_lines(books, rule[k]) for k in ("sheet_idx0", "sheet_idx1"))
        if first is None or second is None:
            return False
        if rule.get("ignore_case", False):
            first, second = [s.lower() for s in first], [s.lower() for s in second]
        return first == second
    if kind == "sheet_fuzzy":
        return _fuzzy_ok(books, rule)
    if kind == "check_cell":
        return _cell_ok(books, rule)
    return structural_rule_ok(books, rule)


@metric("compare_table", check_options=check_table_options)
def compare_table(
    result: str | None, expected: str | None = None, *, rules: list[dict[str, Any]]
) -> float:
    """1 when every rule holds for the result book (against the expected book)."""
    if result is None or not Path(result).is_file():
        return 0.0
    books = _Books(str(result), str(expected) if expected is not None else None)
    require("openpyxl", "openpyxl", metric="compare_table")
    try:
        books.names("R")
    except Exception:  # openpyxl/zipfile raise many types for a non-workbook
        return 0.0  # the agent saved something that is not a workbook
    return float(all(_rule_ok(books, rule) for rule in rules))
