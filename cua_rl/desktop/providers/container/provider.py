"""The `container` provider: desktops as containers of our own image
(`cua-rl image build --format docker`), on docker or podman.

Each desktop is one container with no network at all (`--network none`: its
own network namespace holding only a loopback, so no bridge and no address on
any host network), its session run as the unprivileged `user` with no capabilities,
limits on CPU, memory and processes, and our seccomp profile (`container.seccomp`:
the local desktops' deny list, not the engine's default). The guest listens on a Unix socket in the
desktop's run dir (bind-mounted at /run/cua); a forwarder process on the host
(`container.forward`) serves it on 127.0.0.1:PORT and, for a run's desktops,
removes the container when the run's process dies.
- reset = remove the container and run a new one from the image (home and every
  other change gone); the run dir, port and forwarder stay, so the URL survives;
- the engine is the state: labels carry the desktop id and port, so any later
  process lists desktops with `ps`; the token and the forwarder's pid live in
  the state dir.
- the channel is out of the agent's reach: the run dir is root-owned 0755, the
  container starts as root with CAP_SETUID/CAP_SETGID only, and its init
  (`cua_guest.container_init`) binds guest.sock there, drops to `user` for good
  and hands the socket to the guest as a descriptor; nothing the agent runs can
  rename, replace or create anything where the forwarder looks (the same holds for
  `cdp.sock`, Chromium's DevTools, forwarded to a second port, `cdp_port`, as local
  desktops forward theirs). The host still
  never trusts the dir: its own copy of the token is `<state_dir>/<id>/token`, the
  forwarder refuses a guest.sock that is not a socket
  (`container.forward.connect_no_follow`), and the dir is emptied before every
  container starts.

Starting, checking and stopping a desktop's forwarder process is
container/forwarder_process.py; this module runs the containers.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import shutil
import subprocess
from pathlib import Path

from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.container.config import ContainerProviderConfig
from cua_rl.desktop.providers.container.engine import EngineDesktops
from cua_rl.desktop.providers.container.forwarder_process import (
    forwarder_alive,
    start_forwarder,
    stop_forwarder,
)
from cua_rl.desktop.providers.container.limits import (
    check_host_uid,
    limits_args,
    limits_info,
    mount_run_dir,
    reset_run_dir,
    unmount_run_dir,
)
from cua_rl.desktop.providers.container.seccomp import profile_path, write_profile
from cua_rl.desktop.providers.local import state as st
from cua_rl.errors import DesktopError
from cua_rl.images.recipe import UID, USER

LABEL = "cua-rl.desktop"
PORT_LABEL = "cua-rl.port"
CDP_PORT_LABEL = "cua-rl.cdp-port"
"""The host port forwarded to the desktop's Chromium DevTools (9222 inside)."""
NO_FORKS = (
    "container checkpoints need CRIU (not installed by setup.sh) and, on docker, "
    "an experimental daemon; restoring one into other containers with its X server's "
    "shared memory and the guest's socket in the run dir is not proven here, so "
    "groups set up per rollout"
)
UID_LABEL = "cua-rl.uid"
"""Set by `cua-rl image build` on the image: the uid of its `user` (`recipe.UID`)."""
RUN_DIR_IN_CONTAINER = "/run/cua"
DESKTOP_HOSTNAME = "cua-desktop"
"""As local desktops' (`local.sandbox`) and VMs' (the session script)."""
ENGINE_HINT = (
    "apt-get install docker.io (then start dockerd) or podman, and build the "
    "image with `cua-rl image build --format docker`"
)
FORBIDDEN_ARGS = (
    "--network",
    "--net",
    "-p",
    "--publish",
    "--privileged",
    "--cap-add",
    "--user",
    "-u",
)
"""`extra_args` may not open the sandbox: no network, no privilege, and no other
user (the root init that keeps the channel out of the agent's reach needs `0:0`)."""


def pick_engine(mode: str) -> str:
    if mode != "auto":
        return mode
    return "podman" if shutil.which("podman") else "docker"


