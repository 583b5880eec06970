"""A client for OSWorld's guest protocol, written from what OSWorld's server does.

OSWorld's host controller talks to desktop_env/server/main.py with `requests`:
JSON bodies for most routes, form fields for /file and /window_size, a multipart
form for /setup/upload, and it reads the raw body of /screenshot, /file,
/wallpaper and /end_recording. This client sends the same shapes (through
aiohttp) so the tests check our guest against the protocol, not against our own
host client. Each call returns (status, body bytes, headers).
"""

from __future__ import annotations

import ssl
from typing import Any

import aiohttp
from multidict import CIMultiDictProxy

Reply = tuple[int, bytes, CIMultiDictProxy[str]]


class OSWorldProtocol:
    """Every route of OSWorld's server (26) plus nothing of ours."""

    def __init__(
        self, url: str, token: str | None, *, ssl_context: ssl.SSLContext | bool | None = None
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._session = aiohttp.ClientSession(
            base_url=url, headers=headers, timeout=aiohttp.ClientTimeout(total=120)
        )
        self._ssl = ssl_context

    async def close(self) -> None:
        await self._session.close()

    async def __aenter__(self) -> OSWorldProtocol:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def call(self, method: str, route: str, **kwargs: Any) -> Reply:
        if self._ssl is not None:
            kwargs.setdefault("ssl", self._ssl)
        async with self._session.request(method, route, **kwargs) as response:
            return response.status, await response.read(), response.headers

    # observation (GET) -------------------------------------------------------
    async def screenshot(self) -> Reply:
        return await self.call("GET", "/screenshot")

    async def accessibility(self) -> Reply:
        return await self.call("GET", "/accessibility")

    async def terminal(self) -> Reply:
        return await self.call("GET", "/terminal")

    async def platform(self) -> Reply:
        return await self.call("GET", "/platform")

    async def cursor_position(self) -> Reply:
        return await self.call("GET", "/cursor_position")

    # observation (POST) ------------------------------------------------------
    async def screen_size(self) -> Reply:
        return await self.call("POST", "/screen_size")

    async def window_size(self, app_class_name: str) -> Reply:
        return await self.call("POST", "/window_size", data={"app_class_name": app_class_name})

    async def desktop_path(self) -> Reply:
        return await self.call("POST", "/desktop_path")

    async def wallpaper(self) -> Reply:
        return await self.call("POST", "/wallpaper")

    async def list_directory(self, path: str) -> Reply:
        return await self.call("POST", "/list_directory", json={"path": path})

    async def file(self, file_path: str) -> Reply:
        return await self.call("POST", "/file", data={"file_path": file_path})

    # commands ------------------------------------------------------------------
    async def execute(self, command: list[str] | str, shell: bool = False) -> Reply:
        return await self.call("POST", "/execute", json={"command": command, "shell": shell})

    async def setup_execute(self, command: list[str] | str, shell: bool = False) -> Reply:
        return await self.call("POST", "/setup/execute", json={"command": command, "shell": shell})

    async def setup_execute_with_verification(
        self, command: list[str], verification: dict
    ) -> Reply:
        return await self.call(
            "POST",
            "/setup/execute_with_verification",
            json={
                "command": command,
                "shell": False,
                "verification": verification,
                "max_wait_time": 5,
                "check_interval": 0.2,
            },
        )

    async def execute_with_verification(self, command: list[str], verification: dict) -> Reply:
        return await self.call(
            "POST",
            "/execute_with_verification",
            json={
                "command": command,
                "shell": False,
                "verification": verification,
                "max_wait_time": 5,
                "check_interval": 0.2,
            },
        )

    async def run_python(self, code: str) -> Reply:
        return await self.call("POST", "/run_python", json={"code": code})

    async def run_bash_script(self, script: str) -> Reply:
        return await self.call("POST", "/run_bash_script", json={"script": script, "timeout": 30})

    # setup -------------------------------------------------------------------
    async def launch(self, command: list[str] | str, shell: bool = False) -> Reply:
        return await self.call("POST", "/setup/launch", json={"command": command, "shell": shell})

    async def open_file(self, path: str) -> Reply:
        return await self.call("POST", "/setup/open_file", json={"path": path})

    async def upload(self, file_path: str, data: bytes) -> Reply:
        form = aiohttp.FormData()
        form.add_field("file_path", file_path)
        form.add_field(
            "file_data", data, filename="upload", content_type="application/octet-stream"
        )
        return await self.call("POST", "/setup/upload", data=form)

    async def download_file(self, url: str, path: str) -> Reply:
        return await self.call("POST", "/setup/download_file", json={"url": url, "path": path})

    async def change_wallpaper(self, path: str) -> Reply:
        return await self.call("POST", "/setup/change_wallpaper", json={"path": path})

    async def activate_window(self, window_name: str) -> Reply:
        return await self.call(
            "POST",
            "/setup/activate_window",
            json={"window_name": window_name, "strict": False, "by_class": False},
        )

    async def close_window(self, window_name: str) -> Reply:
        return await self.call(
            "POST",
            "/setup/close_window",
            json={"window_name": window_name, "strict": False, "by_class": False},
        )

    # recording -----------------------------------------------------------------
    async def start_recording(self) -> Reply:
        return await self.call("POST", "/start_recording")

    async def end_recording(self) -> Reply:
        return await self.call("POST", "/end_recording")
