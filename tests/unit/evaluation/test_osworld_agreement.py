"""Inputs on which our metrics once disagreed with OSWorld's current evaluators
(issue 17); each test reproduces the case with a file or tree made here."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from tests_support.metrics import run, write_bytes

# -- check_accessibility_tree: the prefixes map to the namespaces our guest writes --------


def guest_tree() -> str:
    """A Thunderbird tree serialized the way vm/guest's atspi_dump does: its own
    namespace table, ElementTree with the prefixes registered."""
    namespaces = pytest.importorskip("cua_guest.atspi_dump", reason="vm/guest is not importable").NS

    def _q(prefix: str, name: str) -> str:
        return f"{{{namespaces[prefix]}}}{name}"

    for prefix, uri in namespaces.items():
        ET.register_namespace(prefix, uri)
    root = ET.Element("desktop-frame")
    app = ET.SubElement(root, "application", {"name": "Thunderbird"})
    tabs = ET.SubElement(app, "page-tab-list", {"name": "", _q("attr", "id"): "tabmail-tabs"})
    tab = ET.SubElement(
        tabs,
        "page-tab",
        {
            "name": "About Profiles",
            _q("st", "selected"): "true",
            _q("cp", "screencoord"): "(10, 40)",
        },
    )
    tab.text = "About Profiles"
    ET.SubElement(app, "push-button", {"name": "Close"})
    return ET.tostring(root, encoding="unicode")


def test_accessibility_prefixes_match_the_guest_namespaces() -> None:
    pytest.importorskip("cssselect")
    tree = guest_tree()
    # the selector of OSWorld's Thunderbird task 7b1e1ff9
    task = [
        {
            "selectors": [
                'application[name=Thunderbird] page-tab-list[attr|id="tabmail-tabs"]'
                '>page-tab[name="About Profiles"]'
            ]
        }
    ]
    assert run("check_accessibility_tree", tree, task) == 1.0
    assert (
        run(
            "check_accessibility_tree",
            tree,
            [{"xpath": "//page-tab[@st:selected='true'][@cp:screencoord='(10, 40)']"}],
        )
        == 1.0
    )
    assert (
        run("check_accessibility_tree", tree, [{"selectors": ['page-tab[attr|id="tabmail-tabs"]']}])
        == 0.0
    )
    # a tree in the namespaces of OSWorld's first release no longer matches
    old = tree.replace(
        "https://accessibility.ubuntu.example.org/ns/attributes",
        "uri:deskat:attributes.at-spi.gnome.org",
    )
    assert run("check_accessibility_tree", old, task) == 0.0


def test_accessibility_text_of_an_empty_node_is_the_empty_string() -> None:
    tree = guest_tree()
    empty = [{"xpath": "//push-button[@name='Close']", "text": ""}]
    assert run("check_accessibility_tree", tree, empty) == 1.0
    fuzzy = [{"xpath": "//page-tab", "text": "About Profile", "exact": False}]
    assert run("check_accessibility_tree", tree, fuzzy) == pytest.approx(26 / 27)
    with pytest.raises(ValueError, match="osname"):
        run("check_accessibility_tree", tree, empty, osname="beos")


# -- compare_pdf_images: imagehash's phash -------------------------------------------------


def pdf_with_image(path: Path, image: object) -> str:
    pymupdf = pytest.importorskip("pymupdf", reason="needs the eval extra")
    doc = pymupdf.open()
    page = doc.new_page()
    data = io.BytesIO()
    image.save(data, "PNG")  # type: ignore[attr-defined]
    page.insert_image(pymupdf.Rect(72, 100, 272, 300), stream=data.getvalue())
    doc.save(str(path))
    return str(path)


def test_compare_pdf_images_uses_imagehash(tmp_path: Path) -> None:
    pytest.importorskip("imagehash", reason="needs the eval extra")
    from PIL import Image, ImageDraw

    blue = pdf_with_image(tmp_path / "blue.pdf", Image.new("RGB", (64, 64), "blue"))
    green = pdf_with_image(tmp_path / "green.pdf", Image.new("RGB", (64, 64), "green"))
    assert run("compare_pdf_images", blue, green) == 1.0  # flat pages hash alike in OSWorld
    left = Image.linear_gradient("L").resize((64, 64))
    right = left.rotate(90)
    ImageDraw.Draw(left).ellipse((8, 8, 40, 30), fill=200)
    ImageDraw.Draw(right).ellipse((30, 20, 60, 60), fill=20)
    assert (
        run(
            "compare_pdf_images",
            pdf_with_image(tmp_path / "l.pdf", left),
            pdf_with_image(tmp_path / "l2.pdf", left.resize((128, 128))),
        )
        == 1.0
    )
    assert (
        run(
            "compare_pdf_images",
            pdf_with_image(tmp_path / "a.pdf", left),
            pdf_with_image(tmp_path / "b.pdf", right),
        )
        == 0.0
    )


# -- compare_epub: the mean of the per-part similarities -----------------------------------


def epub(path: Path, chapter: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("toc.ncx", "<ncx>\n<docTitle>Book</docTitle>\n</ncx>\n")
        z.writestr("content.opf", "<package>\n<dc:title>Book</dc:title>\n</package>\n")
        z.writestr("ch1.html", f"<html><body><p>{chapter}</p></body></html>")
    return str(path)


def test_compare_epub_averages_the_parts(tmp_path: Path) -> None:
    pytest.importorskip("lxml")
    gold = epub(tmp_path / "g" / "book.epub", "Once upon a time")
    other = epub(tmp_path / "r" / "book.epub", "Something else")
    # toc.ncx and content.opf equal (1 each), the one-line chapter differs (0): 2/3, not 0
    assert run("compare_epub", other, gold) == pytest.approx(2 / 3)


# -- compare_python_pure_text: OSWorld's line normalization --------------------------------


def test_compare_python_pure_text_keeps_indentation_and_inner_spaces(tmp_path: Path) -> None:
    gold = write_bytes(tmp_path, "gold.py", b"def f(x):\n    return x + 1\n")
    same = write_bytes(
        tmp_path,
        "same.py",
        b"#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\ndef f(x):   \n\n\treturn x + 1\n\n",
    )
    assert run("compare_python_pure_text", same, gold) == 1.0
    dedented = write_bytes(tmp_path, "dedent.py", b"def f(x):\n  return x + 1\n")
    assert run("compare_python_pure_text", dedented, gold) == 0.0
    squeezed = write_bytes(tmp_path, "squeezed.py", b"def f(x):\n    return x+1\n")
    assert run("compare_python_pure_text", squeezed, gold) == 0.0
    # a shebang after code is code; so is one after a blank first line
    late = write_bytes(
        tmp_path, "late.py", b"\n#!/usr/bin/env python3\ndef f(x):\n    return x + 1\n"
    )
    assert run("compare_python_pure_text", late, gold) == 0.0


# -- check_line_number: second 60 ----------------------------------------------------------


def test_check_line_number_accepts_a_leap_second(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, "t.txt", b"23:59:60 leap\n12:00:00 noon\n24:00:00 no\n")
    assert run("check_line_number", path, {"expected": 2}) == 1.0


# -- check_csv: a quoted field may hold a newline ------------------------------------------


def test_check_csv_keeps_a_quoted_newline(tmp_path: Path) -> None:
    path = write_bytes(
        tmp_path, "c.csv", b'name,address\r\nann,"1 Main St\r\nSpringfield"\r\nbob,2 Elm St\r\n'
    )
    assert (
        run("check_csv", path, {"expect": [{"name": "ann", "address": "1 Main St\nSpringfield"}]})
        == 1.0
    )
    assert (
        run(
            "check_csv", path, {"expect": [{"name": "bob"}], "unexpect": [{"name": 'Springfield"'}]}
        )
        == 1.0
    )


# -- compare_csv / compare_table sheet_print: UTF-8, else Latin-1 --------------------------


def test_compare_csv_falls_back_to_latin1(tmp_path: Path) -> None:
    cafe_utf8 = write_bytes(tmp_path, "u.csv", "name\ncafé\n".encode())
    cafe_latin1 = write_bytes(tmp_path, "l1.csv", "name\ncafé\n".encode("latin-1"))
    cafe_grave = write_bytes(tmp_path, "l2.csv", "name\ncafè\n".encode("latin-1"))
    assert run("compare_csv", cafe_latin1, cafe_grave) == 0.0  # was 1 with U+FFFD stand-ins
    assert run("compare_csv", cafe_latin1, cafe_utf8) == 1.0


def test_sheet_print_falls_back_to_latin1(tmp_path: Path) -> None:
    openpyxl = pytest.importorskip("openpyxl", reason="needs the eval extra")
    pytest.importorskip("pandas", reason="needs the eval extra")
    for name in ("got", "gold"):
        wb = openpyxl.Workbook()
        wb.active.title = "Sheet1"
        wb.save(tmp_path / f"{name}.xlsx")
    rules = [{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}]
    got, gold = str(tmp_path / "got.xlsx"), str(tmp_path / "gold.xlsx")
    (tmp_path / "got-Sheet1.csv").write_bytes("a\ncafé\n".encode("latin-1"))
    (tmp_path / "gold-Sheet1.csv").write_bytes("a\ncafè\n".encode("latin-1"))
    assert run("compare_table", got, gold, rules=rules) == 0.0
    (tmp_path / "gold-Sheet1.csv").write_bytes("a\ncafé\n".encode())
    assert run("compare_table", got, gold, rules=rules) == 1.0


# -- check_list: the lines Python's file iteration yields ----------------------------------


def test_check_list_iterates_file_lines(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, "l.txt", b"alpha\x0cbeta\r\ngamma\n")
    # a form feed does not end a line when a file is iterated (str.splitlines splits there)
    assert run("check_list", path, {"expect": [r"^beta"]}) == 0.0
    assert run("check_list", path, {"expect": [r"alpha\x0cbeta"]}) == 1.0
    # each line keeps its newline (\r\n read as \n), so a pattern may end with it
    assert run("check_list", path, {"expect": [r"beta\n", r"gamma\n"]}) == 1.0


# -- check_direct_json_object: ignore_list_order sits beside `expected` --------------------


def test_ignore_list_order_beside_expected() -> None:
    # the rule of OSWorld's Chrome task f5d96daf (models compared in any order)
    rules = {
        "expected": {"modelList": ["iphone-15-pro-max", "iphone-14-pro-max"]},
        "ignore_list_order": True,
    }
    got = {"modelList": ["iphone-14-pro-max", "iphone-15-pro-max"]}
    assert run("check_direct_json_object", got, rules) == 1.0
    assert run("check_direct_json_object", {"modelList": ["iphone-14-pro-max"]}, rules) == 0.0


# -- issue 31: hard disagreements fixed to OSWorld's behaviour ------------------------------


def test_compare_text_file_reads_line_endings_as_text_mode(tmp_path: Path) -> None:
    lf = write_bytes(tmp_path, "lf.txt", b"line one\nline two\n")
    crlf = write_bytes(tmp_path, "crlf.txt", b"line one\r\nline two\r\n")
    cr = write_bytes(tmp_path, "cr.txt", b"line one\rline two\r")
    assert run("compare_text_file", crlf, lf) == 1.0
    assert run("compare_text_file", cr, lf) == 1.0
    other = write_bytes(tmp_path, "other.txt", b"line one\r\nline 2\r\n")
    assert run("compare_text_file", other, lf) == 0.0


def test_compare_image_list_pairs_to_the_shorter_list_and_converts_modes(tmp_path: Path) -> None:
    from PIL import Image

    def png(name: str, image: Image.Image) -> str:
        image.save(tmp_path / name)
        return str(tmp_path / name)

    picture = Image.new("RGB", (16, 12), (200, 40, 10))
    picture.paste((0, 90, 250), (4, 4, 10, 9))
    rgb = png("rgb.png", picture)
    opaque_rgba = png("rgba.png", picture.convert("RGBA"))
    other = png("other.png", Image.new("RGB", (16, 12), "white"))
    assert run("compare_image_list", [rgb], [rgb, other]) == 1.0  # zip stops at the shorter
    assert run("compare_image_list", [other, rgb], [rgb]) == 0.0
    assert run("compare_image_list", opaque_rgba, rgb) == 1.0  # GIMP's RGBA export
    see_through = picture.convert("RGBA")
    see_through.putalpha(128)
    half = png("half.png", see_through)
    assert run("compare_image_list", half, rgb) == 1.0  # the result takes the gold's mode
    assert run("compare_image_list", rgb, half) == 0.0  # opaque against half-transparent
    big = png("big.png", Image.new("RGB", (32, 24), "white"))
    assert run("compare_image_list", big, other) == 1.0  # resized to the gold's size first
    assert run("compare_image_list", big, rgb) == 0.0
    assert run("compare_image_list", write_bytes(tmp_path, "x.png", b"not a png"), rgb) == 0.0


def test_expect_in_result_string_is_found_in_a_list() -> None:
    rules = {"expect_in_result": True, "expected": {"k": "ab"}}
    assert run("check_direct_json_object", {"k": ["ab"]}, rules) == 1.0
    assert run("check_direct_json_object", {"k": ["abc"]}, rules) == 0.0
    assert run("check_direct_json_object", {"k": "xaby"}, rules) == 1.0
    assert run("check_direct_json_object", {"k": None}, rules) == 0.0


def test_thunderbird_prefs_value_that_is_not_json_scores_zero(tmp_path: Path) -> None:
    """OSWorld's json.loads raises on a single-quoted value; we score the file 0."""
    rule = {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}}
    good = write_bytes(
        tmp_path,
        "good.js",
        b'user_pref("mail.identity.id1.auto_quote", false);\nuser_pref("mail.theme", "dark");\n',
    )
    assert run("check_thunderbird_prefs", good, rule) == 1.0
    odd = write_bytes(
        tmp_path,
        "odd.js",
        b'user_pref("mail.identity.id1.auto_quote", false);\nuser_pref("mail.theme", \'dark\');\n',
    )
    assert run("check_thunderbird_prefs", odd, rule) == 0.0


