"""The `container` provider: desktops as containers of our own image
(`cua-rl image build --format docker`), on docker or podman.

Each desktop is one container with no network at all (`--network none`: its
own network namespace holding only a loopback, so no bridge and no address on
any host network), its session run as the unprivileged `user` with no capabilities and
limits on CPU, memory and processes. The guest listens on a Unix socket in the
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
  rename, replace or create anything where the forwarder looks. The host still
  never trusts the dir: its own copy of the token is `<state_dir>/<id>/token`, the
  forwarder refuses a guest.sock that is not a socket
  (`container.forward.connect_no_follow`), and the dir is emptied before every
  container starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider, GuestClients
from cua_rl.desktop.providers.container.config import ContainerProviderConfig
from cua_rl.desktop.providers.container.limits import (
    check_host_uid,
    limits_args,
    limits_info,
    mount_run_dir,
    reset_run_dir,
    unmount_run_dir,
)
from cua_rl.desktop.providers.local import state as st
from cua_rl.desktop.providers.local.log import sanitize
from cua_rl.desktop.providers.local.session import process_start_time
from cua_rl.desktop.providers.vm_host import CommandResult, run_command
from cua_rl.errors import DesktopError, GuestUnavailable
from cua_rl.images.recipe import UID, USER

LABEL = "cua-rl.desktop"
PORT_LABEL = "cua-rl.port"
UID_LABEL = "cua-rl.uid"
"""Set by `cua-rl image build` on the image: the uid of its `user` (`recipe.UID`)."""
RUN_DIR_IN_CONTAINER = "/run/cua"
ENGINE_HINT = ("apt-get install docker.io (then start dockerd) or podman, and build the "
               "image with `cua-rl image build --format docker`")
FORBIDDEN_ARGS = ("--network", "--net", "-p", "--publish", "--privileged", "--cap-add",
                  "--user", "-u")
"""`extra_args` may not open the sandbox: no network, no privilege, and no other
user (the root init that keeps the channel out of the agent's reach needs `0:0`)."""


def pick_engine(mode: str) -> str:
    if mode != "auto":
        return mode
    return "podman" if shutil.which("podman") else "docker"


class ContainerProvider(DesktopProvider):
    """One container per desktop from our image; see the module docstring."""

    type = "container"

    def __init__(self, config: ContainerProviderConfig | None = None) -> None:
        self.config = config or ContainerProviderConfig()
        self.state_dir = Path(self.config.state_dir).expanduser()
        self.engine = pick_engine(self.config.engine)
        self._clients = GuestClients()
        self._forwarders: dict[str, subprocess.Popen] = {}
        self._ports: set[int] = set()
        self._checked = False

    # public API ---------------------------------------------------------------

    async def start(self, desktop_id: str) -> DesktopHandle:
        ddir = self.state_dir / st.check_desktop_id(desktop_id)
        await self._check_engine()
        name = self.container_name(desktop_id)
        state = await self._state(name)
        if state == "running":
            raise DesktopError(f"desktop {desktop_id!r} is already running (container {name})")
        await self._remove(name)  # an exited leftover of an earlier process: start clean
        self._stop_forwarder(ddir)
        await asyncio.to_thread(_remove_dir, ddir)
        try:
            await asyncio.to_thread(self._prepare, ddir)
            token = st.write_token(ddir / "token")  # the host's copy, out of the desktop's reach
            port = self._port()
            await asyncio.to_thread(self._start_forwarder, ddir, name, port)
            handle = self._handle(desktop_id, port, token, "running")
            await self._launch(handle)
            return handle
        except BaseException:  # nothing of a desktop that never ran is worth keeping
            await asyncio.shield(self._discard(desktop_id))
            raise

    async def reset(self, handle: DesktopHandle) -> DesktopHandle:
        """A new container from the image: the home and every change are gone."""
        began = time.monotonic()
        current = await self.get(handle.id)
        await self._clients.drop(handle.id)
        await self._remove(self.container_name(handle.id))
        await self._launch(current)
        current.info["reset_s"] = round(time.monotonic() - began, 3)
        return current

    async def stop(self, handle: DesktopHandle) -> None:
        await self._discard(handle.id)

    async def health(self, handle: DesktopHandle) -> bool:
        if await self._state(self.container_name(handle.id)) != "running":
            return False
        if not self._forwarder_alive(self.state_dir / handle.id):
            return False
        return await self.client(handle).healthy(timeout=3.0)

    async def list(self) -> list[DesktopHandle]:
        if not shutil.which(self.engine):
            return []
        fmt = (f'{{{{.Label "{LABEL}"}}}}\t{{{{.Label "{PORT_LABEL}"}}}}\t{{{{.Names}}}}'
               f'\t{{{{.State}}}}')
        result = await self._cli("ps", "-a", "--filter", f"label={LABEL}", "--format", fmt)
        if not result.ok:
            raise DesktopError(f"container provider: {result.describe()}")
        handles = []
        for line in result.stdout.splitlines():
            desktop_id, port, name, state = (line.split("\t") + ["", "", "", ""])[:4]
            if desktop_id and name == self.container_name(desktop_id) and port.isdigit():
                token = _read(self.state_dir / desktop_id / "token")
                handles.append(self._handle(desktop_id, int(port), token, state))
        return sorted(handles, key=lambda h: h.id)

    def client(self, handle: DesktopHandle) -> GuestClient:
        return self._clients.get(handle)

    async def close(self) -> None:
        await self._clients.close()

    def container_name(self, desktop_id: str) -> str:
        return f"{self.config.name_prefix}{desktop_id}"

    def run_argv(self, desktop_id: str, port: int) -> list[str]:
        """The `run` command line of one desktop (a pure function, tested)."""
        cfg = self.config
        for arg in cfg.extra_args:
            if arg.split("=", 1)[0] in FORBIDDEN_ARGS:
                raise DesktopError(f"container provider: extra_args may not contain {arg!r} "
                                   "(desktops have no network, no privileges and their own user)")
        run_dir = self.state_dir / desktop_id / "run"
        return [self.engine, "run", "--detach", "--init", "--name",
                self.container_name(desktop_id),
                "--label", f"{LABEL}={desktop_id}", "--label", f"{PORT_LABEL}={port}",
                "--network", "none",
                # root only to bind the guest's socket in the root-owned run dir, then
                # `user` for good (cua_guest.container_init): no other capability
                "--user", "0:0", "--cap-drop", "ALL", "--cap-add", "SETUID",
                "--cap-add", "SETGID", "--security-opt", "no-new-privileges",
                "--ipc", "private",
                "--cpus", str(cfg.cpus), "--shm-size", cfg.shm_size,
                *limits_args(cfg.limits, f"/home/{USER}"),
                "-e", f"CUA_SCREEN_WIDTH={cfg.width}", "-e", f"CUA_SCREEN_HEIGHT={cfg.height}",
                "-e", f"CUA_GUEST_LISTEN=unix:{RUN_DIR_IN_CONTAINER}/guest.sock",
                "-v", f"{run_dir}:{RUN_DIR_IN_CONTAINER}",
                *cfg.extra_args, cfg.image]

    # internals ----------------------------------------------------------------

    async def _cli(self, *args: str) -> CommandResult:
        return await run_command([self.engine, *args], hint=ENGINE_HINT,
                                 timeout=self.config.command_timeout_s)

    async def _check_engine(self) -> None:
        """Fail early, with the engine's own words, when it or the image is missing."""
        if self._checked:
            return
        result = await self._cli("image", "inspect", "--format",
                                 f'{{{{index .Config.Labels "{UID_LABEL}"}}}}', self.config.image)
        if not result.ok:
            raise DesktopError(f"container provider: image {self.config.image!r} is not "
                               f"available ({result.describe()}); {ENGINE_HINT}")
        if (found := result.stdout.strip()) != str(UID):
            raise DesktopError(f"container provider: image {self.config.image!r} has label "
                               f"{UID_LABEL}={found or '(none)'}, expected {UID} (built before "
                               "its user left uid 1000?): rebuild it with `cua-rl image build "
                               "--format docker`")
        await asyncio.to_thread(check_host_uid)
        self._checked = True

    async def _state(self, name: str) -> str | None:
        result = await self._cli("inspect", "--type", "container", "--format",
                                 "{{.State.Status}}", name)
        return (result.stdout.strip() or None) if result.ok else None

    async def _remove(self, name: str) -> None:
        result = await self._cli("rm", "--force", "--volumes", name)
        if not result.ok and "no such container" not in result.stderr.lower():
            raise DesktopError(f"container provider: {result.describe()}")

    async def _discard(self, desktop_id: str) -> None:
        """Container, forwarder and files of a desktop; idempotent."""
        ddir = self.state_dir / st.check_desktop_id(desktop_id)
        await self._clients.drop(desktop_id)
        await self._remove(self.container_name(desktop_id))
        await asyncio.to_thread(self._stop_forwarder, ddir)
        await asyncio.to_thread(_remove_dir, ddir)

    def _prepare(self, ddir: Path) -> None:
        run = ddir / "run"
        run.mkdir(parents=True)
        mount_run_dir(run)  # a 1 MiB tmpfs when root: writes there never reach the disk
        # Ours, 0755: the container's root init binds guest.sock here, and nothing
        # the agent runs (as `user`, no capabilities) can rename or create anything.
        run.chmod(0o755)

    def _port(self) -> int:
        for _ in range(50):
            port = st.free_port(None)
            if port not in self._ports:
                self._ports.add(port)
                return port
        raise DesktopError("container provider: no free TCP port on 127.0.0.1")

    def _start_forwarder(self, ddir: Path, name: str, port: int) -> None:
        argv = [sys.executable, "-m", "cua_rl.desktop.providers.container.forward",
                "--port", str(port), "--socket", str(ddir / "run" / "guest.sock"),
                "--container", name, "--engine", self.engine]
        if self.owner_pid is not None:
            argv += ["--owner-pid", str(self.owner_pid)]
        with open(ddir / "forward.log", "ab") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, cwd="/")
        self._forwarders[ddir.name] = proc
        (ddir / "forward.json").write_text(json.dumps(
            {"pid": proc.pid, "start_time": process_start_time(proc.pid), "port": port}))

    def _forwarder_alive(self, ddir: Path) -> bool:
        rec = _json(ddir / "forward.json")
        return bool(rec) and process_start_time(rec["pid"]) == rec["start_time"]

    def _stop_forwarder(self, ddir: Path) -> None:
        rec = _json(ddir / "forward.json")
        proc = self._forwarders.pop(ddir.name, None)
        if rec and process_start_time(rec["pid"]) == rec["start_time"]:
            try:
                os.kill(rec["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline and process_start_time(rec["pid"]) is not None:
                if proc is not None and proc.poll() is not None:
                    break
                time.sleep(0.02)
            else:
                if process_start_time(rec["pid"]) is not None:
                    os.kill(rec["pid"], signal.SIGKILL)
        if proc is not None:
            try:
                proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                proc.kill()

    async def _launch(self, handle: DesktopHandle) -> None:
        """`run` the container and wait for its guest; on failure remove it (with its
        logs in the error), so a failed start leaves no container behind. The run dir
        is emptied first and gets the token again: whatever the last container left
        there (a planted directory, a link, 64 files) cannot break the new one."""
        name = self.container_name(handle.id)
        port = int(handle.url.rsplit(":", 1)[1])
        if not handle.token:
            raise DesktopError(f"container provider: no host copy of {handle.id!r}'s token "
                               f"in {self.state_dir / handle.id / 'token'}")
        await asyncio.to_thread(reset_run_dir, self.state_dir / handle.id / "run", handle.token)
        try:
            result = await self._cli(*self.run_argv(handle.id, port)[1:])
            if not result.ok:
                raise DesktopError(f"container provider: cannot start {handle.id!r}: "
                                   f"{result.describe()}")
            await self._wait_ready(name, handle)
        except BaseException:
            await asyncio.shield(self._remove(name))
            raise

    async def _wait_ready(self, name: str, handle: DesktopHandle) -> None:
        client = self.client(handle)
        ready = asyncio.create_task(client.wait_ready(self.config.ready_timeout_s,
                                                      interval_s=0.05))
        try:
            while not ready.done():
                await asyncio.wait({ready}, timeout=1.0)
                if not ready.done() and (state := await self._state(name)) != "running":
                    raise DesktopError(f"container provider: container {name} is "
                                       f"{state or 'gone'} before its guest answered\n"
                                       f"{await self._logs(name)}")
            ready.result()
        except GuestUnavailable as exc:
            raise DesktopError(f"container provider: {exc}\n{await self._logs(name)}") from exc
        finally:
            ready.cancel()

    async def _logs(self, name: str) -> str:
        result = await self._cli("logs", "--tail", "40", name)
        # The desktop's own words: printable only, capped (docs/sandbox.md, Output).
        text = sanitize((result.stdout + result.stderr).strip()[-3000:]) or "(no output)"
        return f"--- {self.engine} logs {name} (tail) ---\n{text}"

    def _handle(self, desktop_id: str, port: int, token: str | None,
                state: str) -> DesktopHandle:
        cfg = self.config
        run_dir = self.state_dir / desktop_id / "run"
        return DesktopHandle(
            id=desktop_id, url=f"http://127.0.0.1:{port}", token=token, provider=self.type,
            info={"container": self.container_name(desktop_id), "state": state,
                  "alive": state == "running", "image": self.config.image,
                  "run_dir": str(run_dir),
                  "limits": limits_info(cfg.limits, cfg.cpus, cfg.shm_size,
                                        os.path.ismount(run_dir))})


def _remove_dir(ddir: Path) -> None:
    """A desktop's state dir, its run dir's tmpfs unmounted first."""
    unmount_run_dir(ddir / "run")
    shutil.rmtree(ddir, ignore_errors=True)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and {"pid", "start_time"} <= data.keys() else None
