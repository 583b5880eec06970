"""Checks on LibreOffice's user profile `registrymodifications.xcu` (OSWorld's
`find_default_font`, `check_presenter_console_disable`, `check_auto_saving_time`).

Each reads one `<item oor:path=...><prop oor:name=...><value>` setting; a
missing or unparsable file, or a setting never changed from the default
(so absent from the file), scores 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from cua_rl.evaluation.registry import metric

_OOR = "{http://openoffice.org/2001/registry}"


def xcu_values(path: Any, item_path: str, prop_name: str) -> list[str | None]:
    """Every value of `prop_name` under items at `item_path`, in file order."""
    if not path or not Path(path).is_file():
        return []
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError:
        return []
    values = []
    for item in root.iter("item"):
        if item.get(f"{_OOR}path") != item_path:
            continue
        for prop in item.iter("prop"):
            if prop.get(f"{_OOR}name") == prop_name:
                value = prop.find("value")
                values.append(value.text if value is not None else None)
    return values


@metric("find_default_font")
def find_default_font(result: Any, rules: Mapping[str, Any]) -> float:
    """Writer's default (Standard) font is `rules.font_name` (the last setting wins)."""
    values = xcu_values(result, "/org.openoffice.Office.Writer/DefaultFont", "Standard")
    return float(bool(values) and values[-1] == rules["font_name"])


@metric("check_presenter_console_disable")
def check_presenter_console_disable(result: Any) -> float:
    """Impress's presenter screen is switched off (the first setting decides)."""
    values = xcu_values(
        result, "/org.openoffice.Office.Impress/Misc/Start", "EnablePresenterScreen"
    )
    return float(bool(values) and (values[0] or "").lower() == "false")


@metric("check_auto_saving_time")
def check_auto_saving_time(result: Any, rules: Mapping[str, Any]) -> float:
    """The AutoRecovery interval is `rules.minutes` (the last setting wins)."""
    values = xcu_values(
        result, "/org.openoffice.Office.Common/Save/Document", "AutoSaveTimeIntervall"
    )
    if not values:
        return 0.0
    try:
        return float(int(values[-1] or "") == rules["minutes"])
    except ValueError:
        return 0.0
