"""Serve an aiohttp test app on 127.0.0.1 at a free port (the network rule: tests
talk to loopback only)."""

from __future__ import annotations

from aiohttp import web


async def start_on_loopback(app: web.Application) -> tuple[web.AppRunner, str]:
    """Start `app`; its runner (to clean up) and base URL."""
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"