def test_thunderbird_filter_field_before_any_name_scores_zero(tmp_path: Path) -> None:
    """OSWorld has no filter to put an `enabled=` line in before the first `name=`
    and raises; Thunderbird never writes such a file, so it scores 0."""
    body = (
        b'name="Spam"\nenabled="yes"\ntype="17"\naction="Move to folder"\n'
        b'actionValue="mailbox://nobody@Local%20Folders/Junk"\n'
        b'condition="AND (subject,contains,spam)"\n'
    )
    rules = {"expect": [{"name": "Spam", "enabled": "yes"}]}
    good = write_bytes(tmp_path, "good.dat", b'version="9"\nlogging="no"\n' + body)
    assert run("check_thunderbird_filter", good, rules) == 1.0
    early = write_bytes(tmp_path, "early.dat", b'version="9"\nenabled="no"\n' + body)
    assert run("check_thunderbird_filter", early, rules) == 0.0


def test_lenient_height_option_checks_nothing(tmp_path: Path) -> None:
    """OSWorld's public compare_pptx_files never reads examine_shape_lenient_height:
    with task 04578141's options a moved text box still passes."""
    pptx = pytest.importorskip("pptx", reason="needs the eval extra")
    from pptx.util import Emu

    def deck(name: str, top: int) -> str:
        prs = pptx.Presentation()
        slide = prs.slides.add_slide(prs.slide_layouts[6])
        box = slide.shapes.add_textbox(Emu(500000), Emu(top), Emu(3000000), Emu(600000))
        box.text_frame.text = "red"
        prs.save(tmp_path / name)
        return str(tmp_path / name)

    options = {
        "examine_run_count": False,
        "examine_shape": False,
        "examine_background_color": False,
        "examine_shape_lenient_height": True,
    }
    gold, moved = deck("gold.pptx", 500000), deck("moved.pptx", 2500000)
    assert run("compare_pptx_files", moved, gold, **options) == 1.0
    assert run("compare_pptx_files", moved, gold) == 0.0
