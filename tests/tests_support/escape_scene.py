"""The scene of the escape suite (tests/integration/desktop/test_sandbox_escapes.py):
two desktops of one provider (A is the agent's, B its neighbour) and, on the host,
what A must not reach: a marker variable in the launcher's environment, a file in
/root, the checkout, the state dir with B's token, and a stand-in model server on
127.0.0.1 that records the requests reaching it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from aiohttp import web

import cua_rl
from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider
from cua_rl.desktop.providers.container.config import ContainerProviderConfig
from cua_rl.desktop.providers.container.provider import ContainerProvider
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.provider import LocalProvider
from cua_rl.desktop.providers.qemu.config import QemuProviderConfig
from cua_rl.desktop.providers.qemu.provider import QemuProvider
from tests_support.desktops import local_desktops_unavailable

CHECKOUT = Path(cua_rl.__file__).resolve().parent.parent


MARKER_VAR = "CUA_RL_ESCAPE_MARKER"


def _local(request: pytest.FixtureRequest, state_dir: Path) -> DesktopProvider:
    if (reason := local_desktops_unavailable()) is not None:
        pytest.skip(reason)
    return LocalProvider(LocalProviderConfig(state_dir=state_dir, width=800, height=600))


def _container(request: pytest.FixtureRequest, state_dir: Path) -> DesktopProvider:
    """Containers of the session's minimal image (engine and image shared with
    test_container_provider.py: built once, cached by content hash)."""
    image = request.getfixturevalue("minimal_docker_image")
    provider = ContainerProvider(
        ContainerProviderConfig(
            image=image,
            state_dir=state_dir,
            engine="docker",
            width=800,
            height=600,
            name_prefix=f"cua-rl-escape-{os.getpid()}-",
        )
    )
    provider.owner_pid = os.getpid()  # a killed test run takes its containers with it
    return provider


QEMU_OPT_OUT = "CUA_RL_ESCAPE_QEMU"
"""Set to 0 to leave qemu desktops out (two VM boots: about a minute under TCG on an
idle machine, several on a loaded one)."""


def _qemu(request: pytest.FixtureRequest, state_dir: Path) -> DesktopProvider:
    """VMs of the session's minimal qcow2 (the image test's build, cached by hash)."""
    if os.environ.get(QEMU_OPT_OUT) == "0":
        pytest.skip(
            f"qemu: left out by {QEMU_OPT_OUT}=0 (two VM boots under TCG); "
            "docs/sandbox.md says what each provider shares"
        )
    image = request.getfixturevalue("minimal_qcow2_image")
    return QemuProvider(
        QemuProviderConfig(
            image=image,
            state_dir=state_dir,
            memory_mb=1024,
            cpus=1,
            vnc=False,
            ready_timeout_s=900,
            firmware=None,
        )
    )


PROVIDERS: dict[str, Callable[[pytest.FixtureRequest, Path], DesktopProvider]] = {
    "local": _local,
    "container": _container,
    "qemu": _qemu,
}
"""Provider name -> factory of a provider keeping its state under the given dir."""


@dataclass
class Scene:
    """What the agent (desktop A) tries to reach, and how to check from the host."""

    provider: DesktopProvider
    a: DesktopHandle
    b: DesktopHandle
    agent: GuestClient
    state_dir: Path
    marker: str
    root_file: Path
    model_port: int
    model_hits: list[str] = field(default_factory=list)

    async def run(self, script: str) -> tuple[int | None, str]:
        """Run a shell script as the agent; (exit status, stdout + stderr)."""
        result = await self.agent.execute(script, shell=True, timeout=60)
        return result.returncode, (result.output or "") + (result.error or "")


async def _model_server(hits: list[str]) -> tuple[web.AppRunner, int]:
    """A stand-in for a model server on host loopback (no credential, like ours)."""

    async def record(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


@contextlib.asynccontextmanager
async def open_scene(
    request: pytest.FixtureRequest, provider_name: str, state_dir: Path
) -> AsyncIterator[Scene]:
    """Start the scene on `provider_name`'s desktops (may skip before changing
    anything); everything is stopped, restored and removed on exit."""
    provider = PROVIDERS[provider_name](request, state_dir)
    marker = f"marker-{secrets.token_hex(8)}"
    root_file = Path("/root") / f".cua-escape-{secrets.token_hex(4)}"
    root_file.write_text(marker)
    hits: list[str] = []
    runner, port = await _model_server(hits)
    old = os.environ.get(MARKER_VAR)
    os.environ[MARKER_VAR] = marker  # the launching shell's environment
    try:
        a, b = await asyncio.gather(provider.start("agent-a"), provider.start("neighbour-b"))
        yield Scene(provider, a, b, provider.client(a), state_dir, marker, root_file, port, hits)
    finally:
        if old is None:
            os.environ.pop(MARKER_VAR, None)
        else:
            os.environ[MARKER_VAR] = old
        for handle in await provider.list():
            await provider.stop(handle)
        await provider.close()
        await runner.cleanup()
        root_file.unlink(missing_ok=True)
