"""Pure parts of the Chrome getters: URL parsing, the address bar in an
accessibility tree, Preferences readings and relative dates."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from cua_rl.chrome.cdp import address_bar_text, cdp_port
from cua_rl.evaluation.getters.chrome_profile import (
    _query,
    color_scheme_of,
    has_default_content_settings,
)
from cua_rl.evaluation.getters.chrome_relative_time import format_day, resolve_relative_rules
from cua_rl.evaluation.getters.chrome_url_parse import (
    dash_part,
    macys_path,
    query_params,
    same_page_url,
)


def test_query_params_with_replace_and_split() -> None:
    url = "https://www.example.com/s?fromStation=NYC&departing=2024-05-01&models=a,b"
    got = query_params(
        url,
        {"parse_keys": ["fromStation", "toStation", "departing"], "replace": {"departing": "time"}},
    )
    assert got == {"fromStation": "NYC", "toStation": "", "time": "2024-05-01"}
    assert query_params(url, {"parse_keys": ["models"], "split_list": True}) == {
        "models": ["a", "b"]
    }


def test_dash_part() -> None:
    url = "https://www.accuweather.com/en/gb/manchester/m15-6/may-weather/329260?year=2024"
    assert dash_part(url, {"partIndex": -2, "returnType": "json", "key": "time"}) == {
        "time": "may-weather"
    }
    assert (
        dash_part(url, {"partIndex": -1, "needDeleteId": True, "returnType": "string"}) == "329260"
    )
    assert dash_part(url, {"partIndex": 40, "returnType": "string"}) is None


def test_macys_path() -> None:
    url = (
        "https://www.macys.com/shop/mens-clothing/mens-shirts/"
        "Men_regular_size_t,Price_discount_range,Sleeve_length/"
        "L,50_PERCENT_%20off%20%26%20more,Short%20Sleeve?id=20626"
    )
    got = macys_path(
        url, {"parse_keys": ["Men_regular_size_t", "Price_discount_range", "mens_clothing"]}
    )
    assert got == {
        "mens_clothing": True,
        "shirts": True,
        "short_sleeve": True,
        "Men_regular_size_t": "L",
        "Price_discount_range": "50_PERCENT_ off & more",
    }
    plain = macys_path("https://www.macys.com/shop/womens", {"parse_keys": ["Men_regular_size_t"]})
    assert plain == {
        "mens_clothing": None,
        "shirts": None,
        "short_sleeve": None,
        "Men_regular_size_t": None,
    }


def test_same_page_url() -> None:
    assert same_page_url("https://a.com/x%20y/", "https://a.com/x y")
    assert not same_page_url("https://a.com/x", "https://a.com/y")


TREE = """<desktop-frame xmlns:st="uri:deskat:state.at-spi.gnome.org">
<application name="Google Chrome"><frame name="New Tab">
<entry name="Address and search bar" st:focusable="true">example.com/page?q=1</entry>
</frame></application></desktop-frame>"""


def test_address_bar_text() -> None:
    assert address_bar_text(TREE) == "example.com/page?q=1"
    assert address_bar_text(TREE.replace("Google Chrome", "Chromium")) == "example.com/page?q=1"
    assert address_bar_text(TREE.replace("Google Chrome", "Firefox")) is None
    assert address_bar_text(TREE.replace("example.com/page?q=1", "")) is None
    assert address_bar_text("not xml") is None


def test_cdp_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUA_RL_CHROME_CDP_PORT", raising=False)
    assert cdp_port(None) == 9222
    monkeypatch.setenv("CUA_RL_CHROME_CDP_PORT", "1337")
    assert cdp_port(None) == 1337


@pytest.mark.parametrize(
    ("prefs", "mode"),
    [
        ({}, "system"),
        ({"browser": {"theme": {"color_scheme2": 2}}}, "dark"),
        ({"browser": {"theme": {"color_scheme": 1}}}, "light"),
        (
            {
                "browser": {"theme": {"color_scheme2": 2}},
                "extensions": {"theme": {"system_theme": 0}},
            },
            "light",
        ),
    ],
)
def test_color_scheme_of(prefs: dict, mode: str) -> None:
    assert color_scheme_of(prefs) == mode


WEDNESDAY = datetime(2024, 5, 15, 10, 0, tzinfo=ZoneInfo("UTC"))


def test_format_day() -> None:
    assert format_day("{DoW}, {Month} {DayD} {Year}", WEDNESDAY) == "Wed, May 15 2024"
    assert (
        format_day("{Year}-{Month0D}-{Day0D} {month} {MonthFull} {MonthD}", WEDNESDAY)
        == "2024-05-15 may May 5"
    )


def test_relative_single_and_range() -> None:
    rules = {"relativeTime": {"from": "tomorrow"}, "expected": {"time": "{Year}-{Month0D}-{Day0D}"}}
    assert resolve_relative_rules(rules, WEDNESDAY)["expected"]["time"] == "2024-05-16"
    assert rules["expected"]["time"] == "{Year}-{Month0D}-{Day0D}"  # the spec is not modified
    ranged = {
        "relativeTime": {"from": "next Monday", "to": "next Friday"},
        "expected": {"from": "{DayD}", "to": "{DayD}"},
    }
    assert resolve_relative_rules(ranged, WEDNESDAY)["expected"] == {"from": "20", "to": "24"}
    weekend = {
        "relativeTime": {"from": "this Saturday", "to": "this Sunday"},
        "expected": {"from": "{DoW}", "to": "{DoW} {DayD}"},
    }
    assert resolve_relative_rules(weekend, WEDNESDAY)["expected"] == {"from": "Sat", "to": "Sun 19"}
    month = {
        "relativeTime": {"from": "10th next month", "to": "11th next month"},
        "expected": {"from": "{Month0D}/{Day0D}", "to": "{Month0D}/{Day0D}"},
    }
    assert resolve_relative_rules(month, datetime(2024, 12, 3))["expected"] == {
        "from": "01/10",
        "to": "01/11",
    }


def test_relative_split_keys() -> None:
    rules = {
        "relativeTime": {"from": "next Monday split", "to": "next Friday split"},
        "expected": {
            "puDay": "{DayD}",
            "puMonth": "{MonthD}",
            "puYear": "{Year}",
            "doDay": "{DayD}",
            "doMonth": "{MonthD}",
            "doYear": "{Year}",
        },
    }
    got = resolve_relative_rules(rules, WEDNESDAY)["expected"]
    assert got == {
        "puDay": "20",
        "puMonth": "5",
        "puYear": "2024",
        "doDay": "24",
        "doMonth": "5",
        "doYear": "2024",
    }


def test_relative_unknown_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown relative time"):
        resolve_relative_rules(
            {"relativeTime": {"from": "someday"}, "expected": {"time": ""}}, WEDNESDAY
        )


def test_delete_data_on_close_ignores_chromiums_migration_markers() -> None:
    # What Chromium 156 writes into a fresh profile: an untouched browser must read "false".
    assert not has_default_content_settings({"has_migrated_local_network_access": True})
    assert not has_default_content_settings(None)
    # Session-only cookies (4), as Chrome's "delete data on close" writes them.
    assert has_default_content_settings({"has_migrated_local_network_access": True, "cookies": 4})
    assert has_default_content_settings({})  # OSWorld: the key exists


def test_a_history_chromium_razed_reads_as_missing(tmp_path: Path) -> None:
    razed = tmp_path / "History"
    with sqlite3.connect(razed) as conn:  # what Chromium leaves of a History it razed:
        conn.execute("PRAGMA user_version = 1")  # a 4096-byte database without tables
    conn.close()
    assert razed.stat().st_size == 4096
    with pytest.raises(FileNotFoundError, match="History copied from Chrome's profile"):
        _query(razed, "SELECT url, title, last_visit_time FROM urls")
    junk = tmp_path / "Cookies"
    junk.write_bytes(b"stand-in\n" * 200)
    with pytest.raises(FileNotFoundError, match="Cookies"):
        _query(junk, "SELECT * FROM cookies")
    good = tmp_path / "good"
    with sqlite3.connect(good) as conn:
        conn.execute("CREATE TABLE urls (url TEXT, title TEXT, last_visit_time INTEGER)")
        conn.execute("INSERT INTO urls VALUES ('https://a.com/', 'A', 1)")
    conn.close()
    assert _query(good, "SELECT url, title, last_visit_time FROM urls") == [
        ("https://a.com/", "A", 1)
    ]
