"""Reaching the desktop's Chrome: its DevTools endpoint, its profile folder, its active tab.

OSWorld drives Chrome with Playwright over CDP at `http://<vm ip>:9222` (inside
its images a socat forward to Chrome's `--remote-debugging-port=1337`); we do
the same from the host, with the desktop's host taken from the guest client's
URL. The port is `SetupContext.chromium_port` when a context carries one, else
the port the desktop's provider forwards to 9222 (`GuestClient.cdp_port`: local
desktops have their own network namespace), else the environment variable
CUA_RL_CHROME_CDP_PORT, else 9222.

Profile files (Preferences, Bookmarks, History, Cookies) are read through the
guest. OSWorld reads `~/.config/google-chrome/Default`; Debian's Chromium keeps
`~/.config/chromium/Default`. Both are probed and the one whose Preferences was
written last wins (Google Chrome when neither has been written yet).

The active tab's URL follows OSWorld: the text of Chrome's "Address and search
bar" in the accessibility tree, prefixed with `goto_prefix`. Where the desktop
has no accessibility tree, or the tree shows no address bar, the most recently
active page target of CDP is used instead (its full URL; no prefix is added).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp

from cua_rl.errors import ChromeRequirementMissing, EvalExtraMissing, GuestError, GuestUnavailable
from cua_rl.eval_libraries import EXTRA_HINT


class ExecOutput(Protocol):
    """A command's result as the guest reports it (`desktop.exec_result.ExecResult`)."""

    output: str

    @property
    def ok(self) -> bool: ...


class ChromeGuest(Protocol):
    """What these helpers use of a desktop's guest client (`desktop.client.GuestClient`
    has it): a protocol, so chrome/ sits below desktop/, whose setup steps use it."""

    url: str

    async def execute(
        self, command: list[str] | str, *, shell: bool = False, timeout: float = 120.0
    ) -> ExecOutput: ...

    async def launch(self, command: list[str] | str, *, shell: bool = False) -> None: ...

    async def accessibility_tree(self) -> str | None: ...

    async def get_file(self, path: str) -> bytes | None: ...


log = logging.getLogger(__name__)

DEFAULT_CDP_PORT = 9222
CDP_PORT_ENV = "CUA_RL_CHROME_CDP_PORT"
CONNECT_DEADLINE_S = 15.0
"""How long a getter keeps trying to reach Chrome's DevTools endpoint."""
RELAUNCH_COMMANDS = (
    ["google-chrome", "--remote-debugging-port=1337"],
    ["chromium", "--remote-debugging-port=1337"],
)
"""What OSWorld launches when Chrome is gone (its images forward 9222 to 1337)."""

_APP_NAMES = ("Google Chrome", "Chromium")
_ADDRESS_BAR = "Address and search bar"


def import_playwright(what: str) -> ModuleType:
    """`playwright.async_api`, or an error naming the package and the extra."""
    try:
        return importlib.import_module("playwright.async_api")
    except ModuleNotFoundError as exc:
        raise EvalExtraMissing(
            f"{what} needs the Python package 'playwright' (only its CDP client is used: "
            f"no browser download), which is not installed; install: {EXTRA_HINT}"
        ) from exc


# endpoint ----------------------------------------------------------------------


def cdp_port(setup: Any = None, client: ChromeGuest | None = None) -> int:
    for port in (getattr(setup, "chromium_port", None), getattr(client, "cdp_port", None)):
        if isinstance(port, int) and port > 0:
            return port
    env = os.environ.get(CDP_PORT_ENV, "").strip()
    return int(env) if env else DEFAULT_CDP_PORT


def cdp_url(client: ChromeGuest, setup: Any = None) -> str:
    """`http://<desktop host>:<port>`, the endpoint Playwright's connect_over_cdp takes."""
    host = urlsplit(client.url).hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{cdp_port(setup, client)}"


