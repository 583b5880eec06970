"""Chrome setup steps and getters against a real headless Chromium (DevTools on a
free port, pages from a local aiohttp server) and a real guest server.

The guest runs with HOME set to a scratch folder whose `.config/chromium` is
Chromium's user-data folder, so the profile getters read the profile Chromium
itself wrote. This desktop has no AT-SPI, so the active tab comes from CDP.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from tests_support.headless_chromium import stop_chromium, wait_for_devtools
from tests_support.servers import free_port

from cua_rl.chrome import cdp as chrome_cdp
from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.setup_steps import SetupContext, run_setup_steps
from cua_rl.desktop.setup_steps.chrome import EMPTY_HISTORY_URL
from cua_rl.evaluation import GetterContext, get_getter, get_metric

pytest.importorskip("playwright.async_api")
pytestmark = pytest.mark.desktop
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

FORM = """<html><head><title>Form page</title></head><body>
<div class="price">$25</div><div class="price">$60</div>
<div class="route">SEA<span class="sep"></span>NYC</div>
<p>Total: 3 items</p>
<form><input id="who" value="Ada"/></form></body></html>"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """HOME for the guest the `desktop` fixture starts (it copies os.environ)."""
    path = tmp_path_factory.mktemp("chrome-home")
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(path)
    try:
        yield path
    finally:
        if old is not None:
            os.environ["HOME"] = old


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """A local web server in its own thread: /a, /b, /form (sets a cookie)."""

    async def page(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "form":
            resp = web.Response(text=FORM, content_type="text/html")
            resp.set_cookie("session", "s3cret", max_age=86400)
            return resp
        return web.Response(
            text=f"<html><head><title>Page {name}</title></head>"
            f"<body><h1>{name}</h1></body></html>",
            content_type="text/html",
        )

    app = web.Application()
    app.router.add_get("/{name}", page)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    port = free_port()
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


@pytest.fixture(scope="module")
def chromium(
    home: Path, monkeypatch_module: pytest.MonkeyPatch
) -> Iterator[subprocess.Popen[bytes]]:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    port = free_port()
    monkeypatch_module.setenv("CUA_RL_CHROME_CDP_PORT", str(port))
    # Getters must only talk to this Chromium: never start google-chrome/chromium
    # (OSWorld's fallback, with a profile under the guest's HOME) on the desktop.
    monkeypatch_module.setattr(chrome_cdp, "RELAUNCH_COMMANDS", ())
    profile = home / ".config" / "chromium"
    proc = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--remote-debugging-port={port}",
            "--remote-debugging-address=127.0.0.1",
            f"--user-data-dir={profile}",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-session-crashed-bubble",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(home / "chromium.log").open("wb"),
        start_new_session=True,
        env={**os.environ, "HOME": str(home)},
    )
    proc.cdp_port = port  # type: ignore[attr-defined]  # for stop_chromium
    try:
        wait_for_devtools(port, proc, 60.0)
        yield proc
    finally:
        stop_chromium(proc)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture
async def ctx(home: Path, desktop: Any, tmp_path: Path) -> AsyncIterator[GetterContext]:
    async with GuestClient(desktop.url, desktop.token) as client:
        yield GetterContext(
            client=client,
            cache=FileCache(tmp_path / "cache"),
            cache_dir=tmp_path / "traj",
            setup=SetupContext(1920, 1080, strict=True),
        )


async def get(ctx: GetterContext, config: dict[str, Any]) -> Any:
    return await get_getter(config["type"]).func(ctx, config)


async def steps(ctx: GetterContext, config: list[dict[str, Any]]) -> None:
    assert ctx.setup is not None
    await run_setup_steps(
        ctx.client, config, task_id="chrome-live", cache=ctx.cache, context=ctx.setup
    )


async def until(fetch: Any, ok: Any, deadline_s: float = 20.0) -> Any:
    """`await fetch()` again until `ok(result)` or the deadline; the last result."""
    end = asyncio.get_running_loop().time() + deadline_s
    while True:
        result = await fetch()
        if ok(result) or asyncio.get_running_loop().time() > end:
            return result
        await asyncio.sleep(0.25)


async def test_tabs_steps_and_page_getters(chromium: Any, site: str, ctx: GetterContext) -> None:
    urls = [f"{site}/a", f"{site}/b?q=drip+coffee&n=2", f"{site}/form"]
    await steps(
        ctx,
        [
            {"type": "chrome_open_tabs", "parameters": {"urls_to_open": urls}},
            {"type": "chrome_close_tabs", "parameters": {"urls_to_close": [urls[0]]}},
        ],
    )
    tabs = await get(ctx, {"type": "open_tabs_info"})
    # CDP does not promise an order for a fresh connection's pages
    assert sorted(t["url"] for t in tabs) == sorted(urls[1:])
    assert get_metric("is_expected_tabs").func(tabs, {"type": "url", "urls": urls[1:]}) == 1

    active = await get(ctx, {"type": "active_url_from_accessTree"})
    assert active == urls[2]  # the tab opened last
    info = await get(ctx, {"type": "active_tab_info"})
    assert info["title"] == "Form page" and "Total: 3 items" in info["content"]

    parsed = await get(
        ctx,
        {
            "type": "active_tab_html_parse",
            "category": "class",
            "class_multiObject": {"price": {"0": "low", "1": "high"}},
            "class_multiObject_child": {"route": {"0": "from", "1": "to"}},
            "class_singleObject": {"missing": "gone"},
        },
    )
    assert parsed == {"low": "$25", "high": "$60", "from": "SEA", "to": "NYC", "gone": ""}
    inputs = await get(
        ctx,
        {
            "type": "active_tab_html_parse",
            "category": "input",
            "inputObject": {"/html/body/form/input": "who"},
        },
    )
    assert inputs == {"who": "Ada"}
    label = await get(
        ctx,
        {"type": "active_tab_html_parse", "category": "label", "labelObject": {"Total:": "total"}},
    )
    assert label == {"total": "Total: 3 items"}

    page = await get(ctx, {"type": "page_info", "url": urls[1]})
    assert page["title"] == "Page b"
    again = await get(ctx, {"type": "open_tabs_info"})  # getters close what they open
    assert sorted(again, key=str) == sorted(tabs, key=str)
    pdf = await get(ctx, {"type": "pdf_from_url", "path": urls[1], "dest": "b.pdf"})
    data = await asyncio.to_thread(Path(pdf).read_bytes)
    assert data.startswith(b"%PDF") and len(data) > 500


async def test_active_tab_url_parse_and_dash_part(
    chromium: Any, site: str, ctx: GetterContext
) -> None:
    await steps(
        ctx,
        [
            {
                "type": "chrome_open_tabs",
                "parameters": {"urls_to_open": [f"{site}/b?q=drip+coffee&n=2"]},
            }
        ],
    )
    got = await get(
        ctx,
        {"type": "active_tab_url_parse", "parse_keys": ["q", "n", "x"], "replace": {"n": "count"}},
    )
    assert got == {"q": "drip coffee", "x": "", "count": "2"}
    part = await get(
        ctx,
        {
            "type": "url_dashPart",
            "partIndex": -1,
            "needDeleteId": True,
            "returnType": "json",
            "key": "page",
        },
    )
    assert part == {"page": "b"}


async def test_profile_getters_after_chromium_exits(
    chromium: Any, home: Path, ctx: GetterContext
) -> None:
    await asyncio.to_thread(stop_chromium, chromium)  # it writes History and Cookies
    rows = await until(
        lambda: get(ctx, {"type": "history", "dest": "History"}),
        lambda rows: any("/form" in row[0] for row in rows),
    )
    assert any("/form" in row[0] for row in rows)
    cookies = await until(
        lambda: get(ctx, {"type": "cookie_data", "dest": "Cookies"}),
        lambda rows: any(row[1] == "127.0.0.1" for row in rows),
    )
    assert any(row[1] == "127.0.0.1" for row in cookies)
    rule = {"type": "domains", "domains": ["127.0.0.1"]}
    assert get_metric("is_cookie_deleted").func(cookies, rule) == 0

    # getters on the Preferences Chromium itself wrote (never edited), scored
    font = await get(ctx, {"type": "chrome_font_size"})
    assert get_metric("check_font_size").func(font, {"type": "value", "value": 16}) == 1
    assert get_metric("check_font_size").func(font, {"type": "range", "min": 16, "max": 20}) == 0
    assert await get(ctx, {"type": "enable_do_not_track"}) == "false"

    # update_browse_history over an emptied copy of Chromium's own History
    template = ctx.cache_dir.parent / "history_empty.sqlite"
    shutil.copyfile(home / ".config/chromium/Default/History", template)
    with sqlite3.connect(template) as conn:
        conn.execute("DELETE FROM visits")
        conn.execute("DELETE FROM urls")
    conn.close()
    ctx.cache.seed(EMPTY_HISTORY_URL, template)
    visit = {
        "url": "https://www.youtube.com/watch?v=1",
        "title": "v",
        "visit_time_from_now_in_seconds": 60,
    }
    await steps(ctx, [{"type": "update_browse_history", "parameters": {"history": [visit]}}])
    rows = await get(ctx, {"type": "history", "dest": "History2"})
    assert [row[:2] for row in rows] == [(visit["url"], "v")]
    keywords = {"type": "keywords", "keywords": ["youtube"]}
    assert get_metric("check_history_deleted").func(rows, keywords) == 0

    prefs = {
        "profile": {"name": "Thomas", "default_content_setting_values": {"cookies": 4}},
        "enable_do_not_track": True,
        "safebrowsing": {"enabled": False},
        "webkit": {"webprefs": {"default_font_size": 20}},
        "session": {"restore_on_startup": 5},
        "default_search_provider_data": {"template_url_data": {"short_name": "Bing"}},
        "extensions": {
            "settings": {"abc": {"path": "/home/u/ext", "manifest": {"name": "Helper"}}}
        },
    }
    await ctx.client.upload_file(
        str(home / ".config/chromium/Default/Preferences"), json.dumps(prefs).encode()
    )
    expected = {
        "profile_name": "Thomas",
        "enable_do_not_track": "true",
        "enable_safe_browsing": "false",
        "chrome_font_size": {"default_font_size": 20},
        "new_startup_page": "true",
        "default_search_engine": "Bing",
        "data_delete_automacally": "true",
        "find_unpacked_extension_path": ["/home/u/ext"],
        "find_installed_extension_name": ["Helper"],
        "chrome_color_scheme": "system",
    }
    for name, value in expected.items():
        assert await get(ctx, {"type": name}) == value, name
    bookmarks = {
        "roots": {
            "bookmark_bar": {"children": [{"type": "url", "name": "A", "url": "https://a.com/"}]}
        }
    }
    await ctx.client.upload_file(
        str(home / ".config/chromium/Default/Bookmarks"), json.dumps(bookmarks).encode()
    )
    roots = await get(ctx, {"type": "bookmarks"})
    rule = {"type": "bookmark_bar_websites_urls", "urls": ["https://a.com/"]}
    assert get_metric("is_expected_bookmarks").func(roots, rule) == 1

    # Chrome is gone: no active tab (the metrics score None 0).
    assert await get(ctx, {"type": "active_url_from_accessTree"}) is None
