"""compare_table's structural rule types, read through openpyxl like OSWorld's `utils.py`.

Each rule compares one property family of two sheets (result vs expected, or
two sheets of one book) as plain Python values, so "equal" means exactly what
OSWorld's `load_charts`, `load_pivot_tables`, `load_xlsx_styles`,
`load_rows_or_cols`, `load_filters` and `load_sparklines` make equal:

- chart: per data source (series formulas), the requested `chart_props`;
- pivot_table: per cache source, the requested `pivot_props`;
- style: the requested cell `props` of every cell, conditional formatting applied;
- freeze: the frozen column/row counts (scroll position ignored);
- zoom: the sheet's zoom scale against a `{method, ref}` rule;
- data_validation: every validation matches one of `dv_props`;
- row_props / col_props: the requested dimension attributes per row/column;
- filter: the auto-filter range, filter columns and sort state;
- sparkline: sparkline location -> data formula.

`books` is compare_table's `_Books` (resolve, openpyxl, paths); a sheet that
does not exist yields the empty description, as in OSWorld.
"""

from __future__ import annotations

import itertools
import zipfile
from collections.abc import Callable, Mapping
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.metrics.rules import match_value_to_rule
from cua_rl.evaluation.metrics.xlsx_cells import sheet_xml


def _sheet(books: Any, index: int | str) -> Any:
    side, name = books.resolve(index)
    workbook = books.openpyxl(side)
    return workbook[name] if name in workbook.sheetnames else None


def _title(obj: Any) -> Any:
    try:
        return obj.title.tx.rich.p[0].r[0].t
    except (AttributeError, IndexError, TypeError):
        return None


def _ref(data: Any) -> str:
    for kind in ("numRef", "strRef"):
        ref = getattr(data, kind, None)
        if ref is not None and getattr(ref, "f", None) is not None:
            return ref.f
    return ""


def load_charts(sheet: Any, props: set[str]) -> dict[str, Any]:
    """{"<values>,<categories>;...": {prop: value}} for the sheet's charts."""
    charts: dict[str, Any] = {}
    for chart in getattr(sheet, "_charts", []) if sheet is not None else []:
        source = ";".join(f"{_ref(s.val)},{_ref(s.cat)}" for s in chart.series)
        info: dict[str, Any] = {}
        if "title" in props:
            info["title"] = _title(chart)
        if "legend" in props:
            info["legend"] = chart.legend.position if chart.legend is not None else None
        if "anchor" in props:
            anchor = chart.anchor
            # OSWorld's key reads to.row twice (never from.row); kept so equal means equal
            info["anchor"] = [
                anchor.editAs,
                anchor._from.col,
                anchor.to.row,
                anchor.to.col,
                anchor.to.row,
            ]
        if "width" in props:
            info["width"] = chart.width
        if "height" in props:
            info["height"] = chart.height
        if "type" in props:
            info["type"] = chart.tagname
        if "direction" in props:
            info["direction"] = getattr(chart, "barDir", None)
        for axis in ("x", "y", "z"):
            if f"{axis}title" in props:
                info[f"{axis}title"] = _title(getattr(chart, f"{axis}_axis", None))
        charts[source] = info
    return charts


