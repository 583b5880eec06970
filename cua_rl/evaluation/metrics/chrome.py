"""Chrome metrics (OSWorld `desktop_env/evaluators/metrics/chrome.py`): bookmarks,
history, cookies, settings, extensions, desktop shortcuts, page contents (URL
metrics are in `urls.py`).

Rule types OSWorld does not know raise TypeError there; here they raise
ValueError naming the metric and the type, so a task file with a typo fails
loudly instead of scoring 0.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from typing import Any

from cua_rl.chrome.urls import compare_urls
from cua_rl.eval_libraries import require
from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)


def _unsupported(name: str, rule: Mapping[str, Any]) -> ValueError:
    return ValueError(f"{name}: rule type {rule.get('type')!r} is not supported")


def _bar_children(bookmarks: Any) -> list[dict[str, Any]]:
    return list(bookmarks["bookmark_bar"]["children"])


@metric("is_expected_bookmarks")
def is_expected_bookmarks(bookmarks: Any, rule: Mapping[str, Any]) -> float:
    """Rule types: `bookmark_bar_folders_names` / `bookmark_bar_websites_urls` (the
    bookmark bar's folders / links equal the given set) and
    `liked_authors_websites_urls` (the "Liked Authors" folder's links equal one
    choice per entry of `urls`, an entry being a URL or a list of accepted URLs)."""
    if not bookmarks:
        return 0.0
    kind = rule["type"]
    if kind == "bookmark_bar_folders_names":
        names = {b["name"] for b in _bar_children(bookmarks) if b["type"] == "folder"}
        return float(names == set(rule["names"]))
    if kind == "bookmark_bar_websites_urls":
        urls = {b["url"] for b in _bar_children(bookmarks) if b["type"] == "url"}
        return float(urls == set(rule["urls"]))
    if kind == "liked_authors_websites_urls":
        folder = next(
            (
                b
                for b in _bar_children(bookmarks)
                if b["type"] == "folder" and b["name"] == "Liked Authors"
            ),
            None,
        )
        if folder is None:
            return 0.0
        liked = {b["url"] for b in folder["children"] if b["type"] == "url"}
        choices = [[u] if isinstance(u, str) else list(u) for u in rule["urls"]]
        return float(any(set(combo) == liked for combo in itertools.product(*choices)))
    raise _unsupported("is_expected_bookmarks", rule)


@metric("is_added_to_steam_cart")
def is_added_to_steam_cart(active_tab_info: Any, rule: Mapping[str, Any]) -> float:
    """1 when every item name of `rule.items` appears in the cart page's HTML."""
    content = active_tab_info["content"]
    return float(all(item in content for item in rule["items"]))


def _entries(content: str, key: str) -> list[str]:
    return [line[len(key) + 1 :] for line in content.split("\n") if line.startswith(key + "=")]


@metric("is_shortcut_on_desktop")
def is_shortcut_on_desktop(shortcuts: Mapping[str, str], rule: Mapping[str, Any]) -> float:
    """1 when a desktop entry's `Name=` (rule type `name`) or `Exec=` (type `exec`)
    equals the expected value or one contains the other (case-insensitively for names)."""
    kind = rule["type"]
    if kind not in ("name", "exec"):
        raise _unsupported("is_shortcut_on_desktop", rule)
    key = "Name" if kind == "name" else "Exec"
    expected = rule[kind]
    for content in shortcuts.values():
        if f"{key}={expected}\n" in content:
            return 1.0
        for actual in _entries(content, key):
            a, e = (actual.lower(), expected.lower()) if kind == "name" else (actual, expected)
            if a == e or e in a or a in e:
                return 1.0
    return 0.0


@metric("check_history_deleted")
def check_history_deleted(history_data: Any, rule: Mapping[str, Any]) -> float:
    """1 when no history URL contains any of `rule.keywords`."""
    if rule["type"] != "keywords":
        raise _unsupported("check_history_deleted", rule)
    urls = [row[0] for row in history_data]
    return float(not any(keyword in url for keyword in rule["keywords"] for url in urls))


@metric("is_cookie_deleted")
def is_cookie_deleted(cookie_data: Any, rule: Mapping[str, Any]) -> float:
    """1 when no cookie's host (column 1) equals one of `rule.domains` as a URL."""
    if rule["type"] != "domains":
        raise _unsupported("is_cookie_deleted", rule)
    hosts = [row[1] for row in cookie_data]
    return float(
        not any(compare_urls(domain, host) for domain in rule["domains"] for host in hosts)
    )


@metric("check_font_size")
def check_font_size(font_size: Mapping[str, Any], rule: Mapping[str, Any]) -> float:
    """`default_font_size` equals `rule.value` (type `value`) or lies strictly
    between `rule.min` and `rule.max` (type `range`)."""
    size = font_size["default_font_size"]
    if rule["type"] == "value":
        return float(size == rule["value"])
    if rule["type"] == "range":
        return float(rule["min"] < size < rule["max"])
    raise _unsupported("check_font_size", rule)


@metric("check_enabled_experiments")
def check_enabled_experiments(enabled: Any, rule: Mapping[str, Any]) -> float:
    """The chrome://flags entries switched on (names before "@") equal `rule.names`, in order."""
    if rule["type"] != "names":
        raise _unsupported("check_enabled_experiments", rule)
    return float([e.split("@")[0] for e in enabled] == list(rule["names"]))


_ALIASES = ({"Zoom Chrome Extension", "Zoom for Google Chrome"},)
"""Extension names the Chrome Web Store changed; either spelling counts (OSWorld)."""


def _canonical(name: str) -> str:
    for group in _ALIASES:
        if name in group:
            return sorted(group)[0]
    return name


@metric("is_expected_installed_extensions")
def is_expected_installed_extensions(installed: Any, expected: Mapping[str, Any]) -> float:
    """1 when every name of `expected.expected` is among the installed extensions."""
    if not installed:
        return 0.0
    wanted = {_canonical(name) for name in expected["expected"]}
    return float(wanted <= {_canonical(name) for name in installed})


@metric("compare_htmls")
def compare_htmls(html_path1: str, html_path2: str, **options: Any) -> float:
    """1 when both HTML files agree node by node in document order (the walk stops
    at the shorter one, as OSWorld's): tag names, stripped texts and attributes
    (`ignore_sdnum`: LibreOffice's `sdnum` attribute is ignored); text nodes equal."""
    bs4 = require("bs4", "beautifulsoup4", metric="compare_htmls")
    with open(html_path1, encoding="utf-8") as f1, open(html_path2, encoding="utf-8") as f2:
        soup1, soup2 = bs4.BeautifulSoup(f1, "lxml"), bs4.BeautifulSoup(f2, "lxml")
    ignore_sdnum = options.get("ignore_sdnum")

    def same(a: Any, b: Any) -> bool:
        if not (isinstance(a, bs4.Tag) and isinstance(b, bs4.Tag)):
            return bool(a == b)
        if a.name != b.name or a.text.strip() != b.text.strip():
            return False
        if a.attrs == b.attrs:
            return True
        return bool(ignore_sdnum) and (
            {k: v for k, v in a.attrs.items() if k != "sdnum"}
            == {k: v for k, v in b.attrs.items() if k != "sdnum"}
        )

    return float(
        all(same(a, b) for a, b in zip(soup1.descendants, soup2.descendants, strict=False))
    )
