"""URL metrics for browser tasks, with OSWorld's URL equivalence (`compare_urls`,
in `cua_rl.chrome.urls`: the `chrome_close_tabs` setup step uses it too)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlparse, urlunparse

from cua_rl.chrome.urls import compare_urls
from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)


def are_lists_equal(
    list1: Sequence[Any], list2: Sequence[Any], same: Callable[[Any, Any], bool]
) -> bool:
    """Same length and every item of `list1` has an equal item in `list2`."""
    if len(list1) != len(list2):
        return False
    return all(any(same(a, b) for b in list2) for a in list1)


def _url_of(result: Any) -> Any:
    return result.get("url") if isinstance(result, Mapping) else result


@metric("is_expected_url_pattern_match")
def is_expected_url_pattern_match(result: Any, rules: Mapping[str, Any]) -> float:
    """1 when every regex of `rules.expected` is found in the URL (a string, or the
    `url` of a tab-info object)."""
    if not result:
        return 0.0
    url = _url_of(result)
    if not isinstance(url, str):
        log.error("is_expected_url_pattern_match: no URL in %r", type(result))
        return 0.0
    return float(all(re.search(pattern, url) for pattern in rules["expected"]))


@metric("is_expected_tabs")
def is_expected_tabs(open_tabs: Any, rule: Mapping[str, Any]) -> float:
    """1 when the open tabs' URLs equal `rule.urls` as multisets-ish (OSWorld's
    are_lists_equal: same count, each expected URL among the tabs)."""
    if not open_tabs:
        return 0.0
    if rule["type"] != "url":
        log.error("is_expected_tabs: unknown rule type %r", rule["type"])
        return 0.0
    actual = [tab["url"] for tab in open_tabs]
    return float(are_lists_equal(rule["urls"], actual, compare_urls))


@metric("is_expected_active_tab")
def is_expected_active_tab(active_tab: Any, rule: Mapping[str, Any]) -> float:
    """1 when the active tab's URL (string or tab-info object) equals `rule.url`."""
    if not active_tab:
        return 0.0
    if rule["type"] != "url":
        log.error("is_expected_active_tab: unknown rule type %r", rule["type"])
        return 0.0
    return float(compare_urls(rule["url"], _url_of(active_tab)))


@metric("is_expected_active_tab_approximate")
def is_expected_active_tab_approximate(active_tab: Any, rule: Mapping[str, Any]) -> float:
    """Like is_expected_active_tab but a plain string comparison that ignores the query."""
    if not active_tab:
        return 0.0
    if rule["type"] != "url":
        log.error("is_expected_active_tab_approximate: unknown rule type %r", rule["type"])
        return 0.0

    def strip_query(url: str) -> str:
        return urlunparse(urlparse(url)._replace(query=""))

    return float(strip_query(rule["url"]) == strip_query(_url_of(active_tab)))


@metric("is_expected_search_query")
def is_expected_search_query(active_tab_info: Any, rules: Mapping[str, Any]) -> float:
    """1 when `rules.expect.pattern` is found in the active tab's URL."""
    if not active_tab_info:
        return 0.0
    return float(re.search(rules["expect"]["pattern"], active_tab_info["url"]) is not None)