async def list_targets(endpoint: str, timeout: float = 5.0) -> list[dict[str, Any]]:
    """CDP's /json/list: page targets, the most recently active first."""
    limit = aiohttp.ClientTimeout(total=timeout)
    async with (
        aiohttp.ClientSession(timeout=limit) as http,
        http.get(f"{endpoint}/json/list") as resp,
    ):
        resp.raise_for_status()
        data = await resp.json(content_type=None)
    return [t for t in data if isinstance(t, dict) and t.get("type") == "page"]


async def _relaunch(client: ChromeGuest) -> None:
    """Start Chrome again as OSWorld does when the agent closed it."""
    for command in RELAUNCH_COMMANDS:
        probe = await client.execute(["which", command[0]], timeout=10.0)
        if probe.ok and probe.output.strip():
            await client.launch(command)
            log.info("Chrome was not reachable; launched %s on the desktop", command)
            return
    log.warning(
        "Chrome was not reachable and neither google-chrome nor chromium is on the desktop's PATH"
    )


async def connect(
    playwright: Any,
    client: ChromeGuest,
    setup: Any = None,
    *,
    relaunch: bool = True,
    deadline_s: float = CONNECT_DEADLINE_S,
) -> Any:
    """A Playwright Browser connected over CDP, polling until `deadline_s`.

    With `relaunch`, a browser that does not answer at first is started on the
    desktop (OSWorld's behaviour) before polling on. Raises
    ChromeRequirementMissing when it never answers.
    """
    endpoint = cdp_url(client, setup)
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    relaunched = not relaunch
    last: Exception | None = None
    while True:
        try:
            return await playwright.chromium.connect_over_cdp(endpoint, timeout=10_000)
        except Exception as exc:  # playwright raises its own Error for a refused connection
            last = exc
        if not relaunched:
            relaunched = True
            try:
                await _relaunch(client)
            except GuestUnavailable:
                raise
            except GuestError as exc:
                log.warning("relaunching Chrome failed: %s", exc)
        if loop.time() >= end:
            raise ChromeRequirementMissing(
                f"Chrome's DevTools endpoint {endpoint} did not answer within "
                f"{deadline_s:.0f} s (Chrome must run with --remote-debugging-port and the "
                f"port must be reachable from the host; set {CDP_PORT_ENV} for another "
                f"port): {last}"
            )
        await asyncio.sleep(0.25)


@asynccontextmanager
async def browser_session(
    client: ChromeGuest, setup: Any = None, *, what: str, relaunch: bool = True
) -> AsyncIterator[Any]:
    """Connected Browser for the block; only the CDP connection is closed after it
    (Chrome and its tabs stay, as with OSWorld)."""
    api = import_playwright(what)
    async with api.async_playwright() as playwright:
        browser = await connect(playwright, client, setup, relaunch=relaunch)
        try:
            yield browser
        finally:
            try:
                await browser.close()
            except Exception as exc:  # the browser may be gone already; nothing to undo
                log.debug("closing the CDP connection: %s", exc)


TRANSIENT_NET_ERRORS = (
    "net::ERR_CONNECTION_",
    "net::ERR_TIMED_OUT",
    "net::ERR_EMPTY_RESPONSE",
    "net::ERR_NETWORK_CHANGED",
    "net::ERR_INTERNET_DISCONNECTED",
)
"""Chrome's navigation errors a second try can cure (a server or link that dropped
the connection); an invalid URL, a missing file or a certificate error stays."""
_CLOSED = ("has been closed", "Target closed", "Connection closed")
"""Playwright's words for a CDP connection or page that went away under us (Chrome
crashed or was closed): a new session reconnects, relaunching Chrome."""


def transient_browser_error(exc: BaseException) -> bool:
    """Whether a page load or print over CDP that failed with `exc` can succeed on
    retry: a timeout, a dropped connection (to Chrome or of Chrome to the site).

    Not: a dead desktop (GuestUnavailable: nothing on it answers again), Chrome
    that did not answer within `connect`'s own deadline (ChromeRequirementMissing),
    a missing extra, or anything the page itself refuses (bad URL, printing not
    available), which fails the same way every time.
    """
    if isinstance(exc, ChromeRequirementMissing | EvalExtraMissing | GuestError):
        return False
    if isinstance(exc, TimeoutError | ConnectionError | aiohttp.ClientConnectionError):
        return True
    if not type(exc).__module__.startswith("playwright"):
        return False
    if type(exc).__name__ == "TimeoutError":  # playwright's own, not the builtin
        return True
    message = str(exc)
    return any(part in message for part in (*TRANSIENT_NET_ERRORS, *_CLOSED))


