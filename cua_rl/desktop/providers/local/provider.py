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
import builtins
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.local import home as local_home
from cua_rl.desktop.providers.local import state as st
from cua_rl.desktop.providers.local.cgroup import version as cgroup_version
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.guest_env import ensure_guest_venv, guest_source_dir
from cua_rl.desktop.providers.local.log import QUOTE_CAP, tail, trim_log
from cua_rl.desktop.providers.local.session import (
    STOP_DEADLINE_S,
    kill_session,
    namespace_pids,
    process_start_time,
)
from cua_rl.desktop.providers.local.user import ensure_desktop_user
from cua_rl.desktop.providers.process_core import ProcessDesktops
from cua_rl.errors import DesktopError, PortInUse
from cua_rl.net_ports import (
    START_ATTEMPTS,
    PortReservation,
    address_in_use,
    port_taken,
    reserve_port,
)
from cua_rl.retry import retrying

UNSHARE = ["unshare", "--mount", "--propagation", "private", "--"]
NO_FORKS = (
    "a local desktop's running X clients (the apps a setup launched, their windows "
    "and memory) cannot be saved and started again; only its home (files and "
    "settings a setup wrote) could be copied, so groups set up per rollout"
)


def record_alive(record: st.DesktopRecord) -> bool:
    """True while the launcher that the record names still runs (not a reused pid)."""
    return record.alive


