"""The `local` provider: desktops on this machine, each Xvfb + a window manager +
our guest server in a bubblewrap sandbox of its own (see `local.session`,
`local.sandbox` and docs/sandbox.md), reached through 127.0.0.1 forwarders.

Every desktop is recorded in the state dir (`local.state`) as soon as its guest
answers, so a desktop outlives the process that started it and any later
process can list, reset or stop it. Stopping kills the session's process group
and then every process still in its mount namespace, and waits until they are
gone: the namespace, its mounts and its X display number go with them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider, GuestClients
from cua_rl.desktop.providers.local import home as local_home
from cua_rl.desktop.providers.local import state as st
from cua_rl.desktop.providers.local.cgroup import version as cgroup_version
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.guest_env import ensure_guest_venv, guest_source_dir
from cua_rl.desktop.providers.local.log import QUOTE_CAP, tail, trim_log
from cua_rl.desktop.providers.local.session import (
    STOP_DEADLINE_S,
    kill_session,
    process_start_time,
)
from cua_rl.desktop.providers.local.user import ensure_desktop_user
from cua_rl.errors import DesktopError, GuestUnavailable, PortInUse
from cua_rl.net_ports import (
    START_ATTEMPTS,
    PortReservation,
    address_in_use,
    port_taken,
    reserve_port,
)
from cua_rl.retry import retrying

UNSHARE = ["unshare", "--mount", "--propagation", "private", "--"]


def record_alive(record: st.DesktopRecord) -> bool:
    """True while the launcher that the record names still runs (not a reused pid)."""
    return process_start_time(record.pid) == record.start_time


class LocalProvider(DesktopProvider):
    """Starts desktops as session launchers under `unshare`; see the module docstring."""

    type = "local"

    def __init__(self, config: LocalProviderConfig | None = None) -> None:
        self.config = config or LocalProviderConfig()
        self.state_dir = Path(self.config.state_dir).expanduser()
        self._procs: dict[str, subprocess.Popen] = {}
        self._clients = GuestClients()
        self._ports: set[int] = set()
        self._checked = False
        self._venv: str | None = None

    # public API -------------------------------------------------------------------

    async def start(self, desktop_id: str) -> DesktopHandle:
        st.check_desktop_id(desktop_id)
        self._check_host()
        ddir = self.state_dir / desktop_id
        old = st.DesktopRecord.load(ddir)
        if old is not None and record_alive(old):
            raise DesktopError(f"desktop {desktop_id!r} is already running ({ddir})")
        await asyncio.to_thread(self._prepare, ddir)
        token = st.write_token(ddir / "token")
        try:
            return await self._launch(desktop_id, token, prefer_display=None, prefer_port=None)
        except BaseException:  # nothing of a desktop that never ran is worth keeping
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, ddir, True))
            raise

    async def reset(self, handle: DesktopHandle) -> DesktopHandle:
        """Kill the session, restore the home from the template, start it again."""
        began = time.monotonic()
        record = self._record(handle.id)
        await asyncio.to_thread(self._kill, record)
        await asyncio.to_thread(local_home.restore_home, self._template(), Path(record.home))
        new = await self._launch(record.id, record.token, prefer_display=record.display,
                                 prefer_port=record.port, prefer_cdp=record.cdp_port or None)
        new.info["reset_s"] = round(time.monotonic() - began, 3)
        return new

    async def stop(self, handle: DesktopHandle) -> None:
        await self.stop_id(handle.id)

    async def stop_id(self, desktop_id: str) -> None:
        """Stop by id (also desktops of earlier processes) and delete their files."""
        await self._clients.drop(desktop_id)
        ddir = self.state_dir / st.check_desktop_id(desktop_id)
        record = st.DesktopRecord.load(ddir)
        if record is not None:
            await asyncio.to_thread(self._kill, record)
        self._reap(desktop_id)
        await asyncio.to_thread(shutil.rmtree, ddir, True)

    async def health(self, handle: DesktopHandle) -> bool:
        record = st.DesktopRecord.load(self.state_dir / handle.id)
        if record is None or not record_alive(record):
            return False
        return await self.client(handle).healthy(timeout=3.0)

    async def list(self) -> list[DesktopHandle]:
        return [self._handle(r) for r in st.list_records(self.state_dir)]

    async def get(self, desktop_id: str) -> DesktopHandle:
        """The handle of a recorded desktop; DesktopError naming the state dir if none."""
        return self._handle(self._record(desktop_id))

    def client(self, handle: DesktopHandle) -> GuestClient:
        return self._clients.get(handle)

    async def close(self) -> None:
        await self._clients.close()

    # internals ------------------------------------------------------------------------

    def _check_host(self) -> None:
        """Fail early and clearly when this machine cannot run local desktops."""
        if self._checked:
            return
        for tool in ("unshare", "Xvfb", "bwrap", "socat"):
            if shutil.which(tool) is None:
                raise DesktopError(f"local provider: `{tool}` not found on PATH (apt-get "
                                   "install util-linux xvfb bubblewrap socat, or run "
                                   "./setup.sh)")
        probe = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True)
        if probe.returncode != 0:
            raise DesktopError(
                "local provider: cannot create a mount namespace (`unshare --mount "
                f"--propagation private` failed: {probe.stderr.strip()}); run as root or "
                "with CAP_SYS_ADMIN, e.g. a container started with --privileged"
            )
        try:
            ensure_desktop_user(self.config.user)
        except RuntimeError as exc:
            raise DesktopError(f"local provider: {exc}") from exc
        self._checked = True

    def _guest_venv(self) -> str:
        """The guest venv bound into every desktop (see the config fields)."""
        if self._venv is not None:
            return self._venv
        if self.config.guest_venv is not None:
            path = Path(self.config.guest_venv).expanduser().resolve()
            if not (path / "bin" / "python").exists():
                raise DesktopError(f"guest_venv {path}: no bin/python in it")
            self._venv = str(path)
            return self._venv
        src = guest_source_dir()
        if src is None:
            raise DesktopError("local provider: no cua_guest source (vm/guest with its "
                               "pyproject.toml) importable here; set guest_venv to a venv "
                               "with cua-guest installed")
        try:
            self._venv = str(ensure_guest_venv(src, Path(self.config.guest_venv_root)))
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            raise DesktopError(f"local provider: {exc}") from exc
        return self._venv

    def _template(self) -> Path:
        if self.config.home_template is not None:
            path = Path(self.config.home_template).expanduser()
            if not path.is_dir():
                raise DesktopError(f"home_template {path}: not a directory")
            return path
        return local_home.ensure_home_template(self.state_dir / "home-template")

    def _prepare(self, ddir: Path) -> None:
        if ddir.exists():  # a stale record of a desktop that died: start clean
            shutil.rmtree(ddir)
        ddir.mkdir(parents=True)
        local_home.restore_home(self._template(), ddir / "home")

    def _record(self, desktop_id: str) -> st.DesktopRecord:
        record = st.DesktopRecord.load(self.state_dir / st.check_desktop_id(desktop_id))
        if record is None:
            raise DesktopError(f"no local desktop {desktop_id!r} in {self.state_dir}")
        return record

    def _limits(self) -> dict | None:
        """The limits the launcher applies (None: off), as the spec and `info` carry them."""
        limits = self.config.limits
        if not limits.enabled:
            return None
        return limits.model_dump(exclude={"enabled"})

    def _handle(self, record: st.DesktopRecord) -> DesktopHandle:
        limits = self._limits()
        return DesktopHandle(
            id=record.id, url=record.url, token=record.token, provider=self.type,
            info={"display": f":{record.display}", "pid": record.pid,
                  "home": st.live_home(record),
                  "log": record.log, "alive": record_alive(record),
                  "cdp_port": record.cdp_port,
                  "limits": {**limits, "cgroup": f"v{cgroup_version()}"} if limits else None},
        )

    def _reserve(self, prefer: int | None) -> PortReservation:
        """A port held for a starting desktop (net_ports.py), not one another desktop
        of this process is starting on (a preferred port is shareable, so check)."""
        if prefer in self._ports:
            prefer = None
        try:
            reservation = reserve_port("127.0.0.1", prefer=prefer, avoid=self._ports)
        except OSError as exc:
            raise DesktopError(f"no free TCP port on 127.0.0.1 for a guest server: {exc}"
                               ) from exc
        self._ports.add(reservation.port)
        return reservation

    async def _launch(self, desktop_id: str, token: str, *, prefer_display: int | None,
                      prefer_port: int | None, prefer_cdp: int | None = None
                      ) -> DesktopHandle:
        """Start the session launcher and wait for its guest; record it on success.
        A port taken by another socket before the desktop's forwarder bound it costs a
        start on fresh ports (the desktop's URL is new anyway until it is recorded)."""
        async for attempt in retrying(f"start of desktop {desktop_id!r}",
                                      attempts=START_ATTEMPTS, retry_on=port_taken,
                                      delay=lambda _i: 0.0):
            with attempt:
                return await self._launch_once(desktop_id, token, prefer_display=prefer_display,
                                               prefer_port=prefer_port, prefer_cdp=prefer_cdp)
            prefer_port = prefer_cdp = None
        raise AssertionError("unreachable: retrying re-raises the last error")

    async def _launch_once(self, desktop_id: str, token: str, *, prefer_display: int | None,
                           prefer_port: int | None, prefer_cdp: int | None) -> DesktopHandle:
        ddir = self.state_dir / desktop_id
        venv = await asyncio.to_thread(self._guest_venv)
        guest = self._reserve(prefer_port)
        try:
            cdp = self._reserve(prefer_cdp)
        except BaseException:
            guest.release()
            self._ports.discard(guest.port)
            raise
        try:
            return await self._launch_on(desktop_id, token, ddir, venv, guest.port, cdp.port,
                                         prefer_display=prefer_display)
        finally:  # the forwarder holds the ports now, or the start failed
            guest.release()
            cdp.release()
            self._ports.difference_update({guest.port, cdp.port})

    async def _launch_on(self, desktop_id: str, token: str, ddir: Path, venv: str, port: int,
                         cdp_port: int, *, prefer_display: int | None) -> DesktopHandle:
        lock = st.allocate_display(st.display_lock_root(), self.config.first_display,
                                   prefer=prefer_display)
        spec = {"id": desktop_id, "display": lock.number,
                "ports": {"guest": port, "cdp": cdp_port},
                "width": self.config.width, "height": self.config.height,
                "window_manager": self.config.window_manager,
                "guest_venv": venv, "network": self.config.network,
                "user": self.config.user, "limits": self._limits(),
                "seccomp": self.config.seccomp,
                "home": str(ddir / "home"), "token_file": str(ddir / "token"),
                "owner_pid": self.owner_pid}
        spec_path = ddir / "session.json"
        spec_path.write_text(json.dumps(spec))
        log_path = ddir / "session.log"
        log_start = log_path.stat().st_size if log_path.exists() else 0
        try:
            proc = await asyncio.to_thread(_spawn, spec_path, log_path, lock.fd)
        finally:
            lock.release()  # the launcher holds its own copy of the locked descriptor
        self._procs[desktop_id] = proc
        url = f"http://127.0.0.1:{port}"
        await self._clients.drop(desktop_id)  # its connections died with the guest
        client = self.client(DesktopHandle(desktop_id, url, token, self.type))
        try:
            await self._wait_ready(proc, client)
            record = st.DesktopRecord(
                id=desktop_id, url=url, token=token, port=port, display=lock.number,
                pid=proc.pid, pgid=proc.pid, start_time=process_start_time(proc.pid) or 0.0,
                mnt_ns=os.readlink(f"/proc/{proc.pid}/ns/mnt"), home=spec["home"],
                log=str(log_path), cdp_port=cdp_port,
            )
        except (DesktopError, OSError) as exc:
            await asyncio.to_thread(self._kill_proc, proc)
            await self._clients.drop(desktop_id)
            taken = _port_taken(_tail(log_path, 20000, log_start), (port, cdp_port),
                                f"desktop {desktop_id!r} could not bind it")
            if taken is not None:
                raise DesktopError(f"desktop {desktop_id!r} did not start: {taken} "
                                   f"(log: {log_path})") from taken
            raise DesktopError(f"desktop {desktop_id!r} did not start: {exc}\n"
                               f"--- {log_path} (tail) ---\n{_tail(log_path)}") from exc
        except BaseException:  # cancelled while starting: leave nothing running
            self._kill_proc(proc)
            await asyncio.shield(self._clients.drop(desktop_id))  # nor an open session
            raise
        record.save(ddir)
        return self._handle(record)

    async def _wait_ready(self, proc: subprocess.Popen, client: GuestClient) -> None:
        """Poll /healthz with a deadline while watching the launcher, so a session
        that dies while starting fails at once instead of at the deadline."""
        ready = asyncio.create_task(client.wait_ready(self.config.ready_timeout_s))
        try:
            while not ready.done():
                if proc.poll() is not None:
                    raise DesktopError(f"session launcher exited with {proc.returncode}")
                await asyncio.wait({ready}, timeout=0.1)
            ready.result()
        except GuestUnavailable as exc:
            raise DesktopError(str(exc)) from exc
        finally:
            ready.cancel()
            if ready.done() and not ready.cancelled():
                ready.exception()  # the launcher died as the guest did: seen, not leaked

    def _kill_proc(self, proc: subprocess.Popen) -> None:
        """Kill a launcher that never became ready (its namespace may be half set up)."""
        kill_session(proc.pid, process_start_time(proc.pid))
        proc.wait(timeout=STOP_DEADLINE_S)

    def _kill(self, record: st.DesktopRecord) -> None:
        """Kill the session (group, then namespace stragglers) and wait until gone."""
        if record_alive(record):
            kill_session(record.pgid, record.start_time)
        self._reap(record.id)

    def _reap(self, desktop_id: str) -> None:
        proc = self._procs.pop(desktop_id, None)
        if proc is not None:
            try:
                proc.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                proc.kill()


def _spawn(spec_path: Path, log_path: Path, lock_fd: int) -> subprocess.Popen:
    """Start the session launcher as the leader of a new session, so it survives
    the CLI that started it and its process group is the desktop."""
    trim_log(log_path)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [*UNSHARE, sys.executable, "-m", "cua_rl.desktop.providers.local.session",
             str(spec_path)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            pass_fds=(lock_fd,), start_new_session=True, cwd="/",
        )


def _port_taken(output: str, ports: tuple[int, ...], detail: str) -> PortInUse | None:
    """Which of `ports` a bind in the launch's `output` found in use ("address already
    in use" next to the port, as asyncio words it), if one did."""
    if not address_in_use(output):
        return None
    port = next((p for p in ports if f", {p})" in output), None)
    return None if port is None else PortInUse("127.0.0.1", port, detail)


def _tail(path: Path, size: int = QUOTE_CAP, start: int = 0) -> str:
    """The last `size` characters of the log, from offset `start` on (one launch's
    part), sanitized and capped (`local.log.tail`)."""
    return tail(path, size, start)
