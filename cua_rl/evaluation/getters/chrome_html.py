"""`active_tab_html_parse`: texts picked from the agent's active tab by class, label,
XPath or input, in OSWorld's result shapes (a flat JSON object for
`check_direct_json_object`); and `gotoRecreationPage_and_get_html_content`, the
reference value one recreation.gov task computes from the live site.

The active tab is found as in OSWorld: among the open pages, the first whose
URL equals the active URL once percent-decoded and without a trailing "/".
No matching tab gives {}; an element that is missing gives "" for its key.
"""

from __future__ import annotations

import logging
from typing import Any

from cua_rl.chrome.cdp import active_url, browser_session
from cua_rl.errors import EvalExtraMissing
from cua_rl.evaluation.getters.chrome_url_parse import same_page_url
from cua_rl.evaluation.metrics.text import EVALUATION_FAILED
from cua_rl.evaluation.registry import GetterContext, getter

log = logging.getLogger(__name__)

SETTLE_TIMEOUT_MS = 30_000
ELEMENT_TIMEOUT_MS = 10_000
_DIRECT_TEXTS = """(node) => Array.from(node.childNodes)
    .filter(n => n.nodeType === Node.TEXT_NODE)
    .map(n => n.textContent.trim()).filter(Boolean)"""


class _Page:
    """Text extraction helpers over one Playwright page; errors become empty values."""

    def __init__(self, page: Any) -> None:
        self.page = page

    async def texts(self, selector: str) -> list[str]:
        try:
            return [
                ((await el.text_content()) or "").strip()
                for el in await self.page.query_selector_all(selector)
            ]
        except Exception as exc:
            log.warning("active_tab_html_parse: %s: %s", selector, exc)
            return []

    async def direct_texts(self, selector: str) -> list[str]:
        """Direct text nodes of the FIRST match (`<div>SEA<i/>NYC</div>` -> [SEA, NYC])."""
        try:
            elements = await self.page.query_selector_all(selector)
            return list(await elements[0].evaluate(_DIRECT_TEXTS)) if elements else []
        except Exception as exc:
            log.warning("active_tab_html_parse: %s: %s", selector, exc)
            return []

    async def child_texts(self, selector: str, child: str, *, inner: bool) -> list[str]:
        try:
            out = []
            for el in await self.page.query_selector_all(selector):
                sub = await el.query_selector(child)
                if sub is not None:
                    text = await (sub.inner_text() if inner else sub.text_content())
                    out.append((text or "").strip())
            return out
        except Exception as exc:
            log.warning("active_tab_html_parse: %s %s: %s", selector, child, exc)
            return []

    async def locator_text(self, selector: str, *, value: bool = False) -> str:
        try:
            loc = self.page.locator(selector)
            if await loc.count() == 0:
                return ""
            first = loc.first
            text = await (
                first.input_value(timeout=ELEMENT_TIMEOUT_MS)
                if value
                else first.text_content(timeout=ELEMENT_TIMEOUT_MS)
            )
            return (text or "").strip()
        except Exception as exc:
            log.warning("active_tab_html_parse: %s: %s", selector, exc)
            return ""


def _by_index(out: dict[str, Any], texts: list[str], wanted: dict[str, str]) -> None:
    for order, key in wanted.items():
        index = int(order)
        out[key] = texts[index] if len(texts) > index else ""


