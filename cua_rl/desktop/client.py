"""Async client for the guest protocol (docs/architecture.md, guest protocol).

It speaks OSWorld's guest HTTP protocol, so it drives both our own guest server
(vm/guest, with a bearer token and the fast /act route) and an unmodified
OSWorld image. Every call has a timeout; a desktop that does not answer raises
`GuestUnavailable`, which the pool and the actors treat as a dead desktop.

A guest on a network serves HTTPS (docs/guest-protocol.md): give either the
SHA-256 fingerprint of its certificate (`tls_fingerprint`, what the guest prints
at start; the certificate may be self-signed) or a CA file (`ca_file`).

No body is read unbounded: each route's answer has a cap by kind (`guest_response_caps`);
an answer over its cap, of the wrong kind or malformed raises `GuestError` with
one line, which aborts that episode as a corrupt screenshot does.

What a command run on the desktop returns (`ExecResult`) is in exec_result.py; this
module talks to the guest.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Literal

import aiohttp

from cua_rl.desktop.exec_result import ExecResult
from cua_rl.desktop.guest_response_caps import (
    DEFAULT_CAPS,
    BodyCaps,
    BodyKind,
    check_image,
    error_text,
    ints,
    loads_or_none,
    parse_json,
    read_capped,
    stream_capped,
)
from cua_rl.desktop.guest_tls import tls_settings
from cua_rl.desktop.server_timing import server_timing
from cua_rl.errors import GuestError, GuestUnavailable

ImageFormat = Literal["png", "jpeg"]


# pyautogui code sent through /execute when a guest has no /act route; OSWorld's
# own harness runs actions the same way.
_FALLBACK_PRELUDE = "import pyautogui, time; pyautogui.FAILSAFE = False; "


class GuestClient:
    """One desktop's guest server, seen from the host.

    Reuse one client per desktop: it keeps a connection pool open. `has_act`
    is learned on the first action so OSWorld guests cost one extra 404 once.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        session: aiohttp.ClientSession | None = None,
        tls_fingerprint: str | None = None,
        ca_file: str | None = None,
        caps: BodyCaps = DEFAULT_CAPS,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.cdp_port: int | None = None
        """Host port forwarded to the desktop's Chromium DevTools port 9222, when its
        provider forwards one (local and docker desktops); set by `GuestClients`."""
        self.timeout = timeout
        self._session = session
        self._owns_session = session is None
        self._ssl = tls_settings(self.url, tls_fingerprint, ca_file)
        self.has_act: bool | None = None
        self.caps = caps
        self.server_timing: dict[str, float] = {}
        """The last screenshot's `Server-Timing` from our guest (grab and encode in ms,
        and the JPEG encoder as `encoder_<name>: 0`); empty from guests without it."""

    async def __aenter__(self) -> GuestClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None and self._owns_session:
            await self._session.close()
        self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            self._session = aiohttp.ClientSession(
                headers=headers, connector=aiohttp.TCPConnector(limit=8)
            )
            self._owns_session = True
        return self._session

    async def _request(
        self,
        method: str,
        route: str,
        *,
        timeout: float | None = None,
        ok_statuses: tuple[int, ...] = (200,),
        kind: BodyKind = "json",
        **kwargs: Any,
    ) -> tuple[int, bytes, str]:
        """Send one request; return (status, body, content type).

        Raises GuestUnavailable when the desktop does not answer and GuestError
        when it answers with a status outside `ok_statuses` or a body over the
        cap of its `kind` (an error status: the `error` cap).
        """
        limit = aiohttp.ClientTimeout(total=timeout or self.timeout)
        what = f"{method} {self.url}{route}"
        try:
            async with self._http().request(
                method, self.url + route, timeout=limit, ssl=self._ssl, **kwargs
            ) as resp:
                ok = resp.status in ok_statuses
                body = await read_capped(
                    resp, self.caps.of(kind if ok else "error"), what, truncate=not ok
                )
                ctype = resp.headers.get("Content-Type", "")
                if route == "/screenshot":
                    self.server_timing = server_timing(resp.headers)
        except aiohttp.ServerFingerprintMismatch as exc:
            raise GuestError(
                f"{method} {self.url}{route}: the guest's TLS certificate is not the pinned one "
                f"(got sha256 {exc.got.hex()})"
            ) from None
        except (TimeoutError, aiohttp.ClientConnectionError, OSError) as exc:
            raise GuestUnavailable(f"{what}: no answer ({exc!r})") from exc
        except aiohttp.ClientPayloadError as exc:
            raise GuestError(f"{what}: malformed answer ({exc})") from None
        if resp.status not in ok_statuses:
            raise GuestError(f"{method} {self.url}{route}: HTTP {resp.status}: {error_text(body)}")
        return resp.status, body, ctype

    async def status_of(
        self, method: str, route: str, *, ok_statuses: tuple[int, ...], **kwargs: Any
    ) -> int:
        """The status of one request whose answer only matters by its status (a
        conformance check counts 401/403 as success), through the same path as every
        other request: caps, TLS pin, GuestError outside `ok_statuses`."""
        status, _, _ = await self._request(method, route, ok_statuses=ok_statuses, **kwargs)
        return status

    async def _json(
        self, method: str, route: str, *, expect: type | tuple[type, ...] = dict, **kwargs: Any
    ) -> Any:
        """The answer parsed as JSON of type `expect`, else GuestError (one line)."""
        _, body, _ = await self._request(method, route, **kwargs)
        return parse_json(body, f"{method} {self.url}{route}", expect)

    # readiness -----------------------------------------------------------------

    async def healthy(self, timeout: float = 3.0) -> bool:
        """True when the guest answers; OSWorld guests lack /healthz, so
        /platform stands in for them."""
        for route in ("/healthz", "/platform"):
            try:
                status, _, _ = await self._request(
                    "GET", route, timeout=timeout, ok_statuses=(200, 404)
                )
            except GuestError:
                return False
            except GuestUnavailable:
                return False
            if status == 200:
                return True
        return False

    async def wait_ready(self, deadline_s: float = 60.0, interval_s: float = 0.05) -> None:
        """Poll until the guest answers, with a deadline (never a fixed sleep)."""
        end = time.monotonic() + deadline_s
        while True:
            if await self.healthy(timeout=min(3.0, max(0.2, end - time.monotonic()))):
                return
            if time.monotonic() >= end:
                raise GuestUnavailable(f"{self.url}: not ready within {deadline_s:.0f} s")
            await asyncio.sleep(interval_s)

    # observation ---------------------------------------------------------------

    async def screenshot(
        self, fmt: ImageFormat = "png", quality: int = 90, encoder: str | None = None
    ) -> bytes:
        """The screen as image bytes. OSWorld guests ignore the format and send PNG;
        callers that care read the magic bytes. `encoder` (`turbo` or `pillow`, ours
        only) picks our guest's JPEG encoder; None: the guest's default."""
        params = {"format": fmt, "quality": str(quality)}
        if encoder is not None:
            params["encoder"] = encoder
        _, body, _ = await self._request("GET", "/screenshot", params=params, kind="image")
        return check_image(body, f"GET {self.url}/screenshot")

    async def cursor_position(self) -> tuple[int, int]:
        data = await self._json("GET", "/cursor_position", expect=(dict, list))
        if isinstance(data, dict):
            data = [data.get("x"), data.get("y")]
        return ints(data, 2, f"GET {self.url}/cursor_position")

    async def screen_size(self) -> tuple[int, int]:
        data = await self._json("POST", "/screen_size")
        return ints([data.get("width"), data.get("height")], 2, f"POST {self.url}/screen_size")

    async def window_size(self, app_class_name: str) -> dict[str, int] | None:
        _, body, _ = await self._request(
            "POST", "/window_size", json={"app_class_name": app_class_name}, ok_statuses=(200, 404)
        )
        data = loads_or_none(body)
        return data if isinstance(data, dict) and "width" in data else None

    async def accessibility_tree(self) -> str | None:
        data = await self._json("GET", "/accessibility", timeout=max(self.timeout, 60.0))
        return data.get("AT")

    async def terminal_output(self) -> str | None:
        data = await self._json("GET", "/terminal")
        return data.get("output")

    async def list_directory(self, path: str) -> dict[str, Any]:
        return await self._json("POST", "/list_directory", json={"path": path})

    async def desktop_path(self) -> str:
        data = await self._json("POST", "/desktop_path")
        return str(data.get("desktop_path", ""))

    async def wallpaper(self) -> bytes | None:
        status, body, _ = await self._request(
            "POST", "/wallpaper", ok_statuses=(200, 404), kind="image"
        )
        return body if status == 200 else None

    async def platform(self) -> str:
        _, body, _ = await self._request("GET", "/platform", kind="text")
        return body.decode(errors="replace").strip()

    async def get_file(self, path: str) -> bytes | None:
        """File contents, or None when it does not exist on the desktop."""
        status, body, _ = await self._request(
            "POST", "/file", data={"file_path": path}, ok_statuses=(200, 404), kind="file"
        )
        return body if status == 200 else None

    async def save_file(self, path: str, dest: Path, timeout: float = 600.0) -> bool:
        """Stream the desktop's file `path` to `dest` on the host, at most the `file`
        cap (the host holds one chunk at a time); False when it does not exist.
        Over the cap, the partial copy is removed and GuestError raised."""
        what = f"POST {self.url}/file"
        limit = aiohttp.ClientTimeout(total=timeout)
        try:
            async with self._http().post(
                self.url + "/file", data={"file_path": path}, timeout=limit, ssl=self._ssl
            ) as resp:
                if resp.status == 404:
                    return False
                if resp.status != 200:
                    body = await read_capped(resp, self.caps.error, what, truncate=True)
                    raise GuestError(f"{what}: HTTP {resp.status}: {error_text(body)}")
                await stream_capped(resp, dest, self.caps.file, what)
                return True
        except (TimeoutError, aiohttp.ClientConnectionError, OSError) as exc:
            raise GuestUnavailable(f"{what}: no answer ({exc!r})") from exc

    # actions -------------------------------------------------------------------

    async def act(self, code: str, timeout: float = 10.0) -> ExecResult:
        """Run pyautogui code; /act on our guest, /execute + python -c elsewhere."""
        if self.has_act is not False:
            status, body, _ = await self._request(
                "POST",
                "/act",
                json={"code": code, "timeout": timeout},
                timeout=timeout + 5.0,
                ok_statuses=(200, 404, 405),
            )
            if status == 200:
                self.has_act = True
                return ExecResult.from_json(parse_json(body, f"POST {self.url}/act", dict))
            self.has_act = False
        return await self.execute(["python3", "-c", _FALLBACK_PRELUDE + code], timeout=timeout)

    async def execute(
        self, command: list[str] | str, *, shell: bool = False, timeout: float = 120.0
    ) -> ExecResult:
        data = await self._json(
            "POST",
            "/execute",
            json={"command": command, "shell": shell, "timeout": timeout},
            timeout=timeout + 5.0,
        )
        return ExecResult.from_json(data)

    async def execute_with_verification(
        self,
        command: list[str] | str,
        *,
        shell: bool = False,
        verification: dict[str, Any] | None = None,
        max_wait_time: float = 10.0,
        check_interval: float = 1.0,
    ) -> ExecResult:
        data = await self._json(
            "POST",
            "/execute_with_verification",
            json={
                "command": command,
                "shell": shell,
                "verification": verification or {},
                "max_wait_time": max_wait_time,
                "check_interval": check_interval,
            },
            timeout=max_wait_time + 30.0,
        )
        return ExecResult.from_json(data)

    # setup routes --------------------------------------------------------------

    async def upload_file(self, path: str, data: bytes) -> None:
        form = aiohttp.FormData()
        form.add_field("file_path", path)
        form.add_field("file_data", data, filename=path.rsplit("/", 1)[-1])
        await self._request("POST", "/setup/upload", data=form, timeout=max(self.timeout, 120.0))

    async def launch(self, command: list[str] | str, *, shell: bool = False) -> None:
        await self._request("POST", "/setup/launch", json={"command": command, "shell": shell})

    async def open_file(self, path: str, timeout: float = 90.0) -> None:
        await self._request("POST", "/setup/open_file", json={"path": path}, timeout=timeout)

    async def activate_window(
        self, window_name: str, *, strict: bool = False, by_class: bool = False
    ) -> None:
        await self._request(
            "POST",
            "/setup/activate_window",
            json={"window_name": window_name, "strict": strict, "by_class": by_class},
        )

    async def close_window(
        self, window_name: str, *, strict: bool = False, by_class: bool = False
    ) -> bool:
        """Close the matching window; False when none matches (the guest's 404)."""
        status, _, _ = await self._request(
            "POST",
            "/setup/close_window",
            json={"window_name": window_name, "strict": strict, "by_class": by_class},
            ok_statuses=(200, 404),
        )
        return status == 200

    async def change_wallpaper(self, path: str) -> None:
        await self._request("POST", "/setup/change_wallpaper", json={"path": path})

    # recording -----------------------------------------------------------------

    async def start_recording(self) -> None:
        """Start an MP4 capture of the screen (one at a time per guest)."""
        await self._request("POST", "/start_recording", timeout=max(self.timeout, 30.0))

    async def end_recording(self, timeout: float = 120.0) -> bytes:
        """Stop the capture and return the MP4 bytes."""
        _, body, _ = await self._request("POST", "/end_recording", timeout=timeout, kind="video")
        if body[4:8] != b"ftyp":
            raise GuestError(f"POST {self.url}/end_recording: expected an MP4, got {body[:40]!r}")
        return body
