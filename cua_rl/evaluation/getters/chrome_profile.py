"""Chrome getters that read the browser's profile files through the guest.

Return values and fallbacks are OSWorld's (`desktop_env/evaluators/getters/
chrome.py`), because the task files' expected values were written against
them: settings are returned as the strings "true"/"false", an unreadable
Preferences file gives the same default OSWorld returns (so the metric scores
it 0 the same way). The SQLite files (History, Cookies) are copied into the
trajectory folder under `dest` and read there; a missing one raises
FileNotFoundError, which `evaluate` scores 0.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from cua_rl.atomic_file import write_bytes_atomic
from cua_rl.chrome.cdp import read_profile_file, read_profile_json
from cua_rl.evaluation.registry import GetterContext, getter

_PREFS = "Default/Preferences"
_LOCAL_STATE = "Local State"
_DEFAULT_FONTS = {"default_fixed_font_size": 13, "default_font_size": 16}


def _flag(value: Any) -> str:
    return "true" if value else "false"


@getter("default_search_engine")
async def default_search_engine(ctx: GetterContext, config: dict[str, Any]) -> str:
    """Short name of the default search provider ("Google" when none is set)."""
    prefs = await read_profile_json(ctx.client, _PREFS) or {}
    data = prefs.get("default_search_provider_data", {}).get("template_url_data", {})
    return data.get("short_name", "Google")


@getter("profile_name")
async def profile_name(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    prefs = await read_profile_json(ctx.client, _PREFS)
    return None if prefs is None else prefs.get("profile", {}).get("name")


@getter("chrome_font_size")
async def chrome_font_size(ctx: GetterContext, config: dict[str, Any]) -> dict[str, Any]:
    """`webkit.webprefs` (font sizes); Chrome's defaults when it was never changed."""
    prefs = await read_profile_json(ctx.client, _PREFS)
    if prefs is None:
        return dict(_DEFAULT_FONTS)
    return prefs.get("webkit", {}).get("webprefs", {**_DEFAULT_FONTS, "minimum_font_size": 13})


@getter("enable_do_not_track")
async def enable_do_not_track(ctx: GetterContext, config: dict[str, Any]) -> str:
    prefs = await read_profile_json(ctx.client, _PREFS) or {}
    return _flag(prefs.get("enable_do_not_track", {}))


@getter("enable_safe_browsing")
async def enable_safe_browsing(ctx: GetterContext, config: dict[str, Any]) -> str:
    """ "true" when standard or enhanced Safe Browsing is on."""
    prefs = await read_profile_json(ctx.client, _PREFS) or {}
    safe = prefs.get("safebrowsing", {})
    return _flag(safe.get("enhanced", False) or safe.get("enabled", False))


@getter("enable_enhanced_safety_browsing")
async def enable_enhanced_safety_browsing(ctx: GetterContext, config: dict[str, Any]) -> str:
    prefs = await read_profile_json(ctx.client, _PREFS) or {}
    return _flag(prefs.get("safebrowsing", {}).get("enhanced", {}))


