"""Office-format metrics on files generated here with openpyxl, python-docx, python-pptx."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.errors import EvalExtraMissing
from cua_rl.eval_libraries import require
from cua_rl.evaluation import get_metric

openpyxl = pytest.importorskip("openpyxl", reason="needs the eval extra")
docx = pytest.importorskip("docx", reason="needs the eval extra")
pptx = pytest.importorskip("pptx", reason="needs the eval extra")
pytest.importorskip("pandas", reason="needs the eval extra")


def run(name: str, *args: object, **options: object) -> float:
    return get_metric(name).func(*args, **options)


def book(
    path: Path, rows: list[list[object]], *, bold_a1: bool = False, merge: str | None = None
) -> str:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Sheet1"
    for row in rows:
        ws.append(row)
    if bold_a1:
        ws["A1"].font = openpyxl.styles.Font(bold=True)
    if merge:
        ws.merge_cells(merge)
    wb.save(path)
    return str(path)


def test_compare_table_sheet_data(tmp_path: Path) -> None:
    gold = book(tmp_path / "gold.xlsx", [["item", "price"], ["a", 1.00001], ["b", 2]])
    close = book(tmp_path / "close.xlsx", [["item", "price"], ["a", 1.00002], ["b", 2]])
    wrong = book(tmp_path / "wrong.xlsx", [["item", "price"], ["a", 1.5], ["b", 2]])
    rules = [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]
    assert run("compare_table", close, gold, rules=rules) == 1.0
    assert run("compare_table", wrong, gold, rules=rules) == 0.0
    assert run("compare_table", None, gold, rules=rules) == 0.0
    junk = tmp_path / "junk.xlsx"
    junk.write_text("not a workbook")
    assert run("compare_table", str(junk), gold, rules=rules) == 0.0
    names = [{"type": "sheet_name"}]
    assert run("compare_table", wrong, gold, rules=names) == 1.0


def test_compare_table_check_cell(tmp_path: Path) -> None:
    path = book(tmp_path / "r.xlsx", [["Total", 41.95]], bold_a1=True, merge="C1:D1")
    ok = [
        {
            "type": "check_cell",
            "sheet_idx": 0,
            "coordinate": "B1",
            "props": {"value": {"method": "approx:0.1", "ref": 42}},
        },
        {
            "type": "check_cell",
            "sheet_idx": "RNSheet1",
            "coordinate": "A1",
            "props": {
                "value": {"method": "eq", "ref": "Total"},
                "font_bold": {"method": "eq", "ref": True},
            },
        },
        {
            "type": "check_cell",
            "sheet_idx": 0,
            "coordinate": "D1",
            "props": {"merge": {"method": "eq", "ref": True}},
        },
    ]
    assert run("compare_table", path, rules=ok) == 1.0
    bad = [
        {
            "type": "check_cell",
            "sheet_idx": 0,
            "coordinate": "B1",
            "props": {"value": {"method": "approx:0.01", "ref": 42}},
        }
    ]
    assert run("compare_table", path, rules=bad) == 0.0


def test_compare_table_sheet_print_and_fuzzy(tmp_path: Path) -> None:
    got = book(tmp_path / "got.xlsx", [["Main Rd"]])
    gold = book(tmp_path / "gold.xlsx", [["main road"]])
    (tmp_path / "got-Sheet1.csv").write_text("a,b\n1,2\n\n")
    (tmp_path / "gold-Sheet1.csv").write_text("a,b\n1,2\n")
    printed = [{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}]
    assert run("compare_table", got, gold, rules=printed) == 1.0
    (tmp_path / "gold-Sheet1.csv").write_text("a,b\n1,3\n")
    assert run("compare_table", got, gold, rules=printed) == 0.0
    fuzzy = [
        {
            "type": "sheet_fuzzy",
            "sheet_idx0": 0,
            "sheet_idx1": "EI0",
            "rules": [
                {
                    "range": ["A1"],
                    "type": "exact_match",
                    "ignore_case": True,
                    "normalization": [["Rd", "Road"]],
                }
            ],
        }
    ]
    assert run("compare_table", got, gold, rules=fuzzy) == 1.0
    fuzzy[0]["rules"][0]["normalization"] = []
    assert run("compare_table", got, gold, rules=fuzzy) == 0.0


def document(
    path: Path,
    paragraphs: list[str],
    table: list[list[str]] | None = None,
    spacing: float | None = None,
) -> str:
    doc = docx.Document()
    for text in paragraphs:
        para = doc.add_paragraph(text)
        if spacing is not None:
            para.paragraph_format.line_spacing = spacing
    if table:
        grid = doc.add_table(rows=len(table), cols=len(table[0]))
        for i, row in enumerate(table):
            for j, text in enumerate(row):
                grid.cell(i, j).text = text
    doc.save(path)
    return str(path)


def test_docx_metrics(tmp_path: Path) -> None:
    gold = document(tmp_path / "gold.docx", ["Title", "Body  text"], [["a", "b"]], 1.5)
    same = document(tmp_path / "same.docx", ["Title", "Body text"], [["a", "b "]], 1.5)
    other = document(tmp_path / "other.docx", ["Title", "Other"], [["a", "c"]], 2.0)
    assert run("compare_docx_files", same, gold) == 1.0
    assert run("compare_docx_files", other, gold) == 0.0
    assert run("compare_docx_files", same, gold, ignore_blanks=False) == 0.0
    assert 0.5 < run("compare_docx_files", other, gold, content_only=True) < 1.0
    assert run("compare_docx_files", None, gold) == 0.0
    assert run("compare_docx_tables", same, gold) == 1.0
    assert run("compare_docx_tables", other, gold) == 0.0
    assert run("compare_line_spacing", same, gold) == 1.0
    respaced = document(tmp_path / "respaced.docx", ["Title", "Body text"], None, 2.0)
    assert run("compare_line_spacing", respaced, gold) == 0.0


def deck(path: Path, title: str, *, bold: bool = False, left: int = 0) -> str:
    prs = pptx.Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = title
    box = slide.shapes.add_textbox(
        pptx.util.Emu(914400 + left),
        pptx.util.Emu(914400),
        pptx.util.Emu(3000000),
        pptx.util.Emu(600000),
    )
    run_ = box.text_frame.paragraphs[0].add_run()
    run_.text = "point"
    run_.font.bold = bold
    prs.save(path)
    return str(path)


def test_compare_pptx_files(tmp_path: Path) -> None:
    gold = deck(tmp_path / "gold.pptx", "Plan", bold=True)
    assert run("compare_pptx_files", deck(tmp_path / "a.pptx", "Plan", bold=True), gold) == 1.0
    assert run("compare_pptx_files", deck(tmp_path / "b.pptx", "Plan"), gold) == 0.0
    assert (
        run("compare_pptx_files", deck(tmp_path / "c.pptx", "Plan"), gold, examine_font_bold=False)
        == 1.0
    )
    assert run("compare_pptx_files", deck(tmp_path / "d.pptx", "Draft", bold=True), gold) == 0.0
    moved = deck(tmp_path / "e.pptx", "Plan", bold=True, left=400000)
    assert run("compare_pptx_files", moved, gold) == 0.0
    assert run("compare_pptx_files", moved, gold, examine_shape=False) == 1.0
    assert run("compare_pptx_files", gold, gold, examine_title_bottom_position=True) == 1.0


def test_compare_image_list(tmp_path: Path) -> None:
    from PIL import Image

    paths = []
    for name, color in (("a.png", "red"), ("b.png", "red"), ("c.png", "blue")):
        Image.new("RGB", (8, 8), color).save(tmp_path / name)
        paths.append(str(tmp_path / name))
    assert run("compare_image_list", [paths[0]], [paths[1]]) == 1.0
    assert run("compare_image_list", [paths[0], paths[0]], [paths[1], paths[2]]) == 0.0
    assert run("compare_image_list", [None], [paths[1]]) == 0.0


def test_missing_format_library_names_the_extra() -> None:
    with pytest.raises(EvalExtraMissing, match=r"pip install 'cua-rl\[eval\]'"):
        require("no_such_format_library", "no-such-lib", metric="compare_x")
