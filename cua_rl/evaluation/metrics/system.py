"""Metrics on desktop/OS state read by getters (command output, directory trees,
the accessibility tree, SQLite databases), following OSWorld's
`metrics/basic_os.py` and `metrics/general.py`.

A None result (a refused command, a missing file) scores 0 where OSWorld would
raise on it.
"""

from __future__ import annotations

import ast
import logging
import operator
import re
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.metrics.files import file_lines, read_text
from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)


@metric("check_gnome_favorite_apps")
def check_gnome_favorite_apps(apps_str: str | None, rule: Mapping[str, Any]) -> float:
    """The dock's favourites (gsettings' `['a.desktop', ...]`) are exactly
    `rule.expected`, in any order."""
    try:
        apps = ast.literal_eval((apps_str or "").strip())
    except (ValueError, SyntaxError):  # e.g. gsettings' "@as []" or no output
        return 0.0
    expected = rule["expected"]
    if not isinstance(apps, list | tuple) or len(apps) != len(expected):
        return 0.0
    return float(set(apps) == set(expected))


@metric("is_utc_0")
def is_utc_0(timedatectl_output: str | None) -> float:
    """`timedatectl status`'s fourth line (Time zone) ends with "+0000)"."""
    lines = (timedatectl_output or "").split("\n")
    return float(len(lines) > 3 and lines[3].endswith("+0000)"))


@metric("check_moved_jpgs")
def check_moved_jpgs(directory_list: Any, rule: Mapping[str, Any]) -> float:
    """The folder's entries (a `list_directory` tree) are exactly `rule.expected`."""
    if not isinstance(directory_list, Mapping) or "children" not in directory_list:
        return 0.0
    names = [node["name"] for node in directory_list["children"]]
    expected = rule["expected"]
    return float(len(names) == len(expected) and set(names) == set(expected))


@metric("is_in_vm_clickboard")
def is_in_vm_clickboard(config: Mapping[str, Any], terminal_output: str | None) -> float:
    """The clipboard text contains `config.expected` (a string, or every string of a list).

    The rule is the first argument: the task puts the `rule` getter in `result`
    and the clipboard command in `expected`.
    """
    if terminal_output is None:
        return 0.0
    expected = config["expected"]
    if isinstance(expected, list):
        return float(all(item in terminal_output for item in expected))
    return float(expected in terminal_output)


_TIME = re.compile(r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)")  # 60: a leap second


@metric("check_line_number")
def check_line_number(file_path: str | Path | None, line_number: Mapping[str, Any]) -> float:
    """The number of lines holding an HH:MM:SS time equals `line_number.expected`
    (a file that is not UTF-8 scores 0, as OSWorld's guarded `open()` does)."""
    text = read_text(file_path) if file_path else None
    if text is None:
        return 0.0
    count = sum(1 for line in file_lines(text) if _TIME.search(line))
    return float(count == int(line_number["expected"]))


@metric("run_sqlite3")
def run_sqlite3(result: str | Path | None, rules: Mapping[str, Any]) -> float:
    """First column of the first row of `rules.sql` on the database (NULL -> 0)."""
    if not result or not Path(result).is_file():
        return 0.0
    connection = sqlite3.connect(str(result))  # our copy of the profile's database
    try:
        row = connection.execute(rules["sql"]).fetchone()
    except sqlite3.DatabaseError as exc:  # not a database, or a table the app never created
        log.info("run_sqlite3: %s", exc)
        return 0.0
    finally:
        connection.close()
    return float((row[0] if row else 0) or 0)


_AT_NS_BASE = {
    "ubuntu": "https://accessibility.ubuntu.example.org/ns/",
    "windows": "https://accessibility.windows.example.org/ns/",
    "macos": "https://accessibility.macos.example.org/ns/",
}
_AT_SUFFIXES = {
    "st": "state",
    "attr": "attributes",
    "cp": "component",
    "doc": "document",
    "docattr": "document/attributes",
    "txt": "text",
    "val": "value",
    "act": "action",
}


def at_namespaces(osname: str = "ubuntu") -> dict[str, str]:
    """The selector prefixes (`st|`, `attr|`, ...) mapped to the namespaces the
    guest's accessibility dump writes for `osname` (OSWorld's current servers and
    our vm/guest write the same ones)."""
    if osname not in _AT_NS_BASE:
        raise ValueError(
            f"check_accessibility_tree: osname {osname!r} is not one of {sorted(_AT_NS_BASE)}"
        )
    base = _AT_NS_BASE[osname]
    return {prefix: base + suffix for prefix, suffix in _AT_SUFFIXES.items()}


@metric("check_accessibility_tree")
def check_accessibility_tree(
    result: str | None, rules: list[Mapping[str, Any]], osname: str = "ubuntu"
) -> float:
    """Every rule selects at least one node of the accessibility tree XML.

    A rule has `xpath`, or `selectors` (CSS, joined with ", "; namespace prefixes
    such as `attr|id` as in `at_namespaces`); with `text`, the score is
    multiplied by the best match of a selected node's text (a node without text
    counts as ""): equality when `exact` (default true), else the rapidfuzz ratio.
    """
    etree = require("lxml.etree", "lxml", metric="check_accessibility_tree")
    namespaces = at_namespaces(osname)
    if not result:
        return 0.0
    try:
        root = etree.fromstring(result.encode() if isinstance(result, str) else result)
    except etree.XMLSyntaxError as exc:
        log.info("check_accessibility_tree: tree does not parse: %s", exc)
        return 0.0
    total = 1.0
    for rule in rules:
        if "xpath" in rule:
            nodes = root.xpath(rule["xpath"], namespaces=namespaces)
        elif "selectors" in rule:
            cssselect = require("lxml.cssselect", "cssselect", metric="check_accessibility_tree")
            selector = cssselect.CSSSelector(", ".join(rule["selectors"]), namespaces=namespaces)
            nodes = selector(root)
        else:
            raise ValueError("check_accessibility_tree: a rule needs 'xpath' or 'selectors'")
        if not nodes:
            return 0.0
        if "text" in rule:
            total *= max(_text_score(rule, node.text or "") for node in nodes)
    return float(total)


def _text_score(rule: Mapping[str, Any], text: str) -> float:
    if rule.get("exact", True):
        return float(operator.eq(rule["text"], text))
    fuzz = require("rapidfuzz.fuzz", "rapidfuzz", metric="check_accessibility_tree")
    return fuzz.ratio(rule["text"], text) / 100.0
