"""Writer metrics on .docx/.odt/.xcu files generated here (python-docx, zipfile)."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cua_rl.evaluation import get_metric

docx = pytest.importorskip("docx", reason="needs the eval extra")
from docx.enum.text import WD_BREAK, WD_PARAGRAPH_ALIGNMENT, WD_TAB_ALIGNMENT  # noqa: E402
from docx.shared import Inches, Pt, RGBColor  # noqa: E402


def run(name: str, *args: object, **options: object) -> float:
    return get_metric(name).func(*args, **options)


def document(path: Path, paragraphs: list[str], edit: Callable[[Any], None] | None = None) -> str:
    doc = docx.Document()
    for text in paragraphs:
        doc.add_paragraph(text)
    if edit is not None:
        edit(doc)
    doc.save(path)
    return str(path)


def test_compare_font_names(tmp_path: Path) -> None:
    def font(name: str) -> Callable[[Any], None]:
        def edit(doc: Any) -> None:
            for p in doc.paragraphs:
                for r in p.runs:
                    r.font.name = name

        return edit

    rules = {"font_name": "Times New Roman"}
    good = document(tmp_path / "a.docx", ["x", "y"], font("Times New Roman"))
    assert run("compare_font_names", good, rules) == 1.0
    assert (
        run("compare_font_names", document(tmp_path / "b.docx", ["x"], font("Arial")), rules) == 0.0
    )


def test_compare_subscript_contains(tmp_path: Path) -> None:
    def sub(doc: Any) -> None:
        doc.add_paragraph("H").add_run("2").font.subscript = True

    gold = document(tmp_path / "g.docx", [], sub)
    assert run("compare_subscript_contains", document(tmp_path / "a.docx", [], sub), gold) == 1.0
    assert run("compare_subscript_contains", document(tmp_path / "b.docx", ["H2"]), gold) == 0.0


def test_has_page_numbers_in_footers(tmp_path: Path) -> None:
    def footer(text: str) -> Callable[[Any], None]:
        def edit(doc: Any) -> None:
            doc.sections[0].footer.paragraphs[0].text = text

        return edit

    assert (
        run("has_page_numbers_in_footers", document(tmp_path / "a.docx", ["x"], footer("Page 1")))
        == 1.0
    )
    assert (
        run("has_page_numbers_in_footers", document(tmp_path / "b.docx", ["x"], footer("Draft")))
        == 0.0
    )


def test_is_first_line_centered(tmp_path: Path) -> None:
    def center(doc: Any) -> None:
        doc.paragraphs[0].alignment = WD_PARAGRAPH_ALIGNMENT.CENTER

    assert run("is_first_line_centered", document(tmp_path / "a.docx", ["T", "b"], center)) == 1.0
    assert run("is_first_line_centered", document(tmp_path / "b.docx", ["T", "b"])) == 0.0


def test_contains_page_break(tmp_path: Path) -> None:
    def breaks(n: int) -> Callable[[Any], None]:
        def edit(doc: Any) -> None:
            for _ in range(n):
                doc.add_paragraph("x").add_run().add_break(WD_BREAK.PAGE)

        return edit

    two = document(tmp_path / "a.docx", [], breaks(2))
    assert run("contains_page_break", two, {"page_break_count": 2}) == 1.0
    assert run("contains_page_break", two, {"page_break_count": 5}) == 0.0
    assert run("contains_page_break", document(tmp_path / "b.docx", ["x"]), {}) == 0.0


def test_check_tabstops(tmp_path: Path) -> None:
    def tabs(position: float) -> Callable[[Any], None]:
        def edit(doc: Any) -> None:
            for p in doc.paragraphs:
                p.paragraph_format.tab_stops.add_tab_stop(Inches(position), WD_TAB_ALIGNMENT.RIGHT)

        return edit

    lines = ["one two three\tmore", "four five six\tend"]
    gold = document(tmp_path / "g.docx", lines, tabs(6))
    same = document(tmp_path / "a.docx", lines, tabs(6))
    assert run("check_tabstops", same, gold, word_number_split_by_tabstop=3, index=0) == 1.0
    assert 0.0 < run("check_tabstops", document(tmp_path / "b.docx", lines, tabs(5)), gold) < 1.0
    assert run("check_tabstops", same, gold, word_number_split_by_tabstop=2) == 0.0
    assert run("check_tabstops", document(tmp_path / "c.docx", lines), gold) == 0.0


def test_evaluate_colored_words_in_tables(tmp_path: Path) -> None:
    def table(vowel_color: RGBColor) -> Callable[[Any], None]:
        def edit(doc: Any) -> None:
            cells = doc.add_table(rows=1, cols=2).rows[0].cells
            for cell, word, color in (
                (cells[0], "apple", vowel_color),
                (cells[1], "dog", RGBColor(0, 0, 255)),
            ):
                cell.paragraphs[0].add_run(word).font.color.rgb = color

        return edit

    gold = document(tmp_path / "g.docx", [], table(RGBColor(255, 0, 0)))
    near_red = document(tmp_path / "a.docx", [], table(RGBColor(254, 1, 0)))
    assert run("evaluate_colored_words_in_tables", near_red, gold) == 1.0
    blue = document(tmp_path / "b.docx", [], table(RGBColor(0, 0, 255)))
    assert run("evaluate_colored_words_in_tables", blue, gold) == 0.0


def test_delta_e_2000_reference_pair() -> None:
    from cua_rl.evaluation.metrics.writer import delta_e_2000

    assert delta_e_2000((255, 0, 0), (255, 0, 0)) == 0.0
    assert delta_e_2000((255, 0, 0), (0, 0, 255)) == pytest.approx(52.88, abs=0.05)


def odt(path: Path, spans: list[tuple[str, str | None]]) -> str:
    body = "".join(
        f'<text:span text:style-name="{style}">{text}</text:span>' if style else text
        for text, style in spans
    )
    content = (
        "<office:document-content "
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0">'
        '<office:automatic-styles><style:style style:name="T1" style:family="text">'
        '<style:text-properties fo:background-color="#ffff00"/></style:style>'
        '<style:style style:name="T2" style:family="text">'
        '<style:text-properties fo:font-weight="bold"/></style:style>'
        "</office:automatic-styles><office:body><office:text>"
        f"<text:p>{body}</text:p></office:text></office:body></office:document-content>"
    )
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", content)
    return str(path)


def test_check_highlighted_words_and_odt_text(tmp_path: Path) -> None:
    gold = odt(tmp_path / "g.odt", [("Call ", None), ("now", "T2")])
    clean = odt(tmp_path / "a.odt", [("Call ", None), ("now", None)])
    assert run("compare_docx_files", clean, gold) == 1.0
    assert run("check_highlighted_words", clean, gold) == 1.0
    still = odt(tmp_path / "b.odt", [("Call ", None), ("now", "T1")])
    assert run("check_highlighted_words", still, gold) == 0.0
    other = odt(tmp_path / "c.odt", [("Call later", None)])
    assert run("check_highlighted_words", other, gold) == 0.0


def test_evaluate_strike_through_last_paragraph(tmp_path: Path) -> None:
    def strike(doc: Any) -> None:
        for r in doc.paragraphs[-1].runs:
            r.font.strike = True

    gold = document(tmp_path / "g.docx", ["a", "b"], strike)
    assert (
        run(
            "evaluate_strike_through_last_paragraph",
            document(tmp_path / "a.docx", ["a", "b"], strike),
            gold,
        )
        == 1.0
    )
    assert (
        run(
            "evaluate_strike_through_last_paragraph",
            document(tmp_path / "b.docx", ["a", "b"]),
            gold,
        )
        == 0.0
    )


def test_check_italic_font_size_14(tmp_path: Path) -> None:
    def italic(size: int) -> Callable[[Any], None]:
        def edit(doc: Any) -> None:
            r = doc.add_paragraph().add_run("note")
            r.italic, r.font.size = True, Pt(size)

        return edit

    gold = document(tmp_path / "g.docx", ["a"], italic(14))
    assert (
        run("check_italic_font_size_14", document(tmp_path / "a.docx", ["a"], italic(14)), gold)
        == 1.0
    )
    assert (
        run("check_italic_font_size_14", document(tmp_path / "b.docx", ["a"], italic(12)), gold)
        == 0.0
    )


def test_compare_docx_images(tmp_path: Path) -> None:
    from PIL import Image

    def picture(color: str) -> Callable[[Any], None]:
        def edit(doc: Any) -> None:
            png = tmp_path / f"{color}.png"
            Image.new("RGB", (4, 4), color).save(png)
            doc.add_picture(str(png))

        return edit

    gold = document(tmp_path / "g.docx", ["x"], picture("red"))
    assert (
        run("compare_docx_images", document(tmp_path / "a.docx", ["y"], picture("red")), gold)
        == 1.0
    )
    assert (
        run("compare_docx_images", document(tmp_path / "b.docx", ["x"], picture("blue")), gold)
        == 0.0
    )


def test_compare_docx_files_and_ignore_new_lines(tmp_path: Path) -> None:
    gold = document(tmp_path / "g.docx", ["a b", "c"])
    spaced = document(tmp_path / "a.docx", ["a b", "", "c", ""])
    assert run("compare_docx_files_and_ignore_new_lines", spaced, gold, ignore_blanks=False) == 1.0
    assert (
        run(
            "compare_docx_files_and_ignore_new_lines",
            document(tmp_path / "b.docx", ["a  b", "c"]),
            gold,
            ignore_blanks=False,
        )
        == 0.0
    )


def test_compare_references(tmp_path: Path) -> None:
    refs = ["Intro", "References", "Smith, J. (2020). A study.", "Doe, A. (2019). Another."]
    gold = document(tmp_path / "g.docx", refs)
    assert (
        run(
            "compare_references",
            document(tmp_path / "a.docx", refs),
            gold,
            reference_base_result=0.6,
        )
        == 1.0
    )
    bad = document(tmp_path / "b.docx", refs[:2] + ["Zzz", "Qqq"])
    assert run("compare_references", bad, gold, reference_base_result=0.6) == 0.0


def test_compare_unique_train_records(tmp_path: Path) -> None:
    original = ["08:00:01, T1, S1, 1", "08:05:00, T2, S1, 2", "08:10:00, T1, S2, 1"]
    orig = document(tmp_path / "o.docx", original)
    gold = document(tmp_path / "g.docx", original[:2])
    good = document(tmp_path / "a.docx", original[:2])
    assert run("compare_unique_train_records", good, [gold, orig]) == 1.0
    dup = document(tmp_path / "b.docx", original)
    assert run("compare_unique_train_records", dup, [gold, orig]) == 0.0


def xcu(path: Path, item: str, prop: str, value: str) -> str:
    path.write_text(
        '<?xml version="1.0"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">'
        f'<item oor:path="{item}"><prop oor:name="{prop}" oor:op="fuse">'
        f"<value>{value}</value></prop></item></oor:items>"
    )
    return str(path)


def test_libreoffice_config_checks(tmp_path: Path) -> None:
    font = "/org.openoffice.Office.Writer/DefaultFont"
    assert (
        run(
            "find_default_font",
            xcu(tmp_path / "a.xcu", font, "Standard", "Times New Roman"),
            {"font_name": "Times New Roman"},
        )
        == 1.0
    )
    assert (
        run(
            "find_default_font",
            xcu(tmp_path / "b.xcu", font, "Standard", "Arial"),
            {"font_name": "Times New Roman"},
        )
        == 0.0
    )
    start = "/org.openoffice.Office.Impress/Misc/Start"
    assert (
        run(
            "check_presenter_console_disable",
            xcu(tmp_path / "c.xcu", start, "EnablePresenterScreen", "false"),
        )
        == 1.0
    )
    assert (
        run(
            "check_presenter_console_disable",
            xcu(tmp_path / "d.xcu", start, "EnablePresenterScreen", "true"),
        )
        == 0.0
    )
    save = "/org.openoffice.Office.Common/Save/Document"
    assert (
        run(
            "check_auto_saving_time",
            xcu(tmp_path / "e.xcu", save, "AutoSaveTimeIntervall", "3"),
            {"minutes": 3},
        )
        == 1.0
    )
    assert (
        run(
            "check_auto_saving_time",
            xcu(tmp_path / "f.xcu", save, "AutoSaveTimeIntervall", "10"),
            {"minutes": 3},
        )
        == 0.0
    )
    assert run("check_auto_saving_time", None, {"minutes": 3}) == 0.0
