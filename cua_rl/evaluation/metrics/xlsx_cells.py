"""Reading single xlsx cells and styles the way OSWorld's table rules see them.

OSWorld reads a cell's *stored* value straight from the sheet XML (the cached
result of a formula, numbers as floats, dates as serial numbers) rather than
through openpyxl, which would turn dates into datetimes and formulas into
their text. Rules such as `{"method": "approx:0.1", "ref": 42}` were written
against those raw values, so we read them the same way (stdlib XML only).
"""

from __future__ import annotations

import posixpath
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_PKG_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"


def _sheet_xml_path(z: zipfile.ZipFile, sheet_name: str) -> str | None:
    workbook = ElementTree.fromstring(z.read("xl/workbook.xml"))
    rel_id = None
    for sheet in workbook.iter(f"{_MAIN}sheet"):
        if sheet.get("name") == sheet_name:
            rel_id = sheet.get(f"{_REL}id")
            break
    else:
        return None
    rels = ElementTree.fromstring(z.read("xl/_rels/workbook.xml.rels"))
    for rel in rels.iter(f"{_PKG_REL}Relationship"):
        if rel.get("Id") == rel_id:
            target = rel.get("Target", "")
            if target.startswith("/"):
                return target.lstrip("/")
            return posixpath.normpath(posixpath.join("xl", target))
    return None


def _shared_strings(z: zipfile.ZipFile) -> list[str]:
    try:
        root = ElementTree.fromstring(z.read("xl/sharedStrings.xml"))
    except KeyError:
        return []
    return ["".join(t.text or "" for t in si.iter(f"{_MAIN}t")) for si in root.iter(f"{_MAIN}si")]


def sheet_xml(xlsx: str | Path | None, sheet_name: str) -> bytes | None:
    """The raw XML of one worksheet, or None when the book or sheet is missing."""
    if not xlsx:
        return None
    with zipfile.ZipFile(xlsx) as z:
        path = _sheet_xml_path(z, sheet_name)
        return z.read(path) if path is not None and path in z.namelist() else None


def read_cell_value(xlsx: str | Path, sheet_name: str, coordinate: str) -> Any:
    """The stored value of one cell: float for numbers, str for text and errors,
    bool for booleans, None for an empty or missing cell (or an unreadable file)."""
    try:
        with zipfile.ZipFile(xlsx) as z:
            path = _sheet_xml_path(z, sheet_name)
            if path is None:
                return None
            sheet = ElementTree.fromstring(z.read(path))
            cell = next((c for c in sheet.iter(f"{_MAIN}c") if c.get("r") == coordinate), None)
            if cell is None:
                return None
            kind = cell.get("t", "n")
            v = cell.find(f"{_MAIN}v")
            text = v.text if v is not None else None
            if kind == "inlineStr":  # the text even with xml:space (OSWorld: a dict)
                return "".join(t.text or "" for t in cell.iter(f"{_MAIN}t"))
            if text is None:
                return None
            if kind == "n":
                return float(text)
            if kind == "s":
                return _shared_strings(z)[int(text)]
            if kind == "b":
                return text.strip() == "1"
            return text  # "str" (formula string result), "e" (error such as #DIV/0!)
    except (OSError, zipfile.BadZipFile, KeyError, ValueError, IndexError, ElementTree.ParseError):
        return None


def read_cell_style(prop: str, cell: Any, diff_style: Any = None) -> Any:
    """One style property of an openpyxl cell, with OSWorld's conventions
    (font properties of an empty cell are None; colors as aRGB strings).

    `diff_style` is the differential style (dxf) of a conditional-formatting
    rule that applies to the cell: its font/fill are read instead of the cell's.
    A solid cell fill keeps its color in fgColor while a dxf fill keeps it in
    bgColor, so `bgcolor` and `fgcolor` both read "the fill color" that way.
    Where OSWorld differs (docs/evaluation-deviations.md): a font without a
    colour reads None (OSWorld raises), and `hyperlink` is the link's target
    URL (OSWorld returns openpyxl's Hyperlink object).
    """
    merged_cell = type(cell).__name__ == "MergedCell"
    if prop == "merge":
        return merged_cell
    has_value = cell.value is not None
    source = diff_style if diff_style is not None else cell
    if prop == "number_format":
        if not has_value or cell.data_type != "n":
            return None
        if diff_style is not None:
            return diff_style.numFmt.formatCode if diff_style.numFmt is not None else None
        return cell.number_format
    font_props = {
        "font_name": "name",
        "font_family": "family",
        "font_bold": "b",
        "font_italic": "i",
        "font_underline": "u",
        "font_size": "sz",
    }
    if prop in font_props:
        font = source.font
        return getattr(font, font_props[prop]) if has_value and font is not None else None
    if prop == "font_color":
        font = source.font
        color = font.color if font is not None else None
        return color.rgb if has_value and color is not None else None
    if prop == "fill_type":
        return source.fill.tagname if source.fill is not None else None
    if prop in ("bgcolor", "fgcolor"):
        fill = source.fill
        if fill is None:
            return None
        color = fill.bgColor if diff_style is not None else fill.fgColor
        return color.rgb if color is not None else None
    if prop == "hyperlink":
        if not has_value:
            return None
        return (cell.hyperlink.target or "") if cell.hyperlink else ""
    raise ValueError(f"unknown cell property {prop!r}")


CELL_PROPS = frozenset(
    {
        "value",
        "merge",
        "number_format",
        "font_name",
        "font_family",
        "font_bold",
        "font_italic",
        "font_underline",
        "font_size",
        "font_color",
        "fill_type",
        "bgcolor",
        "fgcolor",
        "hyperlink",
    }
)
