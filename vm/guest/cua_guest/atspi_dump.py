"""Dump the AT-SPI accessibility tree as OSWorld's XML (standalone script).

Run as `python atspi_dump.py tree|terminal` by whichever interpreter has pyatspi
(the guest's own, or the system /usr/bin/python3 with python3-pyatspi); prints
one JSON object. It imports only pyatspi and the standard library because the
system interpreter does not have cua_guest installed.

The XML matches OSWorld's guest: element names are role names, attributes in the
st/attr/cp/txt/val/act namespaces, text as element text, and for LibreOffice
Calc tables only the cells showing on screen.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from typing import Any

_NS_BASE = "https://accessibility.ubuntu.example.org/ns/"
NS = {
    "st": _NS_BASE + "state",
    "attr": _NS_BASE + "attributes",
    "cp": _NS_BASE + "component",
    "doc": _NS_BASE + "document",
    "docattr": _NS_BASE + "document/attributes",
    "txt": _NS_BASE + "text",
    "val": _NS_BASE + "value",
    "act": _NS_BASE + "action",
}
MAX_DEPTH = 50
MAX_WIDTH = 1024
CALC_SCAN = 500  # how far to look for the first visible cell of a spreadsheet


def _q(prefix: str, name: str) -> str:
    return f"{{{NS[prefix]}}}{name}"


def _attributes(node: Any, pyatspi: Any) -> tuple[dict[str, str], str]:
    """OSWorld's attribute dict and the element text for one accessible."""
    attrs: dict[str, str] = {"name": node.name or ""}
    for state in node.getState().get_states():
        state_name = pyatspi.StateType._enum_lookup[state].split("_", 1)[1].lower()
        if state_name:
            attrs[_q("st", state_name)] = "true"
    for key, value in (node.get_attributes() or {}).items():
        if key:
            attrs[_q("attr", key)] = str(value)
    if attrs.get(_q("st", "visible")) == "true" and attrs.get(_q("st", "showing")) == "true":
        try:
            x, y, w, h = node.queryComponent().getExtents(pyatspi.XY_SCREEN)[:4]
            attrs[_q("cp", "screencoord")] = str((x, y))
            attrs[_q("cp", "size")] = str((w, h))
        except NotImplementedError:
            pass
    text = ""
    try:
        text_obj = node.queryText()
        text = text_obj.getText(0, text_obj.characterCount).replace("\ufffc", "")
        text = text.replace("\ufffd", "")
    except NotImplementedError:
        pass
    for flag, query in (("image", "queryImage"), ("selection", "querySelection")):
        try:
            getattr(node, query)()
            attrs[flag] = "true"
        except NotImplementedError:
            pass
    try:
        value = node.queryValue()
        for key, attr in (
            ("value", "currentValue"),
            ("min", "minimumValue"),
            ("max", "maximumValue"),
            ("step", "minimumIncrement"),
        ):
            try:
                attrs[_q("val", key)] = str(getattr(value, attr))
            except Exception:  # noqa: BLE001 - some toolkits raise on unset values
                pass
    except NotImplementedError:
        pass
    try:
        action = node.queryAction()
        for i in range(action.nActions):
            name = action.getName(i).replace(" ", "-")
            attrs[_q("act", name + "_desc")] = action.getDescription(i)
            attrs[_q("act", name + "_kb")] = action.getKeyBinding(i)
    except NotImplementedError:
        pass
    return attrs, text


def _element(node: Any, depth: int, flag: str | None, pyatspi: Any) -> ET.Element:
    attrs, text = _attributes(node, pyatspi)
    raw_role = node.getRoleName().strip()
    role = (raw_role or "unknown").replace(" ", "-")
    if not flag and raw_role == "document spreadsheet":
        flag = "calc"
    element = ET.Element(role, attrs)
    if text:
        element.text = text
    if depth >= MAX_DEPTH:
        return element
    if flag == "calc" and role == "table":
        _append_calc_cells(element, node, depth, pyatspi)
        return element
    try:
        for i, child in enumerate(node):
            if i == MAX_WIDTH:
                break
            element.append(_element(child, depth + 1, flag, pyatspi))
    except Exception:  # noqa: BLE001 - apps vanish mid-walk; keep what we have
        pass
    return element


def _append_calc_cells(element: ET.Element, node: Any, depth: int, pyatspi: Any) -> None:
    """Only the visible block of a spreadsheet (it has ~10^10 cells)."""
    table = node.queryTable()
    rows, cols = table.nRows, table.nColumns

    def showing(r: int, c: int) -> Any:
        cell = table.getAccessibleAt(r, c)
        return (
            cell if cell is not None and cell.getState().contains(pyatspi.STATE_SHOWING) else None
        )

    start = next(
        (
            (r, c)
            for r in range(min(rows, CALC_SCAN))
            for c in range(min(cols, CALC_SCAN))
            if showing(r, c) is not None
        ),
        None,
    )
    if start is None:
        return
    for r in range(start[0], rows):
        row_cells = []
        for c in range(start[1], cols):
            cell = showing(r, c)
            if cell is None:
                break
            row_cells.append(cell)
        if not row_cells:
            break
        for cell in row_cells:
            element.append(_element(cell, depth + 1, "calc", pyatspi))


def dump_tree(pyatspi: Any) -> str:
    for prefix, uri in NS.items():
        ET.register_namespace(prefix, uri)
    desktop = pyatspi.Registry.getDesktop(0)
    root = ET.Element("desktop-frame")
    for app in desktop:
        root.append(_element(app, 1, None, pyatspi))
    return ET.tostring(root, encoding="unicode")


def terminal_text(pyatspi: Any) -> str | None:
    """Text of the focused terminal in the active gnome-terminal window, if any."""
    desktop = pyatspi.Registry.getDesktop(0)
    for app in desktop:
        if app.getRoleName() != "application" or app.name != "gnome-terminal-server":
            continue
        for frame in app:
            if frame.getRoleName() == "frame" and frame.getState().contains(pyatspi.STATE_ACTIVE):
                found = pyatspi.findAllDescendants(
                    frame,
                    lambda n: (
                        n.getRoleName() == "terminal"
                        and n.getState().contains(pyatspi.STATE_FOCUSED)
                    ),
                )
                if len(found) == 1:
                    text = found[0].queryText()
                    return text.getText(0, text.characterCount).rstrip()
    return None


def main() -> None:
    import pyatspi

    mode = sys.argv[1] if len(sys.argv) > 1 else "tree"
    if mode == "terminal":
        print(json.dumps({"output": terminal_text(pyatspi)}))
    else:
        print(json.dumps({"AT": dump_tree(pyatspi)}))


if __name__ == "__main__":
    main()