# active tab ----------------------------------------------------------------------


def address_bar_text(tree_xml: str | bytes) -> str | None:
    """Text of Chrome's address bar in an OSWorld accessibility tree (None if absent).

    Like OSWorld: the first matching entry's text, None when the last one is empty.
    """
    lxml_etree = importlib.import_module("lxml.etree")
    data = tree_xml.encode() if isinstance(tree_xml, str) else tree_xml
    try:
        root = lxml_etree.fromstring(data)
    except (ValueError, lxml_etree.XMLSyntaxError) as exc:
        log.warning("unparseable accessibility tree: %s", exc)
        return None
    for app in _APP_NAMES:
        entries = root.xpath(
            "//*[local-name()='application'][@name=$app]//*[local-name()='entry'][@name=$bar]",
            app=app,
            bar=_ADDRESS_BAR,
        )
        if entries:
            return entries[0].text if entries[-1].text else None
    return None


@dataclass(frozen=True, slots=True)
class ActiveUrl:
    url: str
    from_tree: bool
    """True when read from the address bar (OSWorld's way), False from CDP."""


async def active_url(client: ChromeGuest, setup: Any, config: dict[str, Any]) -> ActiveUrl | None:
    """The active tab's URL, or None when neither the tree nor CDP shows one."""
    try:
        tree = await client.accessibility_tree()
    except GuestUnavailable:
        raise
    except GuestError as exc:  # no AT-SPI on this desktop
        log.info("no accessibility tree (%s); asking CDP for the active tab", exc)
        tree = None
    if tree:
        text = address_bar_text(tree)
        if text is not None:
            return ActiveUrl(f"{config.get('goto_prefix', 'https://')}{text}", True)
    endpoint = cdp_url(client, setup)
    try:
        targets = await list_targets(endpoint)
    except (aiohttp.ClientError, TimeoutError, OSError, json.JSONDecodeError) as exc:
        log.info("Chrome's DevTools endpoint %s did not answer: %s", endpoint, exc)
        return None
    for target in targets:
        url = str(target.get("url", ""))
        if url and not url.startswith("devtools://"):
            return ActiveUrl(url, False)
    return None


# profile files -------------------------------------------------------------------

_PROFILE_PROBE = """
import json, os
home = os.path.expanduser('~')
found = []
for rel in ('.config/google-chrome', '.config/chromium', 'snap/chromium/common/chromium'):
    root = os.path.join(home, rel)
    prefs = os.path.join(root, 'Default', 'Preferences')
    if os.path.isdir(os.path.join(root, 'Default')):
        found.append([root, os.path.getmtime(prefs) if os.path.exists(prefs) else 0.0])
print(json.dumps({'home': home, 'found': found}))
"""


async def profile_root(client: ChromeGuest) -> str:
    """The browser's user-data folder on the desktop (it holds `Default/` and
    `Local State`); Google Chrome's default path when no profile exists yet."""
    result = await client.execute(["python3", "-c", _PROFILE_PROBE], timeout=30.0)
    try:
        data = json.loads(result.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise GuestError(f"could not locate Chrome's profile on the desktop: {result}") from None
    found = sorted(data["found"], key=lambda item: -item[1])  # stable: chrome first on ties
    if found:
        return str(found[0][0])
    return f"{data['home']}/.config/google-chrome"


async def read_profile_file(client: ChromeGuest, relative: str) -> bytes | None:
    """A file under the profile root (e.g. `Default/Preferences`), None if missing."""
    root = await profile_root(client)
    return await client.get_file(f"{root}/{relative}")


async def read_profile_json(client: ChromeGuest, relative: str) -> dict[str, Any] | None:
    data = await read_profile_file(client, relative)
    if data is None:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        log.warning("Chrome profile file %s is not JSON", relative)
        return None
    return value if isinstance(value, dict) else None