@getter("new_startup_page")
async def new_startup_page(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """ "true" when Chrome opens the New Tab page on startup: no `session` key yet
    (a fresh profile) or `session.restore_on_startup` == 5."""
    prefs = await read_profile_json(ctx.client, _PREFS)
    if prefs is None:
        return None
    if "session" not in prefs:
        return "true"
    return _flag(prefs.get("session", {}).get("restore_on_startup", {}) == 5)


def has_default_content_settings(values: Any) -> bool:
    """OSWorld's test for "delete site data on close": `profile.
    default_content_setting_values` exists. Chromium >= ~138 writes that key into
    every fresh profile with only migration markers (`has_migrated_local_network_
    access`); those are bookkeeping, not a setting the user changed, so a dict of
    only `has_migrated_*` keys counts as absent (else an untouched profile passes)."""
    if isinstance(values, dict) and values:
        return any(not str(key).startswith("has_migrated_") for key in values)
    return values is not None


@getter("data_delete_automacally")
async def data_delete_automacally(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """ "true" when the profile has default content settings (see
    `has_default_content_settings`; the misspelt name is OSWorld's)."""
    prefs = await read_profile_json(ctx.client, _PREFS)
    if prefs is None or not isinstance(prefs.get("profile"), dict):
        return None
    return _flag(
        has_default_content_settings(prefs["profile"].get("default_content_setting_values"))
    )


def _extension_settings(prefs: dict[str, Any] | None) -> dict[str, Any]:
    settings = (prefs or {}).get("extensions", {}).get("settings", {})
    return settings if isinstance(settings, dict) else {}


@getter("find_unpacked_extension_path")
async def find_unpacked_extension_path(ctx: GetterContext, config: dict[str, Any]) -> list[str]:
    """The `path` of every extension registered in Preferences."""
    settings = _extension_settings(await read_profile_json(ctx.client, _PREFS))
    return [
        entry["path"] for entry in settings.values() if isinstance(entry, dict) and "path" in entry
    ]


@getter("find_installed_extension_name")
async def find_installed_extension_name(ctx: GetterContext, config: dict[str, Any]) -> list[str]:
    """The manifest name of every extension registered in Preferences."""
    settings = _extension_settings(await read_profile_json(ctx.client, _PREFS))
    return [
        entry["manifest"]["name"]
        for entry in settings.values()
        if isinstance(entry, dict) and "name" in entry.get("manifest", {})
    ]


@getter("enabled_experiments")
async def enabled_experiments(ctx: GetterContext, config: dict[str, Any]) -> list[str]:
    """chrome://flags entries switched on (`browser.enabled_labs_experiments`)."""
    state = await read_profile_json(ctx.client, _LOCAL_STATE) or {}
    return list(state.get("browser", {}).get("enabled_labs_experiments", []))


@getter("chrome_language")
async def chrome_language(ctx: GetterContext, config: dict[str, Any]) -> str:
    state = await read_profile_json(ctx.client, _LOCAL_STATE) or {}
    return state.get("intl", {}).get("app_locale", "en-US")


def color_scheme_of(prefs: dict[str, Any]) -> str:
    """ "light", "dark" or "system" from Preferences (`browser.theme.color_scheme2`,
    older `color_scheme`: 0 system, 1 light, 2 dark; a GTK-off theme counts as light)."""
    theme = prefs.get("browser", {}).get("theme", {})
    raw = theme.get("color_scheme2", theme.get("color_scheme"))
    names = {0: "system", 1: "light", 2: "dark"}
    if isinstance(raw, str):
        raw = raw.strip().lower()
        mode = {"default": "system", "0": "system", "1": "light", "2": "dark"}.get(raw, raw)
        mode = mode if mode in names.values() else None
    elif isinstance(raw, int | float) and not isinstance(raw, bool):
        mode = names.get(int(raw))
    else:
        mode = None
    if prefs.get("extensions", {}).get("theme", {}).get("system_theme") in (0, "0", False):
        return "light"
    return mode or "system"


@getter("chrome_color_scheme")
async def chrome_color_scheme(ctx: GetterContext, config: dict[str, Any]) -> str:
    prefs = await read_profile_json(ctx.client, _PREFS)
    return "system" if prefs is None else color_scheme_of(prefs)


@getter("bookmarks")
async def bookmarks(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """The `roots` object of the Bookmarks file ([] when there is no file)."""
    data = await read_profile_json(ctx.client, "Default/Bookmarks")
    if data is None:
        return []
    return data.get("roots", {})


async def _sqlite_rows(
    ctx: GetterContext, config: dict[str, Any], relatives: tuple[str, ...], query: str
) -> list[tuple[Any, ...]]:
    data = None
    for relative in relatives:
        data = await read_profile_file(ctx.client, relative)
        if data is not None:
            break
    if data is None:
        raise FileNotFoundError(f"Chrome's {' or '.join(relatives)} does not exist on the desktop")
    target = ctx.cache_dir / config.get("dest", Path(relatives[0]).name)
    await asyncio.to_thread(write_bytes_atomic, target, data)
    return await asyncio.to_thread(_query, target, query)


def _query(path: Path, query: str) -> list[tuple[Any, ...]]:
    """Rows of `query` on a copy of a profile database (the live file may be locked by
    Chrome; immutable=1 creates no -wal/-shm files next to it).

    A file without the table (Chromium razes a History it cannot use to an empty
    database, e.g. one without its `meta` table) or that is not SQLite holds no
    readable data: FileNotFoundError, which `evaluate` scores 0 with a log line,
    as OSWorld's getter returns None on any error."""
    try:
        with sqlite3.connect(f"file:{path}?immutable=1", uri=True) as conn:
            return conn.execute(query).fetchall()
    except sqlite3.DatabaseError as exc:
        raise FileNotFoundError(
            f"{path.name} copied from Chrome's profile has no readable data for {query!r}: {exc}"
        ) from None


@getter("history")
async def history(ctx: GetterContext, config: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Rows (url, title, last_visit_time) of the History `urls` table."""
    return await _sqlite_rows(
        ctx, config, ("Default/History",), "SELECT url, title, last_visit_time FROM urls"
    )


@getter("cookie_data")
async def cookie_data(ctx: GetterContext, config: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every row of the Cookies table (column 1 is host_key, as OSWorld's metric reads).

    OSWorld reads `Default/Cookies`; Chrome 96+ keeps it in `Default/Network/Cookies`,
    which is read when the old place is empty."""
    return await _sqlite_rows(
        ctx, config, ("Default/Cookies", "Default/Network/Cookies"), "SELECT * FROM cookies"
    )


@getter("shortcuts_on_desktop")
async def shortcuts_on_desktop(ctx: GetterContext, config: dict[str, Any]) -> dict[str, str]:
    """File name -> text of every `.desktop` file on the desktop folder."""
    desktop = await ctx.client.desktop_path()
    tree = await ctx.client.list_directory(desktop)
    tree = tree.get("directory_tree", tree) if isinstance(tree, dict) else {}
    names = [child.get("name", "") for child in tree.get("children", []) or []]
    shortcuts: dict[str, str] = {}
    for name in names:
        if name.endswith(".desktop"):
            data = await ctx.client.get_file(f"{desktop.rstrip('/')}/{name}")
            if data is not None:
                shortcuts[name] = data.decode("utf-8", errors="replace")
    return shortcuts
