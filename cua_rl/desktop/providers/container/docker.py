"""The `docker` provider: OSWorld desktops as QEMU-in-docker containers.

Each desktop is one container of OSWorld's `happysixd/osworld-docker` image with
the OSWorld qcow2 bind-mounted read-only; QEMU writes to an overlay inside the
container, so removing the container discards every change. Hence:
- reset = remove the container and run a new one (the guest URL may change,
  because the engine picks fresh host ports);
- the container itself is the state: its labels carry the desktop id, so any
  later process lists and stops desktops with `docker ps`, no state files.
We talk to the engine through the `docker` CLI (no SDK dependency).
"""

from __future__ import annotations

import asyncio
import logging
import re

from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.container.docker_config import DockerProviderConfig
from cua_rl.desktop.providers.container.engine import EngineDesktops
from cua_rl.desktop.providers.local.state import check_desktop_id
from cua_rl.desktop.providers.vm_host import require_image, run_command, use_kvm
from cua_rl.errors import DesktopError

log = logging.getLogger(__name__)

LABEL = "cua-rl.desktop"
GUEST_PORT, VNC_PORT, CDP_PORT, VLC_PORT = 5000, 8006, 9222, 8080
PUBLISHED = (GUEST_PORT, VNC_PORT, CDP_PORT, VLC_PORT)
DOCKER_HINT = (
    "install Docker Engine (https://docs.docker.com/engine/install/) or use "
    "provider `qemu` (QEMU directly) or `local`"
)
_PORT_RE = re.compile(r"(?:(?P<host>[\d.]+|\[[0-9a-f:]*\]|::):)?(?P<hp>\d+)->(?P<cp>\d+)/tcp")


def parse_ports(text: str) -> dict[int, int]:
    """Container port -> host port from `docker port NAME` or the Ports column of
    `docker ps` ("127.0.0.1:49153->5000/tcp, ..."); IPv6 duplicates collapse."""
    ports: dict[int, int] = {}
    for line in text.replace(",", "\n").splitlines():
        line = line.strip()
        if " -> " in line:  # `docker port`: "5000/tcp -> 127.0.0.1:49153"
            container, _, host = line.partition(" -> ")
            if container.endswith("/tcp"):
                ports.setdefault(int(container[:-4]), int(host.rsplit(":", 1)[1]))
            continue
        match = _PORT_RE.search(line)
        if match:
            ports.setdefault(int(match["cp"]), int(match["hp"]))
    return ports


