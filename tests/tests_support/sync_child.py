"""A child process for the shutdown tests: a run (under `run_stoppable`, as `cua-rl
train` runs) that is in the middle of a collective weight sync to a replica that
accepted the request but never joins the link, so the gloo sender thread is blocked
for the sync's whole deadline. Prints `syncing` once the sender is waiting.

Usage: python -m tests_support.sync_child
"""

from __future__ import annotations

import asyncio
import faulthandler
import signal
import tempfile
from pathlib import Path

import torch
from aiohttp import web

from cua_rl.learner.config import WeightSyncConfig
from cua_rl.learner.weight_sync import WeightSync
from cua_rl.runtime.stoppable import run_stoppable


class _Source:
    def __init__(self) -> None:
        self.layer = torch.nn.Linear(4, 4)

    def named_parameters(self):
        return self.layer.named_parameters()

    def export_weights(self, path: Path) -> Path:
        raise AssertionError("collective mode does not export")


async def _main() -> None:
    accepted = asyncio.Event()

    async def update_weights(_request: web.Request) -> web.Response:
        accepted.set()
        await asyncio.sleep(3600)  # a replica stuck in the update
        return web.json_response({"version": 1})

    async def health(_request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "version": 0})

    app = web.Application()
    app.router.add_post("/update_weights", update_weights)
    app.router.add_get("/health", health)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    sync = WeightSync(
        [url], WeightSyncConfig(timeout_s=600), Path(tempfile.mkdtemp(prefix="sync-child-"))
    )
    push = asyncio.create_task(sync.push(_Source(), 1))
    try:
        await accepted.wait()
        print("syncing", flush=True)
        await push
    finally:
        push.cancel()
        await sync.close()
        await runner.cleanup()


if __name__ == "__main__":
    # SIGUSR1 dumps every thread's stack to stderr: the test asks for it before it
    # kills a child that did not stop, so a hang says where it hung.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # Ctrl-C as a terminal gives it: a pytest process can hand its children SIGINT
    # ignored (an earlier test or a background launch left SIG_IGN, which POSIX keeps
    # across exec), and then Python installs no KeyboardInterrupt handler at all.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    run_stoppable(_main())
