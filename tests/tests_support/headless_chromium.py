"""A headless Chromium started by a test: waiting for its DevTools endpoint, and
stopping it the way that makes it write its profile (cookies, history) first."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

import aiohttp
import pytest


def wait_for_devtools(port: int, proc: subprocess.Popen[bytes], deadline_s: float) -> None:
    """Return once `port` answers /json/version; fail the test when `proc` exits or
    `deadline_s` passes first."""

    async def poll() -> None:
        end = asyncio.get_running_loop().time() + deadline_s
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/json/version") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if proc.poll() is not None or asyncio.get_running_loop().time() > end:
                    pytest.fail(f"Chromium DevTools not ready (exit status {proc.poll()})")
                await asyncio.sleep(0.1)

    asyncio.run(poll())


def _close_over_cdp(port: int) -> None:
    """Browser.close over DevTools: headless Chromium's orderly shutdown, the one that
    writes the cookie store (SIGTERM makes headless Chromium exit without flushing it)."""

    async def close() -> None:
        limit = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=limit) as http:
            async with http.get(f"http://127.0.0.1:{port}/json/version") as resp:
                ws_url = (await resp.json(content_type=None))["webSocketDebuggerUrl"]
            async with http.ws_connect(ws_url) as ws:
                await ws.send_json({"id": 1, "method": "Browser.close"})
                with contextlib.suppress(Exception):
                    await ws.receive(timeout=10)

    # Its own thread and loop: callers may be sync fixtures or async tests (where
    # asyncio.run would refuse to start and the browser would lose its cookies).
    with ThreadPoolExecutor(1) as thread, contextlib.suppress(Exception):
        thread.submit(asyncio.run, close()).result()  # already gone: signals do the rest


def stop_chromium(proc: subprocess.Popen[bytes]) -> None:
    """Close Chromium so it writes its cookies and history (Browser.close, then
    SIGTERM, then SIGKILL), then kill whatever is left of its process group."""
    if proc.poll() is None:
        _close_over_cdp(getattr(proc, "cdp_port", 0))
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # stray helpers of the browser's session
