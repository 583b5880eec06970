"""Two local providers with one planted defect each, which `check_provider` must catch:
`LeakyLocalProvider` starts a helper process it never binds to its owner (it outlives
the owner's SIGKILL), and `OpenGuestLocalProvider` hands out guest URLs that answer
without the token (a forwarder in front of the guest adds it for anyone).

Everything else is the real local provider; both are importable by module path, so
the check's owner process can rebuild them from their config."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import replace
from typing import Any

import aiohttp
from aiohttp import web

from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.local.provider import LocalProvider
from tests_support.servers import free_port

LEAK_SECONDS = 300
"""How long the leaked helper lives at most (the check kills it once found)."""


class LeakyLocalProvider(LocalProvider):
    """A local provider that also starts a helper in a session of its own for each
    desktop bound to an owner, and forgets to bind the helper too."""

    async def start(self, desktop_id: str) -> DesktopHandle:
        handle = await super().start(desktop_id)
        if self.owner_pid is None:
            return handle
        await asyncio.to_thread(
            subprocess.Popen,
            ["sleep", str(LEAK_SECONDS)],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return handle


class OpenGuestLocalProvider(LocalProvider):
    """A local provider whose handles point at a forwarder that adds the token itself."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._runners: dict[str, web.AppRunner] = {}

    async def _launch(self, desktop_id: str, token: str, **kwargs: Any) -> DesktopHandle:
        handle = await super()._launch(desktop_id, token, **kwargs)
        return await self._open(handle)

    async def _open(self, handle: DesktopHandle) -> DesktopHandle:
        async def forward(request: web.Request) -> web.Response:
            headers = {"Authorization": f"Bearer {handle.token}"}
            if "Content-Type" in request.headers:
                headers["Content-Type"] = request.headers["Content-Type"]
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
                async with http.request(
                    request.method,
                    handle.url + str(request.rel_url),
                    headers=headers,
                    data=await request.read(),
                ) as resp:
                    return web.Response(
                        status=resp.status,
                        body=await resp.read(),
                        headers={"Content-Type": resp.headers.get("Content-Type", "text/plain")},
                    )

        if (old := self._runners.pop(handle.id, None)) is not None:
            await old.cleanup()
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        self._runners[handle.id] = runner
        return replace(handle, url=f"http://127.0.0.1:{port}")

    async def close(self) -> None:
        for runner in self._runners.values():
            await runner.cleanup()
        self._runners.clear()
        await super().close()