class DockerProvider(EngineDesktops):
    """Runs one OSWorld container per desktop; see the module docstring."""

    type = "docker"
    engine = "docker"
    engine_hint = DOCKER_HINT
    log_lines = 60
    orphans = (
        "a container outlives the run that started it (OSWorld's image runs no "
        "watcher of ours); `cua-rl vm down --provider docker --all` removes them "
        "by their label"
    )
    cannot_fork = (
        "the OSWorld image's own entrypoint runs its QEMU (no monitor of ours to "
        "save it, no way to start a container's QEMU with -incoming); a fork of it "
        "needs KVM and the 23 GB image to be proven on, which this project's "
        "machines lack: use provider `qemu` on the same image to fork, else groups "
        "set up per rollout"
    )

    def __init__(self, config: DockerProviderConfig | None = None) -> None:
        self.config = config or DockerProviderConfig()
        super().__init__(self.config.name_prefix, self.config.command_timeout_s)
        self._checked = False

    # what differs from other providers ----------------------------------------

    async def start(self, desktop_id: str) -> DesktopHandle:
        check_desktop_id(desktop_id)
        image = require_image(self.config.image, self.type)
        await self._check_engine()
        name = self.container_name(desktop_id)
        state = await self._state(name)
        if state == "running":
            raise DesktopError(f"desktop {desktop_id!r} is already running (container {name})")
        if state is not None:  # an exited leftover of an earlier process: start clean
            await self._remove(name)
        return await self._launch(desktop_id, str(image))

    async def _reset(self, handle: DesktopHandle) -> DesktopHandle:
        """Recreate the container: the read-only base + a fresh overlay is the
        initial state (OSWorld's docker provider reverts the same way)."""
        image = require_image(self.config.image, self.type)
        await self._remove(self.container_name(handle.id))
        return await self._launch(handle.id, str(image))

    async def stop(self, handle: DesktopHandle) -> None:
        await self._clients.drop(handle.id)
        await self._remove(self.container_name(handle.id))

    async def list(self) -> list[DesktopHandle]:
        fmt = f'{{{{.Label "{LABEL}"}}}}\t{{{{.Names}}}}\t{{{{.State}}}}\t{{{{.Ports}}}}'
        result = await self._cli("ps", "-a", "--filter", f"label={LABEL}", "--format", fmt)
        if not result.ok:
            raise DesktopError(f"docker provider: {result.describe()}")
        handles = []
        for line in result.stdout.splitlines():
            desktop_id, name, state, ports = (line.split("\t") + ["", "", "", ""])[:4]
            if desktop_id and name == self.container_name(desktop_id):
                handles.append(self._handle(desktop_id, parse_ports(ports), state))
        return sorted(handles, key=lambda h: h.id)

    def run_argv(self, desktop_id: str, image: str, kvm: bool) -> list[str]:
        """The `docker run` command line of one desktop (a pure function, tested)."""
        cfg = self.config
        argv = [
            "docker",
            "run",
            "--detach",
            "--name",
            self.container_name(desktop_id),
            "--label",
            f"{LABEL}={desktop_id}",
            "--pull",
            cfg.pull,
            "--cap-add",
            "NET_ADMIN",
            "-e",
            f"RAM_SIZE={cfg.ram}",
            "-e",
            f"CPU_CORES={cfg.cpus}",
            "-e",
            f"DISK_SIZE={cfg.disk_size}",
        ]
        argv += ["--device", "/dev/kvm"] if kvm else ["-e", "KVM=N"]
        argv += ["-v", f"{image}:/System.qcow2:ro"]
        for port in PUBLISHED:  # empty host port: the engine picks a free one atomically
            argv += ["-p", f"{cfg.host}::{port}"]
        return [*argv, *cfg.extra_args, cfg.docker_image]

    # internals ----------------------------------------------------------------

    async def _check_engine(self) -> None:
        """Fail early with the engine's own words when the CLI cannot reach a daemon."""
        if self._checked:
            return
        result = await self._cli("version", "--format", "{{.Server.Version}}")
        if not result.ok:
            raise DesktopError(
                f"docker provider: the Docker engine is not reachable "
                f"({result.describe()}); start dockerd or fix DOCKER_HOST"
            )
        self._checked = True

    async def _launch(self, desktop_id: str, image: str) -> DesktopHandle:
        """`docker run`, read the published ports, wait for the guest; on any
        failure remove the container, so a failed start leaves nothing behind."""
        name = self.container_name(desktop_id)
        kvm = use_kvm(self.config.kvm, self.type)
        argv = self.run_argv(desktop_id, image, kvm)
        timeout = (
            self.config.command_timeout_s
            if self.config.pull == "never"
            else self.config.pull_timeout_s
        )
        try:
            result = await run_command(argv, timeout=timeout, hint=DOCKER_HINT)
            if not result.ok:
                raise DesktopError(
                    f"docker provider: cannot start {desktop_id!r}: {result.describe()}"
                )
            ports = await self._published(name)
            handle = self._handle(desktop_id, ports, "running", kvm=kvm)
            await self._container_ready(
                handle,
                timeout_s=self.config.ready_timeout_s,
                interval_s=0.5,
                every_s=self.config.state_poll_s,
            )
        except BaseException:
            await asyncio.shield(self._remove(name))
            raise
        return handle

    async def _published(self, name: str) -> dict[int, int]:
        result = await self._cli("port", name)
        ports = parse_ports(result.stdout) if result.ok else {}
        if GUEST_PORT not in ports:
            raise DesktopError(
                f"docker provider: container {name} publishes no host port "
                f"for the guest port {GUEST_PORT} (`docker port`: "
                f"{(result.stdout + result.stderr).strip()!r})"
            )
        return ports

    def _handle(
        self, desktop_id: str, ports: dict[int, int], state: str, kvm: bool | None = None
    ) -> DesktopHandle:
        host = self.config.advertise_host or (
            "127.0.0.1" if self.config.host in ("0.0.0.0", "") else self.config.host
        )
        ram = self.config.ram
        info: dict[str, object] = {
            "container": self.container_name(desktop_id),
            "state": state,
            "alive": state == "running",
            "limits": {
                "cpus": self.config.cpus,
                "memory_mb": int(ram[:-1]) * (1024 if ram.endswith("G") else 1),
            },
        }
        if VNC_PORT in ports:
            info["vnc_url"] = f"http://{host}:{ports[VNC_PORT]}"
        if CDP_PORT in ports:
            info["cdp_port"] = ports[CDP_PORT]
        if VLC_PORT in ports:
            info["vlc_port"] = ports[VLC_PORT]
        if kvm is not None:
            info["kvm"] = kvm
        url = f"http://{host}:{ports[GUEST_PORT]}" if GUEST_PORT in ports else ""
        return DesktopHandle(id=desktop_id, url=url, token=None, provider=self.type, info=info)