def load_pivot_tables(sheet: Any, props: set[str]) -> dict[str, Any]:
    """{"<type>;<first cell>:<last cell>;<source sheet>": {prop: value}} per pivot table.

    Field indices are made relative to the first source column that any field
    selects, so a source range with extra empty columns on either side compares
    equal, as in OSWorld.
    """
    utils = require("openpyxl.utils", "openpyxl", metric="compare_table")
    pivots: dict[str, Any] = {}
    for pivot in getattr(sheet, "_pivots", []) if sheet is not None else []:
        raw = [
            [(item.h, item.x) for item in field.items if item.x is not None]
            for field in pivot.pivotFields
        ]
        trimmed = list(itertools.dropwhile(lambda r: not r, raw))
        left = len(raw) - len(trimmed)
        selection = list(itertools.dropwhile(lambda r: not r, reversed(trimmed)))[::-1]
        right = len(trimmed) - len(selection)
        cache = pivot.cache.cacheSource
        sheet_source = cache.worksheetSource
        if sheet_source is not None and sheet_source.ref and ":" in sheet_source.ref:
            first, last = (utils.coordinate_to_tuple(c) for c in sheet_source.ref.split(":"))
            span = f"{(first[0], first[1] + left)}:{(last[0], last[1] - right)}"
        else:
            span = str(getattr(sheet_source, "name", None))
        source = f"{cache.type};{span};{getattr(sheet_source, 'sheet', None)}"
        info: dict[str, Any] = {}
        simple = {
            "name": "name",
            "show_total": "visualTotals",
            "show_empty_row": "showEmptyRow",
            "show_empty_col": "showEmptyCol",
            "show_headers": "showHeaders",
            "location": "location",
        }
        for prop, attr in simple.items():
            if prop in props:
                info[prop] = getattr(pivot, attr)
        if "filter" in props or "selection" in props:
            info["selection"] = selection if "ordered" in props else [set(r) for r in selection]
        if "filter" in props:
            info["filter_fields"] = {f.fld for f in pivot.pageFields}
        for prop, fields in (("col_fields", pivot.colFields), ("row_fields", pivot.rowFields)):
            if prop in props:
                xs = [f.x - left for f in fields]
                info[prop] = [x for x in xs if x >= 0] if "ignore_special_fields" in props else xs
        if "data_fields" in props:
            named = "data_fields_name" in props
            info["data_fields"] = [
                f"{f.fld - left};{f.name if named else ''};{f.subtotal};{f.showDataAs}"
                for f in pivot.dataFields
            ]
        pivots[source] = info
    return pivots


def freeze_key(sheet: Any) -> tuple[Any, ...] | None:
    """The freeze boundary (xSplit/ySplit), not the scroll-dependent topLeftCell."""
    if sheet is None:
        return None
    pane = sheet.sheet_view.pane
    if pane is None:
        return ("none",)
    xs = int(pane.xSplit) if pane.xSplit is not None else 0
    ys = int(pane.ySplit) if pane.ySplit is not None else 0
    if (pane.state or "").lower() in ("frozen", "frozensplit"):
        return ("frozen", xs, ys)
    return ("other", xs, ys, pane.topLeftCell)


def load_dimensions(sheet: Any, obj: str, props: list[str]) -> dict[Any, dict[str, Any]]:
    if sheet is None:
        return {}
    dims = getattr(sheet, f"{obj}_dimensions")
    return {key: {p: getattr(dim, p) for p in props} for key, dim in dims.items()}


def load_filters(sheet: Any) -> dict[str, Any]:
    if sheet is None:
        return {}
    auto = sheet.auto_filter
    columns = []
    for col in auto.filterColumn:
        entry: dict[str, Any] = {
            "col_id": col.colId,
            "hidden_button": col.hiddenButton,
            "show_button": col.showButton,
        }
        if col.filters is not None:
            entry["filters_blank"] = col.filters.blank
            entry["filters"] = set(col.filters.filter)
        if col.customFilters is not None:
            entry["custom_filters_op"] = col.customFilters._and
            entry["custom_filters"] = {(f.operator, f.val) for f in col.customFilters.customFilter}
        columns.append(entry)
    result: dict[str, Any] = {
        "ref": auto.ref,
        "filter_column": sorted(columns, key=lambda d: d["col_id"]),
    }
    state = auto.sortState
    if state is not None:
        result["sort_state"] = {
            "sort": state.columnSort,
            "case": state.caseSensitive,
            "method": state.sortMethod,
            "ref": state.ref,
            "condition": [
                {
                    "descending": c.descending,
                    "key": c.sortBy,
                    "ref": c.ref,
                    "custom_list": c.customList,
                    "dxf_id": c.dxfId,
                    "icon": c.iconSet,
                    "iconid": c.iconId,
                }
                for c in state.sortCondition
            ],
        }
    return result


