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
    namespaces = pytest.importorskip("cua_guest.atspi_dump",
                                     reason="vm/guest is not importable").NS

    def _q(prefix: str, name: str) -> str:
        return f"{{{namespaces[prefix]}}}{name}"

    for prefix, uri in namespaces.items():
        ET.register_namespace(prefix, uri)
    root = ET.Element("desktop-frame")
    app = ET.SubElement(root, "application", {"name": "Thunderbird"})
    tabs = ET.SubElement(app, "page-tab-list", {"name": "", _q("attr", "id"): "tabmail-tabs"})
    tab = ET.SubElement(tabs, "page-tab", {"name": "About Profiles", _q("st", "selected"): "true",
                                           _q("cp", "screencoord"): "(10, 40)"})
    tab.text = "About Profiles"
    ET.SubElement(app, "push-button", {"name": "Close"})
    return ET.tostring(root, encoding="unicode")


def test_accessibility_prefixes_match_the_guest_namespaces() -> None:
    pytest.importorskip("cssselect")
    tree = guest_tree()
    # the selector of OSWorld's Thunderbird task 7b1e1ff9
    task = [{"selectors": ['application[name=Thunderbird] page-tab-list[attr|id="tabmail-tabs"]'
                           '>page-tab[name="About Profiles"]']}]
    assert run("check_accessibility_tree", tree, task) == 1.0
    assert run("check_accessibility_tree", tree,
               [{"xpath": "//page-tab[@st:selected='true'][@cp:screencoord='(10, 40)']"}]) == 1.0
    assert run("check_accessibility_tree", tree,
               [{"selectors": ['page-tab[attr|id="tabmail-tabs"]']}]) == 0.0
    # a tree in the namespaces of OSWorld's first release no longer matches
    old = tree.replace("https://accessibility.ubuntu.example.org/ns/attributes",
                       "uri:deskat:attributes.at-spi.gnome.org")
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
    assert run("compare_pdf_images", pdf_with_image(tmp_path / "l.pdf", left),
               pdf_with_image(tmp_path / "l2.pdf", left.resize((128, 128)))) == 1.0
    assert run("compare_pdf_images", pdf_with_image(tmp_path / "a.pdf", left),
               pdf_with_image(tmp_path / "b.pdf", right)) == 0.0


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
    same = write_bytes(tmp_path, "same.py", b"#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n"
                                            b"def f(x):   \n\n\treturn x + 1\n\n")
    assert run("compare_python_pure_text", same, gold) == 1.0
    dedented = write_bytes(tmp_path, "dedent.py", b"def f(x):\n  return x + 1\n")
    assert run("compare_python_pure_text", dedented, gold) == 0.0
    squeezed = write_bytes(tmp_path, "squeezed.py", b"def f(x):\n    return x+1\n")
    assert run("compare_python_pure_text", squeezed, gold) == 0.0
    # a shebang after code is code; so is one after a blank first line
    late = write_bytes(tmp_path, "late.py", b"\n#!/usr/bin/env python3\ndef f(x):\n"
                                            b"    return x + 1\n")
    assert run("compare_python_pure_text", late, gold) == 0.0


# -- check_line_number: second 60 ----------------------------------------------------------


def test_check_line_number_accepts_a_leap_second(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, "t.txt", b"23:59:60 leap\n12:00:00 noon\n24:00:00 no\n")
    assert run("check_line_number", path, {"expected": 2}) == 1.0


# -- check_csv: a quoted field may hold a newline ------------------------------------------


def test_check_csv_keeps_a_quoted_newline(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, "c.csv", b'name,address\r\nann,"1 Main St\r\nSpringfield"\r\n'
                                          b"bob,2 Elm St\r\n")
    assert run("check_csv", path, {"expect": [{"name": "ann",
                                               "address": "1 Main St\nSpringfield"}]}) == 1.0
    assert run("check_csv", path, {"expect": [{"name": "bob"}],
                                   "unexpect": [{"name": "Springfield\""}]}) == 1.0


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
    rules = {"expected": {"modelList": ["iphone-15-pro-max", "iphone-14-pro-max"]},
             "ignore_list_order": True}
    got = {"modelList": ["iphone-14-pro-max", "iphone-15-pro-max"]}
    assert run("check_direct_json_object", got, rules) == 1.0
    assert run("check_direct_json_object", {"modelList": ["iphone-14-pro-max"]}, rules) == 0.0
