"""Chrome getters that ask the running browser over CDP (see `cua_rl.chrome.cdp`).

Return shapes and failure values are OSWorld's: a browser that cannot be
reached gives [] for the tab list and None for the active tab (the metrics
score those 0), a page that does not settle in time is reported with the
title "Load timeout". Pages these getters open are closed again, so later
metrics of the same evaluation see the tabs the agent left.

`page_info` and `pdf_from_url` try twice as OSWorld does, but through the
project's retry helper and only after an error a retry can cure (a timeout, a
dropped connection: `transient_browser_error`); a page that refuses the same way
every time gets OSWorld's failure value at once, and a dead desktop
(GuestUnavailable) propagates, as in every getter, instead of scoring 0.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from cua_rl.chrome.cdp import active_url, browser_session, transient_browser_error
from cua_rl.errors import ChromeRequirementMissing, EvalExtraMissing, GuestUnavailable
from cua_rl.evaluation.getters.chrome_url_parse import dash_part, macys_path, query_params
from cua_rl.evaluation.registry import GetterContext, getter
from cua_rl.retry import retrying

log = logging.getLogger(__name__)

TAB_TIMEOUT_MS = 30_000
PAGE_TIMEOUT_MS = 60_000
PAGE_ATTEMPTS = 2
"""Tries of a page load or print (OSWorld's count) when the failure is transient."""
PAGE_RETRY_BACKOFF_S = 1.0
"""Base of the jittered backoff before the second try (the link or Chrome recovers)."""

T = TypeVar("T")


def _is_timeout(exc: BaseException) -> bool:
    return type(exc).__name__ == "TimeoutError"


async def _tried(what: str, url: str, load: Callable[[], Awaitable[T]]) -> T:
    """`load()`, tried again only after an error a retry can cure; any other error,
    and the last transient one, propagates as it was."""
    async for attempt in retrying(
        f"{what} of {url}",
        attempts=PAGE_ATTEMPTS,
        retry_on=transient_browser_error,
        backoff_s=PAGE_RETRY_BACKOFF_S,
        max_backoff_s=4 * PAGE_RETRY_BACKOFF_S,
    ):
        with attempt:
            return await load()
    raise AssertionError("unreachable: retrying re-raises the last error")


@getter("open_tabs_info")
async def open_tabs_info(ctx: GetterContext, config: dict[str, Any]) -> list[dict[str, str]]:
    """[{title, url}] of every tab in every browser context, in Chrome's order."""
    try:
        async with browser_session(ctx.client, ctx.setup, what="open_tabs_info") as browser:
            tabs = []
            for context in browser.contexts:
                for page in context.pages:
                    try:
                        await page.wait_for_load_state("networkidle", timeout=TAB_TIMEOUT_MS)
                        tabs.append({"title": await page.title(), "url": page.url})
                    except Exception as exc:
                        title = "Load timeout" if _is_timeout(exc) else "Error encountered"
                        tabs.append({"title": title, "url": page.url})
            return tabs
    except ChromeRequirementMissing as exc:
        log.warning("open_tabs_info: %s", exc)
        return []


@getter("active_url_from_accessTree")
async def active_url_from_access_tree(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """The active tab's URL: `goto_prefix` (default "https://") + the address bar text."""
    found = await active_url(ctx.client, ctx.setup, config)
    return None if found is None else found.url


async def _load_in_new_page(
    ctx: GetterContext, url: str, *, what: str, own_context: bool, wait_until: str
) -> dict[str, str] | None:
    """Open `url` in a new tab and return {title, url, content} (OSWorld's page info)."""
    async with browser_session(ctx.client, ctx.setup, what=what) as browser:
        if own_context or not browser.contexts:
            page = await browser.new_page()
        else:
            page = await browser.contexts[0].new_page()
        try:
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            try:
                await page.goto(url, wait_until=wait_until, timeout=PAGE_TIMEOUT_MS)
                await page.wait_for_load_state(wait_until, timeout=PAGE_TIMEOUT_MS)
                title = await page.title()
            except Exception as exc:
                if not _is_timeout(exc):
                    raise
                title = "Load timeout"
            return {"title": title, "url": page.url, "content": await page.content()}
        finally:
            await page.close()


@getter("active_tab_info")
async def active_tab_info(ctx: GetterContext, config: dict[str, Any]) -> dict[str, str] | None:
    """{title, url, content} of the active tab's URL, loaded again in a fresh context
    (OSWorld reloads it rather than reading the agent's tab)."""
    found = await active_url(ctx.client, ctx.setup, config)
    if found is None:
        return None
    try:
        return await _load_in_new_page(
            ctx, found.url, what="active_tab_info", own_context=True, wait_until="load"
        )
    except ChromeRequirementMissing as exc:
        log.warning("active_tab_info: %s", exc)
        return None
    except EvalExtraMissing:
        raise
    except Exception as exc:  # navigation errors (DNS, refused): OSWorld returns None
        log.warning("active_tab_info: loading %s failed: %s", found.url, exc)
        return None


@getter("page_info")
async def page_info(ctx: GetterContext, config: dict[str, Any]) -> dict[str, str]:
    """{title, url, content} of `url` opened in the browser's own context (its cookies:
    e.g. the agent's shopping cart)."""
    url = config["url"]
    try:
        info = await _tried(
            "page_info",
            url,
            lambda: _load_in_new_page(
                ctx, url, what="page_info", own_context=False, wait_until="networkidle"
            ),
        )
    except (EvalExtraMissing, GuestUnavailable):
        raise
    except ChromeRequirementMissing as exc:
        log.warning("page_info: %s", exc)
    except Exception as exc:  # the page cannot be loaded: OSWorld's answer below
        log.warning("page_info: loading %s failed: %s", url, exc)
    else:
        assert info is not None
        return info
    return {"title": "Connection failed", "url": url, "content": ""}


@getter("active_tab_url_parse", required=("parse_keys",))
async def active_tab_url_parse(ctx: GetterContext, config: dict[str, Any]) -> Any:
    found = await active_url(ctx.client, ctx.setup, config)
    return None if found is None else query_params(found.url, config)


@getter("url_dashPart", required=("partIndex", "returnType"))
async def url_dash_part(ctx: GetterContext, config: dict[str, Any]) -> Any:
    found = await active_url(ctx.client, ctx.setup, config)
    return None if found is None else dash_part(found.url, config)


async def _macys(ctx: GetterContext, config: dict[str, Any]) -> Any:
    found = await active_url(ctx.client, ctx.setup, config)
    return None if found is None else macys_path(found.url, config)


getter("url_path_parse", required=("parse_keys",))(_macys)
getter("macys_product_url_parse", required=("parse_keys",))(_macys)


@getter("pdf_from_url", required=("path", "dest"))
async def pdf_from_url(ctx: GetterContext, config: dict[str, Any]) -> str:
    """Print the page at `path` to PDF (Chrome's print-to-PDF) as `dest`.

    As OSWorld, a page that cannot be printed leaves an empty PDF in its place
    (which scores 0 against any real document) instead of failing the evaluation.
    """
    url, target = config["path"], ctx.cache_dir / config["dest"]

    async def print_page() -> str:
        async with browser_session(ctx.client, ctx.setup, what="pdf_from_url") as browser:
            page = await browser.new_page()
            try:
                await page.goto(url, wait_until="networkidle", timeout=PAGE_TIMEOUT_MS)
                await page.pdf(path=str(target))
            finally:
                await page.close()
        return str(target)

    try:
        return await _tried("pdf_from_url", url, print_page)
    except (EvalExtraMissing, GuestUnavailable):
        raise
    except Exception as exc:  # the page cannot be printed: OSWorld's empty PDF below
        log.warning(
            "pdf_from_url: %s could not be printed (%s); writing an empty PDF as OSWorld does",
            url,
            exc,
        )
    await asyncio.to_thread(target.write_bytes, b"%PDF-1.4\n%EOF\n")
    return str(target)


async def _extract(page: Any, info: dict[str, Any]) -> Any:
    action = info.get("action", "inner_text")
    selectors = info["selector"]
    if action in ("click_and_inner_text", "click_and_attribute"):
        for selector in selectors[:-1]:
            link = await page.wait_for_selector(selector, state="attached", timeout=10_000)
            await link.click()
            await page.wait_for_load_state("load")
        selectors = selectors[-1]
    elif action not in ("inner_text", "attribute"):
        raise NotImplementedError(f"info_from_website: action {action!r} is not supported")
    element = await page.wait_for_selector(selectors, state="attached", timeout=10_000)
    if action.endswith("inner_text"):
        return await element.inner_text()
    return await element.get_attribute(info["attribute"])


@getter("info_from_website", required=("url", "infos"))
async def info_from_website(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """Texts/attributes read from a live website (`infos`: action + CSS selector[s]).

    When the site cannot be read (no network, changed layout) OSWorld returns the
    task's `backups` values; so do we, with a warning naming the failure.
    """
    try:
        async with browser_session(ctx.client, ctx.setup, what="info_from_website") as browser:
            page = await browser.contexts[0].new_page()
            try:
                await page.goto(config["url"])
                await page.wait_for_load_state("load")
                values = []
                for info in config.get("infos", []):
                    if page.url != config["url"]:
                        await page.goto(config["url"])
                        await page.wait_for_load_state("load")
                    values.append(await _extract(page, info))
                return values
            finally:
                await page.close()
    except EvalExtraMissing:
        raise
    except Exception as exc:
        log.warning(
            "info_from_website: reading %s failed (%s); using the task's backups %r",
            config["url"],
            exc,
            config.get("backups"),
        )
        return config.get("backups")


# Reads the appearance mode the settings page shows: its prefs (through the
# settings page's own API) first, then the selected control's label.
_APPEARANCE_PROBE = r"""
async () => {
  const modes = [];
  const byPref = {'browser.theme.color_scheme': 'scheme', 'browser.theme.color_scheme2': 'scheme',
                  'extensions.theme.system_theme': 'system_theme'};
  try {
    const prefs = await chrome.settingsPrivate.getAllPrefs();
    for (const p of prefs) {
      const kind = byPref[p.key];
      const v = p.value;
      if (kind === 'system_theme') {
        if (v === 0 || v === false) modes.push('light');
      } else if (kind === 'scheme') {
        if (v === 1) modes.push('light');
        if (v === 2) modes.push('dark');
        if (v === 0) modes.push('system');
      }
    }
  } catch (e) {}
  const roots = [document];
  for (let i = 0; i < roots.length; i++) {
    for (const el of roots[i].querySelectorAll('*')) if (el.shadowRoot) roots.push(el.shadowRoot);
  }
  const chosen = '[selected],[checked],[aria-checked="true"],option:checked';
  for (const r of roots) {
    for (const el of r.querySelectorAll(chosen)) {
      const t = (el.innerText || el.textContent || '').trim().toLowerCase();
      if (t.includes('light')) modes.push('light');
      else if (t.includes('dark')) modes.push('dark');
      else if (['device', 'system', 'default'].some(w => t.includes(w))) modes.push('system');
    }
  }
  for (const m of ['light', 'dark', 'system']) if (modes.includes(m)) return m;
  return null;
}
"""


@getter("chrome_appearance_mode_ui")
async def chrome_appearance_mode_ui(ctx: GetterContext, config: dict[str, Any]) -> str:
    """ "light", "dark" or "system" as chrome://settings/appearance shows it; from
    Preferences when the page cannot be read (OSWorld's fallback)."""
    from cua_rl.evaluation.getters.chrome_profile import chrome_color_scheme

    try:
        async with browser_session(
            ctx.client, ctx.setup, what="chrome_appearance_mode_ui", relaunch=False
        ) as browser:
            page = await browser.contexts[0].new_page()
            try:
                await page.goto(
                    "chrome://settings/appearance", wait_until="domcontentloaded", timeout=30_000
                )
                loop = asyncio.get_running_loop()
                end = loop.time() + 5.0  # the settings UI renders its controls after load
                while True:
                    mode = await page.evaluate(_APPEARANCE_PROBE)
                    if mode in ("light", "dark", "system") or loop.time() >= end:
                        break
                    await asyncio.sleep(0.25)
            finally:
                await page.close()
        if mode in ("light", "dark", "system"):
            return str(mode)
    except EvalExtraMissing:
        raise
    except Exception as exc:
        log.info("chrome_appearance_mode_ui: settings page unreadable (%s); using Preferences", exc)
    return await chrome_color_scheme(ctx, config)
