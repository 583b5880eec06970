"""compare_table's structural rule types (one test each) and the other Calc checks,
on workbooks generated here with openpyxl."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cua_rl.evaluation import get_metric

openpyxl = pytest.importorskip("openpyxl", reason="needs the eval extra")
pytest.importorskip("pandas", reason="needs the eval extra")


def run(name: str, *args: object, **options: object) -> float:
    return get_metric(name).func(*args, **options)


Edit = Callable[[Any], None]


def book(path: Path, edit: Edit | None = None, rows: list[list[Any]] | None = None) -> str:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    for row in rows or [["Month", "Sales"], ["Jan", 10], ["Feb", 20], ["Mar", 15]]:
        ws.append(row)
    if edit is not None:
        edit(wb)
    wb.save(path)
    return str(path)


def pair_rule(kind: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"type": kind, "sheet_idx0": 0, "sheet_idx1": "EI0", **extra}]


def test_chart_rule(tmp_path: Path) -> None:
    from openpyxl.chart import BarChart, LineChart, Reference

    def chart(kind: type, title: str) -> Edit:
        def edit(wb: Any) -> None:
            ws = wb.active
            ch = kind()
            ch.title = title
            ch.add_data(Reference(ws, min_col=2, min_row=1, max_row=4), titles_from_data=True)
            ch.set_categories(Reference(ws, min_col=1, min_row=2, max_row=4))
            ws.add_chart(ch, "D2")

        return edit

    gold = book(tmp_path / "gold.xlsx", chart(BarChart, "Sales"))
    rules = pair_rule("chart", chart_props=["type", "title"])
    assert (
        run("compare_table", book(tmp_path / "a.xlsx", chart(BarChart, "Sales")), gold, rules=rules)
        == 1.0
    )
    assert (
        run(
            "compare_table", book(tmp_path / "b.xlsx", chart(LineChart, "Sales")), gold, rules=rules
        )
        == 0.0
    )
    assert (
        run("compare_table", book(tmp_path / "c.xlsx", chart(BarChart, "Other")), gold, rules=rules)
        == 0.0
    )
    assert run("compare_table", book(tmp_path / "d.xlsx"), gold, rules=rules) == 0.0


def pivot(data_subtotal: str, row_field: int = 0) -> Edit:
    from openpyxl.pivot.cache import (
        CacheDefinition,
        CacheField,
        CacheSource,
        SharedItems,
        WorksheetSource,
    )
    from openpyxl.pivot.table import (
        DataField,
        FieldItem,
        Location,
        PivotField,
        RowColField,
        TableDefinition,
    )

    def edit(wb: Any) -> None:
        source = CacheSource(
            type="worksheet", worksheetSource=WorksheetSource(ref="A1:B4", sheet="Sheet1")
        )
        fields = [CacheField(name=n, sharedItems=SharedItems()) for n in ("Month", "Sales")]
        table = TableDefinition(
            name="Pivot1",
            cacheId=1,
            dataCaption="Values",
            location=Location(ref="A1:B5", firstHeaderRow=1, firstDataRow=1, firstDataCol=1),
            pivotFields=[
                PivotField(axis="axisRow", items=[FieldItem(x=i) for i in range(3)]),
                PivotField(dataField=True),
            ],
            rowFields=[RowColField(x=row_field)],
            dataFields=[DataField(fld=1, name="Total", subtotal=data_subtotal)],
        )
        table.cache = CacheDefinition(cacheSource=source, cacheFields=fields)
        wb.create_sheet("Sheet2").add_pivot(table)

    return edit


def test_pivot_table_rule(tmp_path: Path) -> None:
    gold = book(tmp_path / "gold.xlsx", pivot("sum"))
    rules = [
        {
            "type": "pivot_table",
            "sheet_idx0": "RNSheet2",
            "sheet_idx1": "ENSheet2",
            "pivot_props": ["col_fields", "filter", "row_fields", "data_fields"],
        }
    ]
    assert run("compare_table", book(tmp_path / "a.xlsx", pivot("sum")), gold, rules=rules) == 1.0
    assert run("compare_table", book(tmp_path / "b.xlsx", pivot("count")), gold, rules=rules) == 0.0
    assert run("compare_table", book(tmp_path / "c.xlsx"), gold, rules=rules) == 0.0


def test_style_rule_applies_conditional_formatting(tmp_path: Path) -> None:
    pytest.importorskip("formulas", reason="needs the eval extra")
    from openpyxl.formatting.rule import CellIsRule, FormulaRule
    from openpyxl.styles import Font

    green = "FF00FF00"

    def by_hand(wb: Any) -> None:
        wb.active["B3"].font = Font(color=green)

    def by_rule(wb: Any) -> None:
        wb.active.conditional_formatting.add(
            "B2:B4", CellIsRule(operator="equal", formula=["20"], font=Font(color=green))
        )

    def by_formula(wb: Any) -> None:
        wb.active.conditional_formatting.add(
            "B2:B4", FormulaRule(formula=["B2>=MAX($B$2:$B$4)"], font=Font(color=green))
        )

    def wrong_cell(wb: Any) -> None:
        wb.active["B4"].font = Font(color=green)

    gold = book(tmp_path / "gold.xlsx", by_hand)
    rules = pair_rule("style", props=["font_color"])
    assert run("compare_table", book(tmp_path / "a.xlsx", by_hand), gold, rules=rules) == 1.0
    assert run("compare_table", book(tmp_path / "b.xlsx", by_rule), gold, rules=rules) == 1.0
    assert run("compare_table", book(tmp_path / "f.xlsx", by_formula), gold, rules=rules) == 1.0
    assert run("compare_table", book(tmp_path / "c.xlsx", wrong_cell), gold, rules=rules) == 0.0


def test_style_rule_fill_colors(tmp_path: Path) -> None:
    from openpyxl.styles import PatternFill

    def fill(coordinate: str) -> Edit:
        def edit(wb: Any) -> None:
            wb.active[coordinate].fill = PatternFill("solid", fgColor="FFFF0000")

        return edit

    gold = book(tmp_path / "gold.xlsx", fill("A2"))
    rules = pair_rule("style", props=["bgcolor"])
    assert run("compare_table", book(tmp_path / "a.xlsx", fill("A2")), gold, rules=rules) == 1.0
    assert run("compare_table", book(tmp_path / "b.xlsx", fill("A3")), gold, rules=rules) == 0.0
    check = [
        {
            "type": "check_cell",
            "sheet_idx": 0,
            "coordinate": "A2",
            "props": {
                "bgcolor": {"method": "eq", "ref": "FFFF0000"},
                "fill_type": {"method": "eq", "ref": "patternFill"},
            },
        }
    ]
    assert run("compare_table", gold, rules=check) == 1.0


def test_freeze_rule(tmp_path: Path) -> None:
    def freeze(cell: str) -> Edit:
        def edit(wb: Any) -> None:
            wb.active.freeze_panes = cell

        return edit

    gold = book(tmp_path / "gold.xlsx", freeze("A2"))
    assert (
        run(
            "compare_table",
            book(tmp_path / "a.xlsx", freeze("A2")),
            gold,
            rules=pair_rule("freeze"),
        )
        == 1.0
    )
    assert (
        run(
            "compare_table",
            book(tmp_path / "b.xlsx", freeze("B2")),
            gold,
            rules=pair_rule("freeze"),
        )
        == 0.0
    )
    assert run("compare_table", book(tmp_path / "c.xlsx"), gold, rules=pair_rule("freeze")) == 0.0


def test_zoom_rule(tmp_path: Path) -> None:
    def zoom(wb: Any) -> None:
        wb.active.sheet_view.zoomScale = 80

    rules = [{"type": "zoom", "sheet_idx": 0, "method": "lt", "ref": 100}]
    assert run("compare_table", book(tmp_path / "a.xlsx", zoom), rules=rules) == 1.0
    assert run("compare_table", book(tmp_path / "b.xlsx"), rules=rules) == 0.0  # 100 by default


def test_data_validation_rule(tmp_path: Path) -> None:
    from openpyxl.worksheet.datavalidation import DataValidation

    def validate(values: str) -> Edit:
        def edit(wb: Any) -> None:
            dv = DataValidation(type="list", formula1=f'"{values}"')
            dv.add("D2:D29")
            wb.active.add_data_validation(dv)

        return edit

    rules = [
        {
            "type": "data_validation",
            "sheet_idx": 0,
            "dv_props": [
                {
                    "ranges": {"method": "spreadsheet_range", "ref": ["D2:D29", "D1:D1048576"]},
                    "type": {"method": "eq", "ref": "list"},
                    "formula1": {"method": "str_set_eq", "ref": ["Pass", "Fail", "Held"]},
                }
            ],
        }
    ]
    assert (
        run("compare_table", book(tmp_path / "a.xlsx", validate("Held,Pass,Fail")), rules=rules)
        == 1.0
    )
    assert (
        run("compare_table", book(tmp_path / "b.xlsx", validate("Pass,Fail")), rules=rules) == 0.0
    )
    assert run("compare_table", book(tmp_path / "c.xlsx"), rules=rules) == 0.0


def test_row_and_col_props_rules(tmp_path: Path) -> None:
    def hide_row(n: int) -> Edit:
        def edit(wb: Any) -> None:
            wb.active.row_dimensions[n].hidden = True
            wb.active.column_dimensions["B"].width = 20

        return edit

    gold = book(tmp_path / "gold.xlsx", hide_row(3))
    rows = pair_rule("row_props", props=["hidden"])
    assert run("compare_table", book(tmp_path / "a.xlsx", hide_row(3)), gold, rules=rows) == 1.0
    assert run("compare_table", book(tmp_path / "b.xlsx", hide_row(4)), gold, rules=rows) == 0.0
    cols = pair_rule("col_props", props=["width"])
    assert run("compare_table", book(tmp_path / "c.xlsx", hide_row(4)), gold, rules=cols) == 1.0
    assert run("compare_table", book(tmp_path / "d.xlsx"), gold, rules=cols) == 0.0


def test_filter_rule(tmp_path: Path) -> None:
    def auto_filter(ref: str) -> Edit:
        def edit(wb: Any) -> None:
            wb.active.auto_filter.ref = ref
            wb.active.auto_filter.add_filter_column(0, ["Jan"])

        return edit

    gold = book(tmp_path / "gold.xlsx", auto_filter("A1:B4"))
    rules = pair_rule("filter")
    assert (
        run("compare_table", book(tmp_path / "a.xlsx", auto_filter("A1:B4")), gold, rules=rules)
        == 1.0
    )
    assert (
        run("compare_table", book(tmp_path / "b.xlsx", auto_filter("A1:B3")), gold, rules=rules)
        == 0.0
    )


_SPARKLINE = (
    '<extLst><ext uri="{05C60535-1F16-4fd2-B633-F4F36F0B64E0}" '
    'xmlns:x14="http://schemas.microsoft.com/office/spreadsheetml/2009/9/main">'
    '<x14:sparklineGroups xmlns:xm="http://schemas.microsoft.com/office/excel/2006/main">'
    "<x14:sparklineGroup><x14:sparklines><x14:sparkline><xm:f>Sheet1!{f}</xm:f>"
    "<xm:sqref>C2</xm:sqref></x14:sparkline></x14:sparklines></x14:sparklineGroup>"
    "</x14:sparklineGroups></ext></extLst>"
)


def with_sparkline(path: Path, formula: str) -> str:
    plain = Path(book(path.with_suffix(".plain.xlsx")))
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(path, "w") as out:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                data = data.replace(
                    b"</worksheet>", _SPARKLINE.replace("{f}", formula).encode() + b"</worksheet>"
                )
            out.writestr(item, data)
    return str(path)


def test_sparkline_rule(tmp_path: Path) -> None:
    gold = with_sparkline(tmp_path / "gold.xlsx", "A2:B2")
    rules = pair_rule("sparkline")
    assert (
        run("compare_table", with_sparkline(tmp_path / "a.xlsx", "A2:B2"), gold, rules=rules) == 1.0
    )
    assert (
        run("compare_table", with_sparkline(tmp_path / "b.xlsx", "A3:B3"), gold, rules=rules) == 0.0
    )


def test_compare_conference_city_in_order(tmp_path: Path) -> None:
    cities = ["Montréal, QC", "New York City"] + ["Sydney"] * 19  # C2:C22 is read
    path = book(
        tmp_path / "c.xlsx",
        rows=[["Year", "Conf", "City"]] + [[2000 + i, "A", city] for i, city in enumerate(cities)],
    )
    expected = {"expected": [["Montreal", "Montréal"], ["New York", "NYC"]] + ["sydney"] * 19}
    assert run("compare_conference_city_in_order", path, expected) == 1.0
    expected["expected"][1] = "Paris"
    assert run("compare_conference_city_in_order", path, expected) == 0.0
    assert run("compare_conference_city_in_order", path, {"expected": ["Montreal"]}) == 0.0
    assert run("compare_conference_city_in_order", None, expected) == 0.0
