"""The part the container and docker providers share: one engine container per
desktop, driven through the engine's CLI (docker or podman, no SDK), its state and
logs read back from the engine, a start that fails leaving no container behind.

Each provider keeps what differs: its image and `run` command line, what it checks
of the engine first, and where its guest listens (the handle it builds).
"""

from __future__ import annotations

import builtins

from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.core import ProviderCore
from cua_rl.desktop.providers.local.log import sanitize
from cua_rl.desktop.providers.vm_host import CommandResult, run_command
from cua_rl.errors import DesktopError


class EngineDesktops(ProviderCore):
    """Desktops as engine containers named `name_prefix + id`; see the module docstring."""

    engine: str
    """The CLI: `docker` or `podman`."""
    engine_hint: str
    """What to install or start when the CLI or its daemon is missing."""
    log_lines = 40
    """How many of a container's last log lines a failed start quotes."""

    def __init__(self, name_prefix: str, command_timeout_s: float) -> None:
        super().__init__()
        self._name_prefix = name_prefix
        self._timeout_s = command_timeout_s

    def container_name(self, desktop_id: str) -> str:
        return f"{self._name_prefix}{desktop_id}"

    async def _cli(self, *args: str, timeout: float | None = None) -> CommandResult:
        return await run_command(
            [self.engine, *args], hint=self.engine_hint, timeout=timeout or self._timeout_s
        )

    async def _state(self, name: str) -> str | None:
        """`running`, `exited`, ... of the container, or None when there is none."""
        result = await self._cli(
            "inspect", "--type", "container", "--format", "{{.State.Status}}", name
        )
        return (result.stdout.strip() or None) if result.ok else None

    async def _remove(self, name: str) -> None:
        """Remove the container (force-kills it); a missing one is fine."""
        result = await self._cli("rm", "--force", "--volumes", name)
        if not result.ok and "no such container" not in result.stderr.lower():
            raise DesktopError(f"{self.type} provider: {result.describe()}")

    async def _logs(self, name: str) -> str:
        """The container's last log lines, printable only and capped (the desktop's
        own words: docs/sandbox.md, Output), under a header naming the command."""
        result = await self._cli("logs", "--tail", str(self.log_lines), name)
        text = sanitize((result.stdout + result.stderr).strip()[-3000:]) or "(no output)"
        return f"\n--- {self.engine} logs {name} (tail) ---\n{text}"

    async def _running(self, handle: DesktopHandle) -> bool:
        return await self._state(self.container_name(handle.id)) == "running"

    async def remains(self, handle: DesktopHandle) -> builtins.list[str]:
        name = self.container_name(handle.id)
        state = await self._state(name)
        return [] if state is None else [f"container {name} ({state})"]

    async def _container_ready(
        self, handle: DesktopHandle, *, timeout_s: float, interval_s: float, every_s: float
    ) -> None:
        """Poll the guest while watching the container: one that stops first fails
        at once, with its logs; so does a guest that never answers."""
        name = self.container_name(handle.id)

        async def watch() -> None:
            if (state := await self._state(name)) != "running":
                raise DesktopError(
                    f"{self.type} provider: container {name} is "
                    f"{state or 'gone'} before its guest answered"
                    f"{await self._logs(name)}"
                )

        await self._guest_ready(
            handle,
            timeout_s=timeout_s,
            interval_s=interval_s,
            watch=watch,
            every_s=every_s,
            context=lambda: self._logs(name),
        )