class LocalProvider(ProcessDesktops[st.DesktopRecord]):
    """Starts desktops as session launchers under `unshare`; see the module docstring."""

    type = "local"
    record_type = st.DesktopRecord
    cannot_fork = NO_FORKS

    def __init__(self, config: LocalProviderConfig | None = None) -> None:
        self.config = config or LocalProviderConfig()
        super().__init__(Path(self.config.state_dir))
        self._checked = False
        self._venv: str | None = None

    # what differs from other providers --------------------------------------------

    async def start(self, desktop_id: str) -> DesktopHandle:
        st.check_desktop_id(desktop_id)
        self._check_host()

        async def launch(ddir: Path) -> DesktopHandle:
            await asyncio.to_thread(local_home.restore_home, self._template(), ddir / "home")
            token = st.write_token(ddir / "token")
            return await self._launch(desktop_id, token, prefer_display=None, prefer_port=None)

        return await self._start_fresh(desktop_id, launch)

    async def _reset(self, handle: DesktopHandle) -> DesktopHandle:
        """Kill the session, restore the home from the template, start it again."""
        record = self._record(handle.id)
        await asyncio.to_thread(self._kill, record)
        await asyncio.to_thread(local_home.restore_home, self._template(), Path(record.home))
        return await self._launch(
            record.id,
            record.token,
            prefer_display=record.display,
            prefer_port=record.port,
            prefer_cdp=record.cdp_port or None,
        )

    async def remains(self, handle: DesktopHandle) -> builtins.list[str]:
        """The launcher and every process left in the desktop's mount namespace."""
        record = st.DesktopRecord.load(self.state_dir / st.check_desktop_id(handle.id))
        if record is None:
            return []
        pids = await asyncio.to_thread(namespace_pids, record.mnt_ns) if record.mnt_ns else []
        alive = [record.pid] if record.alive else []
        return [f"local process {pid}" for pid in sorted({*alive, *pids})]

    # internals ------------------------------------------------------------------------

    def _check_host(self) -> None:
        """Fail early and clearly when this machine cannot run local desktops."""
        if self._checked:
            return
        for tool in ("unshare", "Xvfb", "bwrap", "socat"):
            if shutil.which(tool) is None:
                raise DesktopError(
                    f"local provider: `{tool}` not found on PATH (apt-get "
                    "install util-linux xvfb bubblewrap socat, or run "
                    "./setup.sh)"
                )
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
            raise DesktopError(
                "local provider: no cua_guest source (vm/guest with its "
                "pyproject.toml) importable here; set guest_venv to a venv "
                "with cua-guest installed"
            )
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

    def _limits(self) -> dict | None:
        """The limits the launcher applies (None: off), as the spec and `info` carry them."""
        limits = self.config.limits
        if not limits.enabled:
            return None
        return limits.model_dump(exclude={"enabled"})

    def _handle(self, record: st.DesktopRecord) -> DesktopHandle:
        limits = self._limits()
        return DesktopHandle(
            id=record.id,
            url=record.url,
            token=record.token,
            provider=self.type,
            info={
                "display": f":{record.display}",
                "pid": record.pid,
                "home": st.live_home(record),
                "log": record.log,
                "alive": record_alive(record),
                "cdp_port": record.cdp_port,
                "limits": {**limits, "cgroup": f"v{cgroup_version()}"} if limits else None,
            },
        )

    def _reserve(self, prefer: int | None) -> PortReservation:
        """A port held for a starting desktop (net_ports.py), not one another desktop
        of this process is starting on (a preferred port is shareable, so check)."""
        if prefer in self._ports.held:
            prefer = None
        try:
            reservation = reserve_port("127.0.0.1", prefer=prefer, avoid=self._ports.held)
        except OSError as exc:
            raise DesktopError(f"no free TCP port on 127.0.0.1 for a guest server: {exc}") from exc
        self._ports.held.add(reservation.port)
        return reservation

    async def _launch(
        self,
        desktop_id: str,
        token: str,
        *,
        prefer_display: int | None,
        prefer_port: int | None,
        prefer_cdp: int | None = None,
    ) -> DesktopHandle:
        """Start the session launcher and wait for its guest; record it on success.
        A port taken by another socket before the desktop's forwarder bound it costs a
        start on fresh ports (the desktop's URL is new anyway until it is recorded)."""
        async for attempt in retrying(
            f"start of desktop {desktop_id!r}",
            attempts=START_ATTEMPTS,
            retry_on=port_taken,
            delay=lambda _i: 0.0,
        ):
            with attempt:
                return await self._launch_once(
                    desktop_id,
                    token,
                    prefer_display=prefer_display,
                    prefer_port=prefer_port,
                    prefer_cdp=prefer_cdp,
                )
            prefer_port = prefer_cdp = None
        raise AssertionError("unreachable: retrying re-raises the last error")

    async def _launch_once(
        self,
        desktop_id: str,
        token: str,
        *,
        prefer_display: int | None,
        prefer_port: int | None,
        prefer_cdp: int | None,
    ) -> DesktopHandle:
        ddir = self.state_dir / desktop_id
        venv = await asyncio.to_thread(self._guest_venv)
        guest = self._reserve(prefer_port)
        try:
            cdp = self._reserve(prefer_cdp)
        except BaseException:
            guest.release()
            self._ports.release(guest.port)
            raise
        try:
            return await self._launch_on(
                desktop_id, token, ddir, venv, guest.port, cdp.port, prefer_display=prefer_display
            )
        finally:  # the forwarder holds the ports now, or the start failed
            guest.release()
            cdp.release()
            self._ports.release(guest.port, cdp.port)

    async def _launch_on(
        self,
        desktop_id: str,
        token: str,
        ddir: Path,
        venv: str,
        port: int,
        cdp_port: int,
        *,
        prefer_display: int | None,
    ) -> DesktopHandle:
        lock = st.allocate_display(
            st.display_lock_root(), self.config.first_display, prefer=prefer_display
        )
        spec = {
            "id": desktop_id,
            "display": lock.number,
            "ports": {"guest": port, "cdp": cdp_port},
            "width": self.config.width,
            "height": self.config.height,
            "window_manager": self.config.window_manager,
            "guest_venv": venv,
            "network": self.config.network,
            "user": self.config.user,
            "limits": self._limits(),
            "seccomp": self.config.seccomp,
            "home": str(ddir / "home"),
            "token_file": str(ddir / "token"),
            "owner_pid": self.owner_pid,
        }
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
        handle = DesktopHandle(desktop_id, url, token, self.type)
        try:
            await self._process_ready(
                proc,
                handle,
                "session launcher",
                timeout_s=self.config.ready_timeout_s,
                interval_s=0.05,
            )
            record = st.DesktopRecord(
                id=desktop_id,
                url=url,
                token=token,
                port=port,
                display=lock.number,
                pid=proc.pid,
                pgid=proc.pid,
                start_time=process_start_time(proc.pid) or 0.0,
                mnt_ns=os.readlink(f"/proc/{proc.pid}/ns/mnt"),
                home=spec["home"],
                log=str(log_path),
                cdp_port=cdp_port,
            )
        except (DesktopError, OSError) as exc:
            await asyncio.to_thread(self._kill_proc, proc)
            await self._clients.drop(desktop_id)
            taken = _port_taken(
                _tail(log_path, 20000, log_start),
                (port, cdp_port),
                f"desktop {desktop_id!r} could not bind it",
            )
            if taken is not None:
                raise DesktopError(
                    f"desktop {desktop_id!r} did not start: {taken} (log: {log_path})"
                ) from taken
            raise DesktopError(
                f"desktop {desktop_id!r} did not start: {exc}\n"
                f"--- {log_path} (tail) ---\n{_tail(log_path)}"
            ) from exc
        except BaseException:  # cancelled while starting: leave nothing running
            self._kill_proc(proc)
            await asyncio.shield(self._clients.drop(desktop_id))  # nor an open session
            raise
        record.save(ddir)
        return self._handle(record)

    def _kill_proc(self, proc: subprocess.Popen) -> None:
        """Kill a launcher that never became ready (its namespace may be half set up)."""
        kill_session(proc.pid, process_start_time(proc.pid))
        proc.wait(timeout=STOP_DEADLINE_S)

    def _kill(self, record: st.DesktopRecord) -> None:
        """Kill the session (group, then namespace stragglers) and wait until gone."""
        if record_alive(record):
            kill_session(record.pgid, record.start_time)
        self._reap(record.id)


def _spawn(spec_path: Path, log_path: Path, lock_fd: int) -> subprocess.Popen:
    """Start the session launcher as the leader of a new session, so it survives
    the CLI that started it and its process group is the desktop."""
    trim_log(log_path)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [
                *UNSHARE,
                sys.executable,
                "-m",
                "cua_rl.desktop.providers.local.session",
                str(spec_path),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(lock_fd,),
            start_new_session=True,
            cwd="/",
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
