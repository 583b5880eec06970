"""Chrome and URL metrics: a passing and a failing case each, with OSWorld's rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.chrome.urls import compare_urls
from cua_rl.evaluation import get_metric
from cua_rl.evaluation.metrics.urls import are_lists_equal


def score(name: str, *args: object, **options: object) -> float:
    return get_metric(name).func(*args, **options)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("https://www.airbnb.com/", "https://airbnb.com.sg", True),
        ("www.example.com/a", "http://example.com/a", True),
        ("https://example.com/a", "http://example.com/a", False),  # scheme counts
        ("https://example.com/a?x=1", "https://example.com/a?x=2", False),
        ("https://docs.example.com/a", "https://example.com/a", False),
        (None, None, True),
        (None, "https://example.com", False),
    ],
)
def test_compare_urls(a: str | None, b: str | None, same: bool) -> None:
    assert compare_urls(a, b) is same


def test_compare_urls_ignores_query_unless_full() -> None:
    assert compare_urls("https://a.com/p?x=1", "https://a.com/p?x=2", full=False)


def test_are_lists_equal_counts_and_matches() -> None:
    assert are_lists_equal([1, 2], [2, 1], lambda a, b: a == b)
    assert not are_lists_equal([1, 1], [1], lambda a, b: a == b)
    assert not are_lists_equal([1, 3], [1, 2], lambda a, b: a == b)


def test_is_expected_url_pattern_match() -> None:
    rules = {"expected": [r"^https://www\.example\.com/", "q=books"]}
    assert score("is_expected_url_pattern_match", "https://www.example.com/s?q=books", rules) == 1
    assert (
        score("is_expected_url_pattern_match", {"url": "https://www.example.com/s?q=x"}, rules) == 0
    )
    assert score("is_expected_url_pattern_match", None, rules) == 0


def test_is_expected_tabs() -> None:
    rule = {"type": "url", "urls": ["https://www.a.com", "https://b.org/x"]}
    tabs = [{"title": "B", "url": "https://b.org/x"}, {"title": "A", "url": "https://a.com/"}]
    assert score("is_expected_tabs", tabs, rule) == 1
    assert score("is_expected_tabs", tabs[:1], rule) == 0
    assert score("is_expected_tabs", [], rule) == 0


def test_is_expected_active_tab() -> None:
    rule = {"type": "url", "url": "https://www.example.com/page"}
    assert score("is_expected_active_tab", "https://example.com/page", rule) == 1
    assert score("is_expected_active_tab", {"url": "https://example.com/other"}, rule) == 0


def test_is_expected_active_tab_approximate_ignores_query() -> None:
    rule = {"type": "url", "url": "https://example.com/page?a=1"}
    assert score("is_expected_active_tab_approximate", "https://example.com/page?b=2", rule) == 1
    assert score("is_expected_active_tab_approximate", "https://www.example.com/page", rule) == 0


def test_is_expected_search_query() -> None:
    rules = {"expect": {"pattern": r"q=drip\+coffee"}}
    assert score("is_expected_search_query", {"url": "https://s.com/?q=drip+coffee"}, rules) == 1
    assert score("is_expected_search_query", {"url": "https://s.com/?q=tea"}, rules) == 0


BOOKMARKS = {
    "bookmark_bar": {
        "children": [
            {"type": "folder", "name": "Favorites", "children": []},
            {"type": "url", "name": "A", "url": "https://a.com/"},
            {
                "type": "folder",
                "name": "Liked Authors",
                "children": [
                    {"type": "url", "name": "x", "url": "https://x.org/1"},
                    {"type": "url", "name": "y", "url": "https://y.org/2"},
                ],
            },
        ]
    }
}


def test_is_expected_bookmarks_folder_names_and_urls() -> None:
    folders = {"type": "bookmark_bar_folders_names", "names": ["Favorites", "Liked Authors"]}
    assert score("is_expected_bookmarks", BOOKMARKS, folders) == 1
    assert score("is_expected_bookmarks", BOOKMARKS, {**folders, "names": ["Favorites"]}) == 0
    urls = {"type": "bookmark_bar_websites_urls", "urls": ["https://a.com/"]}
    assert score("is_expected_bookmarks", BOOKMARKS, urls) == 1
    assert score("is_expected_bookmarks", [], urls) == 0


def test_is_expected_bookmarks_liked_authors_alternatives() -> None:
    rule = {
        "type": "liked_authors_websites_urls",
        "urls": [["https://x.org/0", "https://x.org/1"], "https://y.org/2"],
    }
    assert score("is_expected_bookmarks", BOOKMARKS, rule) == 1
    rule["urls"] = ["https://x.org/1"]
    assert score("is_expected_bookmarks", BOOKMARKS, rule) == 0
    with pytest.raises(ValueError, match="not supported"):
        score("is_expected_bookmarks", BOOKMARKS, {"type": "nope"})


def test_is_added_to_steam_cart() -> None:
    info = {"content": "<div>The Dota 2 Official Soundtrack</div>"}
    assert score("is_added_to_steam_cart", info, {"items": ["Dota 2 Official Soundtrack"]}) == 1
    assert score("is_added_to_steam_cart", info, {"items": ["Half-Life"]}) == 0


def test_is_shortcut_on_desktop() -> None:
    shortcuts = {"a.desktop": "[Desktop Entry]\nName=Google Scholar Home\nExec=chrome --app=x\n"}
    named = {"type": "name", "name": "google scholar"}
    assert score("is_shortcut_on_desktop", shortcuts, named) == 1
    assert score("is_shortcut_on_desktop", shortcuts, {"type": "name", "name": "Maps"}) == 0
    assert score("is_shortcut_on_desktop", shortcuts, {"type": "exec", "exec": "--app=x"}) == 1
    assert score("is_shortcut_on_desktop", {}, {"type": "exec", "exec": "chrome"}) == 0


def test_check_history_deleted() -> None:
    rule = {"type": "keywords", "keywords": ["youtube"]}
    assert score("check_history_deleted", [("https://nytimes.com/", "NYT", 1)], rule) == 1
    assert score("check_history_deleted", [("https://www.youtube.com/watch", "v", 1)], rule) == 0


def test_is_cookie_deleted() -> None:
    rule = {"type": "domains", "domains": [".amazon.com"]}
    assert score("is_cookie_deleted", [(0, ".example.org", "k")], rule) == 1
    assert score("is_cookie_deleted", [(0, ".amazon.com", "k")], rule) == 0


def test_check_font_size() -> None:
    sizes = {"default_font_size": 20}
    assert score("check_font_size", sizes, {"type": "value", "value": 20}) == 1
    assert score("check_font_size", sizes, {"type": "range", "min": 16, "max": 20}) == 0
    assert score("check_font_size", sizes, {"type": "range", "min": 16, "max": 24}) == 1


def test_check_enabled_experiments() -> None:
    rule = {"type": "names", "names": ["smooth-scrolling"]}
    assert score("check_enabled_experiments", ["smooth-scrolling@1"], rule) == 1
    assert score("check_enabled_experiments", ["other@2"], rule) == 0


def test_is_expected_installed_extensions_with_renamed_zoom() -> None:
    rule = {"expected": ["Zoom for Google Chrome", "Momentum"]}
    assert (
        score(
            "is_expected_installed_extensions", ["Zoom Chrome Extension", "Momentum", "Other"], rule
        )
        == 1
    )
    assert score("is_expected_installed_extensions", ["Momentum"], rule) == 0


def test_compare_htmls(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.html", tmp_path / "b.html", tmp_path / "c.html"
    a.write_text('<table><tr><td sdnum="1">5</td></tr></table>')
    b.write_text('<table><tr><td sdnum="2">5</td></tr></table>')
    c.write_text("<table><tr><td>6</td></tr></table>")
    assert score("compare_htmls", str(a), str(b), ignore_sdnum=True) == 1
    assert score("compare_htmls", str(a), str(b)) == 0
    assert score("compare_htmls", str(a), str(c)) == 0
