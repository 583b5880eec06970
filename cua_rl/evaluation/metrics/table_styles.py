"""compare_table's `style` rule: cell styles with conditional formatting applied.

A cell highlighted by a conditional-formatting rule and one formatted by hand
must compare equal, so, like OSWorld's `load_xlsx_styles`, every rule is
evaluated against the cells it covers and an active rule's differential style
(dxf) replaces the cell's own style. Formulas are compiled with the `formulas`
package exactly as OSWorld does: the compiled function receives the cell's
stored value first, then the values of the absolute references (`$A$1`,
`$B$2:$B$9`) in the formula, in order. Rule types OSWorld does not evaluate
(top10, aboveAverage, duplicateValues, ...) never apply.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.metrics.xlsx_cells import read_cell_style, read_cell_value

log = logging.getLogger(__name__)

_ABSOLUTE = re.compile(r"\$([A-Z]{1,3})\$(\d+)(?::\$([A-Z]{1,3})\$(\d+))?")
_FORMULA_TYPES = frozenset(
    {
        "expression",
        "containsText",
        "notContainsText",
        "endsWith",
        "beginsWith",
        "containsErrors",
        "notContainsErrors",
    }
)


def _compare(operator: str, value: Any, refs: list[Any]) -> bool:
    """OSWorld's cellIs operators; a type mismatch (text vs number) is inactive."""
    try:
        if operator in ("between", "notBetween"):
            low, high = min(refs), max(refs)
            inside = low <= value <= high
            return inside if operator == "between" else not inside
        ref = refs[0]
        return {
            "lessThanOrEqual": lambda: value <= ref,
            "lessThan": lambda: value < ref,
            "equal": lambda: value == ref,
            "greaterThanOrEqual": lambda: value >= ref,
            "notEqual": lambda: value != ref,
            "greaterThan": lambda: value > ref,
        }.get(operator, lambda: False)()
    except (TypeError, IndexError, ValueError):
        return False


def _arguments(formula: str, book: str, sheet_name: str) -> list[Any]:
    args: list[Any] = []
    utils = require("openpyxl.utils", "openpyxl", metric="compare_table")
    cells = require("openpyxl.worksheet.cell_range", "openpyxl", metric="compare_table")
    for col1, row1, col2, row2 in _ABSOLUTE.findall(formula):
        if not col2:
            args.append(read_cell_value(book, sheet_name, f"{col1}{row1}"))
        else:
            rng = cells.CellRange(f"{col1}{row1}:{col2}{row2}")
            args.append(
                [
                    read_cell_value(book, sheet_name, f"{utils.get_column_letter(c)}{r}")
                    for r, c in rng.cells
                ]
            )
    return args


def _condition(rule: Any, book: str, sheet_name: str) -> Callable[[Any], Any] | None:
    """A predicate on a cell's stored value, or None when the rule cannot apply."""
    formulas = require("formulas", "formulas", metric="compare_table")
    compiled: list[Callable[..., Any]] = []
    arguments: list[list[Any]] = []
    for text in rule.formula:
        try:
            compiled.append(formulas.Parser().ast("=" + text)[1].compile())
        except Exception:  # formulas raises its own types for syntax it does not know
            log.info("conditional formatting formula %r does not compile; rule skipped", text)
            return None
        arguments.append(_arguments(text, book, sheet_name))
    if rule.type in _FORMULA_TYPES and compiled:
        func, args = compiled[0], arguments[0]
        return lambda v: func(v, *args)
    if rule.type == "cellIs":
        try:
            refs = [func() for func in compiled]
        except Exception:  # a reference formula that needs inputs: OSWorld skips the rule
            return None
        refs = [_scalar(r) for r in refs]
        operator = rule.operator
        return lambda v: _compare(operator, v, refs)
    return None


def _scalar(value: Any) -> Any:
    """A 1x1 array from `formulas` as its element."""
    try:
        return value.item() if getattr(value, "size", 0) == 1 else value
    except (AttributeError, ValueError):
        return value


def _active(condition: Callable[[Any], Any], value: Any) -> bool:
    try:
        return bool(_scalar(condition(value)))
    except Exception:  # errors inside the formula engine: the rule does not fire
        return False


def load_xlsx_styles(
    sheet: Any, book: str, sheet_name: str, props: list[str]
) -> dict[str, list[Any]]:
    """{coordinate: [value of each prop]} for every cell of the sheet."""
    utils = require("openpyxl.utils", "openpyxl", metric="compare_table")
    styles = {
        cell.coordinate: [read_cell_style(p, cell) for p in props]
        for column in sheet.iter_cols()
        for cell in column
    }
    for fmt in sheet.conditional_formatting:
        for rule in fmt.rules:
            condition = _condition(rule, book, sheet_name)
            if condition is None:
                continue
            active = []
            empty_run = 0
            for rng in fmt.cells:
                for row, col in rng.cells:
                    coordinate = f"{utils.get_column_letter(col)}{row}"
                    value = read_cell_value(book, sheet_name, coordinate)
                    if value is None:
                        empty_run += 1
                        if empty_run > 50:  # OSWorld stops scanning a range after 50 blanks
                            break
                        continue
                    if _active(condition, value):
                        active.append(sheet.cell(row=row, column=col))
            for cell in active:
                styles[cell.coordinate] = [read_cell_style(p, cell, rule.dxf) for p in props]
    return styles