class ContainerProvider(EngineDesktops):
    """One container per desktop from our image; see the module docstring."""

    type = "container"
    engine_hint = ENGINE_HINT
    cannot_fork = NO_FORKS

    def __init__(self, config: ContainerProviderConfig | None = None) -> None:
        self.config = config or ContainerProviderConfig()
        self.engine = pick_engine(self.config.engine)
        super().__init__(self.config.name_prefix, self.config.command_timeout_s)
        self.state_dir = Path(self.config.state_dir).expanduser()
        self._forwarders: dict[str, subprocess.Popen] = {}
        self._checked = False

    # what differs from other providers ----------------------------------------

    async def start(self, desktop_id: str) -> DesktopHandle:
        ddir = self.state_dir / st.check_desktop_id(desktop_id)
        await self._check_engine()
        name = self.container_name(desktop_id)
        state = await self._state(name)
        if state == "running":
            raise DesktopError(f"desktop {desktop_id!r} is already running (container {name})")
        await self._remove(name)  # an exited leftover of an earlier process: start clean
        stop_forwarder(ddir, self._forwarders)
        await asyncio.to_thread(_remove_dir, ddir)
        try:
            await asyncio.to_thread(self._prepare, ddir)
            token = st.write_token(ddir / "token")  # the host's copy, out of the desktop's reach
            port, cdp_port = self._port(), self._port()
            await asyncio.to_thread(
                start_forwarder,
                ddir,
                name,
                port,
                cdp_port,
                self.engine,
                self.owner_pid,
                self._forwarders,
            )
            handle = self._handle(desktop_id, port, token, "running", cdp_port)
            await self._launch(handle)
            return handle
        except BaseException:  # nothing of a desktop that never ran is worth keeping
            await asyncio.shield(self._discard(desktop_id))
            raise

    async def _reset(self, handle: DesktopHandle) -> DesktopHandle:
        """A new container from the image: the home and every change are gone."""
        current = await self.get(handle.id)
        await self._remove(self.container_name(handle.id))
        await self._launch(current)
        return current

    async def stop(self, handle: DesktopHandle) -> None:
        await self._discard(handle.id)

    async def _running(self, handle: DesktopHandle) -> bool:
        return await super()._running(handle) and forwarder_alive(self.state_dir / handle.id)

    async def remains(self, handle: DesktopHandle) -> builtins.list[str]:
        """The container, the forwarder that serves its guest on the host, and the
        run dir's tmpfs."""
        ddir = self.state_dir / st.check_desktop_id(handle.id)
        mounted = await asyncio.to_thread(os.path.ismount, ddir / "run")
        return [
            *await super().remains(handle),
            *(["forwarder"] if forwarder_alive(ddir) else []),
            *([f"tmpfs {ddir / 'run'}"] if mounted else []),
        ]

    async def list(self) -> list[DesktopHandle]:
        if not shutil.which(self.engine):
            return []
        fmt = (
            f'{{{{.Label "{LABEL}"}}}}\t{{{{.Label "{PORT_LABEL}"}}}}\t{{{{.Names}}}}'
            f'\t{{{{.State}}}}\t{{{{.Label "{CDP_PORT_LABEL}"}}}}'
        )
        result = await self._cli("ps", "-a", "--filter", f"label={LABEL}", "--format", fmt)
        if not result.ok:
            raise DesktopError(f"container provider: {result.describe()}")
        handles = []
        for line in result.stdout.splitlines():
            desktop_id, port, name, state, cdp = (line.split("\t") + [""] * 5)[:5]
            if desktop_id and name == self.container_name(desktop_id) and port.isdigit():
                token = _read(self.state_dir / desktop_id / "token")
                handles.append(
                    self._handle(
                        desktop_id, int(port), token, state, int(cdp) if cdp.isdigit() else None
                    )
                )
        return sorted(handles, key=lambda h: h.id)

    def run_argv(self, desktop_id: str, port: int, cdp_port: int | None = None) -> list[str]:
        """The `run` command line of one desktop (a pure function, tested); with
        `cdp_port`, the init also binds DevTools' socket (`cdp.sock`) in the run dir."""
        cfg = self.config
        for arg in cfg.extra_args:
            if arg.split("=", 1)[0] in FORBIDDEN_ARGS:
                raise DesktopError(
                    f"container provider: extra_args may not contain {arg!r} "
                    "(desktops have no network, no privileges and their own user)"
                )
        run_dir = self.state_dir / desktop_id / "run"
        return [
            self.engine,
            "run",
            "--detach",
            "--init",
            "--name",
            self.container_name(desktop_id),
            "--label",
            f"{LABEL}={desktop_id}",
            "--label",
            f"{PORT_LABEL}={port}",
            *(
                [
                    "--label",
                    f"{CDP_PORT_LABEL}={cdp_port}",
                    "-e",
                    f"CUA_CDP_LISTEN=unix:{RUN_DIR_IN_CONTAINER}/cdp.sock",
                ]
                if cdp_port is not None
                else []
            ),
            "--network",
            "none",
            # the hostname a local desktop has (its terminal's title, `hostname`)
            "--hostname",
            DESKTOP_HOSTNAME,
            # root only to bind the guest's socket in the root-owned run dir, then
            # `user` for good (cua_guest.container_init): no other capability
            "--user",
            "0:0",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "SETUID",
            "--cap-add",
            "SETGID",
            "--security-opt",
            "no-new-privileges",
            *(["--security-opt", f"seccomp={profile_path(self.state_dir)}"] if cfg.seccomp else []),
            "--ipc",
            "private",
            "--cpus",
            str(cfg.cpus),
            "--shm-size",
            cfg.shm_size,
            *limits_args(cfg.limits, f"/home/{USER}"),
            "-e",
            f"CUA_SCREEN_WIDTH={cfg.width}",
            "-e",
            f"CUA_SCREEN_HEIGHT={cfg.height}",
            "-e",
            f"CUA_GUEST_LISTEN=unix:{RUN_DIR_IN_CONTAINER}/guest.sock",
            "-v",
            f"{run_dir}:{RUN_DIR_IN_CONTAINER}",
            *cfg.extra_args,
            cfg.image,
        ]

    # internals ----------------------------------------------------------------

    async def _check_engine(self) -> None:
        """Fail early, with the engine's own words, when it or the image is missing."""
        if self._checked:
            return
        result = await self._cli(
            "image",
            "inspect",
            "--format",
            f'{{{{index .Config.Labels "{UID_LABEL}"}}}}',
            self.config.image,
        )
        if not result.ok:
            raise DesktopError(
                f"container provider: image {self.config.image!r} is not "
                f"available ({result.describe()}); {ENGINE_HINT}"
            )
        if (found := result.stdout.strip()) != str(UID):
            raise DesktopError(
                f"container provider: image {self.config.image!r} has label "
                f"{UID_LABEL}={found or '(none)'}, expected {UID} (built before "
                "its user left uid 1000?): rebuild it with `cua-rl image build "
                "--format docker`"
            )
        await asyncio.to_thread(check_host_uid)
        self._checked = True

    async def _discard(self, desktop_id: str) -> None:
        """Container, forwarder and files of a desktop; idempotent."""
        ddir = self.state_dir / st.check_desktop_id(desktop_id)
        await self._clients.drop(desktop_id)
        await self._remove(self.container_name(desktop_id))
        await asyncio.to_thread(stop_forwarder, ddir, self._forwarders)
        await asyncio.to_thread(_remove_dir, ddir)

    def _prepare(self, ddir: Path) -> None:
        run = ddir / "run"
        run.mkdir(parents=True)
        mount_run_dir(run)  # a 1 MiB tmpfs when root: writes there never reach the disk
        # Ours, 0755: the container's root init binds guest.sock here, and nothing
        # the agent runs (as `user`, no capabilities) can rename or create anything.
        run.chmod(0o755)

    def _port(self) -> int:
        return self._ports.claim(
            [0] * 50, lambda _: st.free_port(None), "container provider on 127.0.0.1"
        )

    async def _launch(self, handle: DesktopHandle) -> None:
        """`run` the container and wait for its guest; on failure remove it (with its
        logs in the error), so a failed start leaves no container behind. The run dir
        is emptied first and gets the token again: whatever the last container left
        there (a planted directory, a link, 64 files) cannot break the new one."""
        name = self.container_name(handle.id)
        port = int(handle.url.rsplit(":", 1)[1])
        cdp_port = handle.cdp_port
        if not handle.token:
            raise DesktopError(
                f"container provider: no host copy of {handle.id!r}'s token "
                f"in {self.state_dir / handle.id / 'token'}"
            )
        await asyncio.to_thread(reset_run_dir, self.state_dir / handle.id / "run", handle.token)
        if self.config.seccomp:
            await asyncio.to_thread(write_profile, self.state_dir)
        try:
            result = await self._cli(*self.run_argv(handle.id, port, cdp_port)[1:])
            if not result.ok:
                raise DesktopError(
                    f"container provider: cannot start {handle.id!r}: {result.describe()}"
                )
            await self._container_ready(
                handle, timeout_s=self.config.ready_timeout_s, interval_s=0.05, every_s=1.0
            )
        except BaseException:
            await asyncio.shield(self._remove(name))
            raise

    def _handle(
        self, desktop_id: str, port: int, token: str | None, state: str, cdp_port: int | None = None
    ) -> DesktopHandle:
        cfg = self.config
        run_dir = self.state_dir / desktop_id / "run"
        return DesktopHandle(
            id=desktop_id,
            url=f"http://127.0.0.1:{port}",
            token=token,
            provider=self.type,
            info={
                "container": self.container_name(desktop_id),
                "state": state,
                "alive": state == "running",
                "image": self.config.image,
                "run_dir": str(run_dir),
                "cdp_port": cdp_port,
                "limits": limits_info(cfg.limits, cfg.cpus, cfg.shm_size, os.path.ismount(run_dir)),
            },
        )


def _remove_dir(ddir: Path) -> None:
    """A desktop's state dir, its run dir's tmpfs unmounted first."""
    unmount_run_dir(ddir / "run")
    shutil.rmtree(ddir, ignore_errors=True)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None