def load_sparklines(path: str | None, sheet_name: str) -> dict[str, str]:
    etree = require("lxml.etree", "lxml", metric="compare_table")
    x14 = "{http://schemas.microsoft.com/office/spreadsheetml/2009/9/main}"
    xm = "{http://schemas.microsoft.com/office/excel/2006/main}"
    try:
        root = etree.fromstring(sheet_xml(path, sheet_name) or b"<none/>")
    except (OSError, zipfile.BadZipFile, etree.XMLSyntaxError):
        return {}
    found: dict[str, str] = {}
    for line in root.iter(f"{x14}sparkline"):
        where, formula = line.find(f"{xm}sqref"), line.find(f"{xm}f")
        if where is not None:
            found[where.text or ""] = formula.text if formula is not None else ""
    return found


def _validation_ok(sheet: Any, rule: Mapping[str, Any]) -> bool:
    if sheet is None:
        return False
    validations = sheet.data_validations.dataValidation
    wanted = rule["dv_props"]
    if len(validations) < len(wanted):
        return False
    return all(
        any(
            all(match_value_to_rule(getattr(dv, attr), prule) for attr, prule in props.items())
            for props in wanted
        )
        for dv in validations
    )


def _pair(books: Any, rule: Mapping[str, Any], load: Callable[[Any], Any]) -> bool:
    return load(_sheet(books, rule["sheet_idx0"])) == load(_sheet(books, rule["sheet_idx1"]))


def _sparklines(books: Any, index: int | str) -> dict[str, str]:
    side, name = books.resolve(index)
    return load_sparklines(books.paths[side], name)


def _styles(books: Any, index: int | str, props: list[str]) -> dict[str, list[Any]]:
    from cua_rl.evaluation.metrics.table_styles import load_xlsx_styles  # late: heavy path

    side, name = books.resolve(index)
    sheet = _sheet(books, index)
    return {} if sheet is None else load_xlsx_styles(sheet, books.paths[side], name, props)


def structural_rule_ok(books: Any, rule: Mapping[str, Any]) -> bool:
    """Whether one structural rule (a type of RULE_NEEDS) holds."""
    kind = rule["type"]
    if kind == "chart":
        props = set(rule.get("chart_props", []))
        return _pair(books, rule, lambda s: load_charts(s, props))
    if kind == "pivot_table":
        props = set(rule.get("pivot_props", []))
        return _pair(books, rule, lambda s: load_pivot_tables(s, props))
    if kind == "style":
        props = list(rule.get("props", []))
        return _styles(books, rule["sheet_idx0"], props) == _styles(
            books, rule["sheet_idx1"], props
        )
    if kind == "freeze":
        first = freeze_key(_sheet(books, rule["sheet_idx0"]))
        return first is not None and first == freeze_key(_sheet(books, rule["sheet_idx1"]))
    if kind == "zoom":
        sheet = _sheet(books, rule["sheet_idx"])
        return sheet is not None and match_value_to_rule(sheet.sheet_view.zoomScale or 100.0, rule)
    if kind == "data_validation":
        return _validation_ok(_sheet(books, rule["sheet_idx"]), rule)
    if kind in ("row_props", "col_props"):
        obj = "row" if kind == "row_props" else "column"
        props = list(rule.get("props", []))
        return _pair(books, rule, lambda s: load_dimensions(s, obj, props))
    if kind == "filter":
        return _pair(books, rule, load_filters)
    if kind == "sparkline":
        return _sparklines(books, rule["sheet_idx0"]) == _sparklines(books, rule["sheet_idx1"])
    raise NotImplementedError(f"compare_table: rule type {kind!r} is not implemented")


_PAIR = ("sheet_idx0", "sheet_idx1")
RULE_NEEDS: dict[str, tuple[str, ...]] = {
    "chart": _PAIR,
    "pivot_table": _PAIR,
    "style": _PAIR,
    "freeze": _PAIR,
    "row_props": _PAIR,
    "col_props": _PAIR,
    "filter": _PAIR,
    "sparkline": _PAIR,
    "zoom": ("sheet_idx", "method", "ref"),
    "data_validation": ("sheet_idx", "dv_props"),
}
