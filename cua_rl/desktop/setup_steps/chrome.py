"""Chrome and Google setup steps: chrome_open_tabs, chrome_close_tabs,
update_browse_history, login, googledrive (OSWorld SetupController semantics).

The browser is driven over CDP from the host (see `cua_rl.chrome.cdp` for
the endpoint): the steps wait for Chrome's DevTools endpoint with a deadline
(OSWorld retries 15 times, 5 s apart) and raise SetupStepError when it never
answers. As in OSWorld, a page that does not finish loading within 60 s is left
loading (a warning), not a failure. Steps needing Google credentials raise
SetupStepError naming the missing `settings_file`.

Registered by importing this module, which the package's `__init__` does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import sqlite3
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from cua_rl.chrome import cdp
from cua_rl.chrome.cdp import profile_root
from cua_rl.chrome.drive import FOLDER_MIME, drive_for, resolve_settings
from cua_rl.chrome.urls import compare_urls
from cua_rl.desktop.setup_step_params import StepParams, Text
from cua_rl.desktop.setup_steps.core import StepRun, register_setup_step
from cua_rl.errors import ChromeRequirementMissing, CuaRlError, SetupStepError

log = logging.getLogger(__name__)

CONNECT_DEADLINE_S = 75.0
GOTO_TIMEOUT_MS = 60_000
EMPTY_HISTORY_URL = (
    "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/chrome/"
    "44ee5668-ecd5-4366-a6ce-c1c9b8d4e938/history_empty.sqlite?download=true"
)
"""OSWorld's empty History database (Chrome's schema), fetched through the FileCache."""
CHROME_EPOCH = datetime(1601, 1, 1)
TYPED_LINK = 805306368
"""The `transition` OSWorld writes for a made-up visit."""


class ChromeOpenTabsParams(StepParams):
    urls_to_open: list[Text] = Field(min_length=1)


class ChromeCloseTabsParams(StepParams):
    urls_to_close: list[Text] = Field(min_length=1)


class HistoryItem(StepParams):
    url: Text
    title: str
    visit_time_from_now_in_seconds: float = Field(ge=0)


class UpdateBrowseHistoryParams(StepParams):
    history: list[HistoryItem]


class LoginParams(StepParams):
    settings_file: Text
    """JSON file with `email` and `password` (host path)."""
    platform: Literal["googledrive"]


class GoogleDriveParams(StepParams):
    settings_file: Text = "evaluation_examples/settings/googledrive/settings.yml"
    operation: list[Literal["delete", "mkdirs", "upload"]]
    args: list[dict[str, Any]]


async def _with_browser(run: StepRun[Any], action: Any) -> Any:
    """Run `action(browser)` with Chrome connected over CDP; errors become SetupStepError."""
    api = cdp.import_playwright(run.where)
    async with api.async_playwright() as playwright:
        try:
            browser = await cdp.connect(
                playwright, run.client, run.context, relaunch=False, deadline_s=CONNECT_DEADLINE_S
            )
        except ChromeRequirementMissing as exc:
            raise SetupStepError(str(exc)) from exc
        try:
            return await action(browser)
        finally:
            # Only the CDP connection ends; Chrome and the opened tabs stay.
            await browser.close()


async def _goto(page: Any, url: str) -> None:
    try:
        await page.goto(url, timeout=GOTO_TIMEOUT_MS)
    except Exception as exc:  # OSWorld leaves a slow or unreachable page loading
        log.warning("opening %s did not finish: %s", url, exc)


@register_setup_step("chrome_open_tabs", ChromeOpenTabsParams)
async def _chrome_open_tabs(run: StepRun[ChromeOpenTabsParams]) -> None:
    """Open each URL in a new tab of the default context; the tab Chrome started
    with is closed after the first one is open."""

    async def action(browser: Any) -> None:
        context = browser.contexts[0]
        for i, url in enumerate(run.params.urls_to_open):
            page = await context.new_page()
            await _goto(page, url)
            if i == 0:
                await context.pages[0].close()

    await _with_browser(run, action)


@register_setup_step("chrome_close_tabs", ChromeCloseTabsParams)
async def _chrome_close_tabs(run: StepRun[ChromeCloseTabsParams]) -> None:
    """Close, for each URL, the first tab showing it (OSWorld's URL equivalence)."""

    async def action(browser: Any) -> None:
        context = browser.contexts[0]
        for url in run.params.urls_to_close:
            for page in context.pages:
                if compare_urls(page.url, url):
                    await page.close()
                    break

    await _with_browser(run, action)


def _fill_history(template: Path, items: list[HistoryItem], now: datetime) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "History"
        shutil.copyfile(template, db)
        with sqlite3.connect(db) as conn:
            for item in items:
                when = now - timedelta(seconds=item.visit_time_from_now_in_seconds)
                stamp = int((when - CHROME_EPOCH).total_seconds() * 1_000_000)
                cur = conn.execute(
                    "INSERT INTO urls (url, title, visit_count, typed_count, last_visit_time, "
                    "hidden) VALUES (?, ?, 1, 0, ?, 0)",
                    (item.url, item.title, stamp),
                )
                conn.execute(
                    "INSERT INTO visits (url, visit_time, from_visit, transition, segment_id, "
                    "visit_duration) VALUES (?, ?, 0, ?, 0, 0)",
                    (cur.lastrowid, stamp, TYPED_LINK),
                )
        conn.close()
        return db.read_bytes()


@register_setup_step("update_browse_history", UpdateBrowseHistoryParams)
async def _update_browse_history(run: StepRun[UpdateBrowseHistoryParams]) -> None:
    """Replace the profile's History with OSWorld's empty one plus the given visits
    (visit times relative to now, local time as OSWorld computes them)."""
    template = await run.cache.fetch(EMPTY_HISTORY_URL)
    data = await asyncio.to_thread(_fill_history, template, run.params.history, datetime.now())
    root = await profile_root(run.client)
    await run.client.upload_file(f"{root}/Default/History", data)


def _settings(run: StepRun[Any], settings_file: str) -> Path:
    try:
        return resolve_settings(settings_file, run.context.local_root, what=run.where)
    except CuaRlError as exc:
        raise SetupStepError(str(exc)) from exc


@register_setup_step("login", LoginParams)
async def _login(run: StepRun[LoginParams]) -> None:
    """Sign in to Google Drive in a new tab with the settings file's email/password."""
    settings = json.loads(_settings(run, run.params.settings_file).read_text())
    try:
        email, password = settings["email"], settings["password"]
    except (KeyError, TypeError):
        raise SetupStepError(
            f"settings_file {run.params.settings_file!r}: expected an object "
            "with 'email' and 'password'"
        ) from None

    async def action(browser: Any) -> None:
        page = await browser.contexts[0].new_page()
        await _goto(page, "https://drive.google.com/drive/my-drive")
        try:
            await page.wait_for_selector('input[type="email"]', state="visible", timeout=3000)
            await page.fill('input[type="email"]', email)
            await page.click("#identifierNext > div > button")
            await page.wait_for_selector('input[type="password"]', state="visible", timeout=5000)
            await page.fill('input[type="password"]', password)
            await page.click("#passwordNext > div > button")
            await page.wait_for_load_state("load", timeout=5000)
        except Exception as exc:  # OSWorld logs a login page that does not show and goes on
            log.warning("%s: Google login page did not behave as expected: %s", run.where, exc)

    await _with_browser(run, action)


@register_setup_step("googledrive", GoogleDriveParams)
async def _googledrive(run: StepRun[GoogleDriveParams]) -> None:
    """Reset the Drive: `delete` files then folders matching a query (`trash`
    moves them to the bin instead), `mkdirs` a folder path, `upload` a URL's file."""
    p = run.params
    if len(p.args) != len(p.operation):
        raise SetupStepError(
            f"field 'parameters.args': expected {len(p.operation)} entries aligned with 'operation'"
        )
    settings = _settings(run, p.settings_file)
    try:
        drive = await asyncio.to_thread(drive_for, settings, what=run.where)
    except CuaRlError as exc:
        raise SetupStepError(str(exc)) from exc
    for operation, args in zip(p.operation, p.args, strict=True):
        local = await run.cache.fetch(args["url"]) if operation == "upload" else None
        await asyncio.to_thread(_drive_operation, drive, operation, args, local)


def _mkdirs(drive: Any, parts: list[str]) -> str:
    parent = "root"
    for name in parts:
        q = (
            f'"{parent}" in parents and title = "{name}" and mimeType = "{FOLDER_MIME}" '
            "and trashed = false"
        )
        found = drive.ListFile({"q": q}).GetList()
        if found:
            parent = found[0]["id"]
            continue
        extra = {} if parent == "root" else {"parents": [{"id": parent}]}
        folder = drive.CreateFile({"title": name, "mimeType": FOLDER_MIME, **extra})
        folder.Upload()
        parent = folder["id"]
    return parent


def _drive_operation(drive: Any, operation: str, args: dict[str, Any], local: Path | None) -> None:
    if operation == "delete":
        q = str(args.get("query", "")).strip()
        for kind in ("!=", "="):  # files first, then folders (which take their content along)
            query = (
                f"( {q} ) and mimeType {kind} '{FOLDER_MIME}'"
                if q
                else f"mimeType {kind} '{FOLDER_MIME}'"
            )
            for item in drive.ListFile({"q": query}).GetList():
                item.Trash() if args.get("trash", False) else item.Delete()
    elif operation == "mkdirs":
        path = args["path"]
        _mkdirs(drive, path if isinstance(path, list) else [path])
    else:
        path = args["path"] if isinstance(args["path"], list) else [args["path"]]
        parent = _mkdirs(drive, path[:-1])
        extra = {} if parent == "root" else {"parents": [{"id": parent}]}
        item = drive.CreateFile({"title": path[-1], **extra})
        item.SetContentFile(str(local))
        item.Upload()
