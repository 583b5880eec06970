"""`page_info` and `pdf_from_url` retry only what a retry can cure: a dropped
connection or a timeout is tried again, a page that refuses the same way every
time is not, and a dead desktop propagates instead of scoring 0."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cua_rl.chrome.cdp import transient_browser_error
from cua_rl.errors import ChromeRequirementMissing, GuestUnavailable
from cua_rl.evaluation.getters import chrome_tabs


class PlaywrightError(Exception):
    """Stands for playwright's Error (the predicate knows it by its module)."""


class PlaywrightTimeout(PlaywrightError):
    pass


for cls, name in ((PlaywrightError, "Error"), (PlaywrightTimeout, "TimeoutError")):
    cls.__module__, cls.__name__ = "playwright._impl._errors", name

RESET = PlaywrightError("Page.goto: net::ERR_CONNECTION_RESET at http://127.0.0.1:1/")
INVALID = PlaywrightError("Page.goto: net::ERR_INVALID_URL at notaurl")
NO_PRINT = PlaywrightError("Page.pdf: Protocol error (Page.printToPDF): Printing is not available")


class Page:
    """Fails `goto` with the queued errors, then loads."""

    def __init__(self, errors: list[BaseException], log: list[str]) -> None:
        self.errors, self.log, self.url = errors, log, ""

    def set_default_timeout(self, ms: int) -> None:
        pass

    async def goto(self, url: str, **kwargs: Any) -> None:
        self.log.append(url)
        if self.errors:
            raise self.errors.pop(0)
        self.url = url

    async def wait_for_load_state(self, *args: Any, **kwargs: Any) -> None:
        pass

    async def title(self) -> str:
        return "Cart"

    async def content(self) -> str:
        return "<html>2 items</html>"

    async def pdf(self, path: str) -> None:
        await asyncio.to_thread(Path(path).write_bytes, b"%PDF-1.7 a real document")

    async def close(self) -> None:
        pass


@pytest.fixture
def chrome(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """A fake CDP session; `errors` are raised by the next page loads, `loads` logs them."""
    state = SimpleNamespace(errors=[], loads=[])

    @contextlib.asynccontextmanager
    async def session(client: Any, setup: Any, *, what: str) -> AsyncIterator[Any]:
        async def new_page() -> Page:
            return Page(state.errors, state.loads)

        yield SimpleNamespace(contexts=[], new_page=new_page)

    monkeypatch.setattr(chrome_tabs, "browser_session", session)
    monkeypatch.setattr(chrome_tabs, "PAGE_RETRY_BACKOFF_S", 0.0)
    return state


def _ctx(tmp_path: Path) -> Any:
    return SimpleNamespace(client=None, setup=None, cache_dir=tmp_path)


async def test_page_info_retries_a_dropped_connection(
    chrome: SimpleNamespace, tmp_path: Path
) -> None:
    chrome.errors.append(RESET)
    info = await chrome_tabs.page_info(_ctx(tmp_path), {"url": "http://127.0.0.1:1/cart"})
    assert info["title"] == "Cart" and len(chrome.loads) == 2


async def test_page_info_does_not_retry_a_permanent_error(
    chrome: SimpleNamespace, tmp_path: Path
) -> None:
    chrome.errors.extend([INVALID, INVALID])
    info = await chrome_tabs.page_info(_ctx(tmp_path), {"url": "notaurl"})
    assert info == {"title": "Connection failed", "url": "notaurl", "content": ""}
    assert len(chrome.loads) == 1


async def test_page_info_lets_a_dead_desktop_through(
    chrome: SimpleNamespace, tmp_path: Path
) -> None:
    chrome.errors.append(GuestUnavailable("guest at 127.0.0.1:1 does not answer"))
    with pytest.raises(GuestUnavailable):
        await chrome_tabs.page_info(_ctx(tmp_path), {"url": "http://127.0.0.1:1/"})
    assert len(chrome.loads) == 1


async def test_pdf_from_url_retries_transient_errors_only(
    chrome: SimpleNamespace, tmp_path: Path
) -> None:
    config = {"path": "http://127.0.0.1:1/doc", "dest": "doc.pdf"}
    chrome.errors.append(PlaywrightTimeout("Page.goto: Timeout 60000ms exceeded."))
    out = await chrome_tabs.pdf_from_url(_ctx(tmp_path), config)
    data = await asyncio.to_thread(Path(out).read_bytes)
    assert data.startswith(b"%PDF-1.7") and len(chrome.loads) == 2

    chrome.loads.clear()
    chrome.errors.extend([RESET, RESET, RESET])
    out = await chrome_tabs.pdf_from_url(_ctx(tmp_path), config)
    data = await asyncio.to_thread(Path(out).read_bytes)
    assert data == b"%PDF-1.4\n%EOF\n"  # OSWorld's empty PDF
    assert len(chrome.loads) == chrome_tabs.PAGE_ATTEMPTS  # bounded

    chrome.loads.clear()
    chrome.errors[:] = [NO_PRINT, NO_PRINT]
    await chrome_tabs.pdf_from_url(_ctx(tmp_path), config)
    assert len(chrome.loads) == 1


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (RESET, True),
        (PlaywrightError("Target page, context or browser has been closed"), True),
        (PlaywrightTimeout("Timeout 30000ms exceeded."), True),
        (TimeoutError(), True),
        (ConnectionRefusedError(111, "refused"), True),
        (INVALID, False),
        (NO_PRINT, False),
        (PlaywrightError("Page.goto: net::ERR_ABORTED at http://127.0.0.1:1/file.zip"), False),
        (ChromeRequirementMissing("DevTools endpoint did not answer within 15 s"), False),
        (GuestUnavailable("guest gone"), False),
        (OSError(28, "No space left on device"), False),
        (ValueError("net::ERR_CONNECTION_RESET"), False),  # not playwright's
    ],
)
def test_what_a_retry_can_cure(exc: BaseException, transient: bool) -> None:
    assert transient_browser_error(exc) is transient