async def _class_category(page: _Page, config: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, wanted in config.get("class_multiObject", {}).items():
        _by_index(out, await page.texts("." + name), wanted)
    for name, wanted in config.get("class_multiObject_child", {}).items():
        _by_index(out, await page.direct_texts("." + name), wanted)
    for name, wanted in config.get("class_multiObject_only_child", {}).items():
        _by_index(out, await page.child_texts("." + name, "h3", inner=False), wanted)
    for name, wanted in config.get("class_multiObject_search_exist", {}).items():
        texts = await page.texts("." + name)
        for item in wanted:
            if item != "is_other_exist":
                out[item] = item in texts
        if "is_other_exist" in wanted:
            out["is_other_exist"] = any(text not in wanted for text in texts)
    for name, key in config.get("class_singleObject", {}).items():
        texts = await page.texts("." + name)
        out[key] = texts[0] if texts else ""
    return out


def _mark_listed(out: dict[str, Any], texts: list[str], wanted: list[str]) -> None:
    for item in wanted:
        if any(item.lower() == text.lower() for text in texts):
            out[item.lower()] = True
    if any(all(text.lower() not in item.lower() for item in wanted) for text in texts):
        out["is_other_exist"] = True
    out.setdefault("is_other_exist", False)


async def _class_and_url_category(page: _Page, url: str, config: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, wanted in config.get("class_multiObject", {}).items():
        _mark_listed(out, await page.texts("." + name), wanted)
    for name, wanted in config.get("class_multiObject_li", {}).items():
        texts = await page.child_texts(f".{name} li.catAllProducts", "span", inner=True)
        _mark_listed(out, texts, wanted)
    lowered = url.lower()
    for key in config.get("url_include_expected", []):
        out.setdefault(key.lower(), key.lower() in lowered)
    for key, value in config.get("url_include_expected_multichoice", {}).items():
        out.setdefault(value.lower(), key.lower() in lowered)
    return out


async def parse_page(page: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The `category`-specific extraction of one page (the target tab)."""
    helper = _Page(page)
    category = config["category"]
    if category == "class":
        return await _class_category(helper, config)
    out: dict[str, Any] = {}
    if category == "label":
        for label, key in config.get("labelObject", {}).items():
            out[key] = await helper.locator_text(f"text={label}")
    elif category == "xpath":
        for xpath, key in config.get("xpathObject", {}).items():
            out[key] = await helper.locator_text(f"xpath={xpath}") or await helper.locator_text(
                xpath
            )
    elif category == "input":
        for xpath, key in config.get("inputObject", {}).items():
            out[key] = await helper.locator_text(f"xpath={xpath}", value=True)
    elif category == "class&url":
        out = await _class_and_url_category(helper, page.url, config)
    else:
        log.error("active_tab_html_parse: unknown category %r", category)
    return out


@getter("active_tab_html_parse", required=("category",))
async def active_tab_html_parse(ctx: GetterContext, config: dict[str, Any]) -> Any:
    found = await active_url(ctx.client, ctx.setup, config)
    if found is None:
        return None
    try:
        async with browser_session(ctx.client, ctx.setup, what="active_tab_html_parse") as browser:
            for context in browser.contexts:
                for page in context.pages:
                    try:
                        await page.wait_for_load_state("networkidle", timeout=SETTLE_TIMEOUT_MS)
                    except Exception as exc:  # a page that never idles is still read
                        log.info("active_tab_html_parse: %s did not settle: %s", page.url, exc)
                    if not page.is_closed() and same_page_url(page.url, found.url):
                        return await parse_page(page, config)
            log.warning("active_tab_html_parse: no tab has the active URL %s", found.url)
            return {}
    except EvalExtraMissing:
        raise
    except Exception as exc:
        log.warning("active_tab_html_parse: %s", exc)
        return None


_FAILED = EVALUATION_FAILED


async def _recreation_value(browser: Any, config: dict[str, Any]) -> dict[str, Any]:
    page = await browser.new_page()
    page.set_default_timeout(60_000)
    await page.goto("https://www.recreation.gov/", wait_until="load")
    await page.fill("input#hero-search-input", "Diamond")
    await page.click("button.nav-search-button")
    await page.wait_for_selector(".search-result-highlight--success", state="attached")
    async with page.expect_popup() as popup_info:
        await page.click(".search-result-highlight--success")
    result_page = await popup_info.value
    await result_page.wait_for_load_state("load")
    try:
        await result_page.click("button.next-available", timeout=30_000)
    except Exception as exc:  # OSWorld goes on without it
        log.info("recreation.gov: no next-available button: %s", exc)
    name = config["class"]
    elements = await result_page.query_selector_all("." + name)
    index = int(config.get("order", 0))
    text = await elements[index].text_content() if len(elements) > index else None
    return {"expected": {name: text.strip() if text is not None else _FAILED}}


@getter("gotoRecreationPage_and_get_html_content", required=("class",))
async def goto_recreation_page(ctx: GetterContext, config: dict[str, Any]) -> dict[str, Any]:
    """{"expected": {class: text}} of the `order`-th element of `class` on the first
    recreation.gov result for "Diamond"; OSWorld's failure marker when the site
    cannot be used (check_direct_json_object then scores 0)."""
    try:
        async with browser_session(ctx.client, ctx.setup, what="recreation.gov") as browser:
            return await _recreation_value(browser, config)
    except EvalExtraMissing:
        raise
    except Exception as exc:
        log.warning("gotoRecreationPage_and_get_html_content: recreation.gov failed: %s", exc)
        return {"expected": {"error": _FAILED, "error_message": str(exc)}}
