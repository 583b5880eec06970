"""Session launcher of one local desktop: runs as the leader of its own session,
in a private mount namespace, and supervises the desktop's sandbox and the host
ends of its port forwarders.

Started by `LocalProvider` as

    unshare --mount --propagation private -- PYTHON -m cua_rl.desktop.providers.local.session SPEC

it starts, as the unprivileged desktop user, `bwrap` with the whole session
inside (Xvfb, the session bus, the window manager, the guest; see
`local.sandbox` and docs/sandbox.md) and one host forwarder
(`cua_rl.desktop.unix_forward`) that serves 127.0.0.1:PORT on the host from the
sandbox's Unix sockets without following links; it binds as root and then drops
to the desktop user. The launcher itself stays root on the host only to prepare
the desktop's directories; nothing of the session runs as root or sees the host's
files.

Invariant: when this process ends, for whatever reason short of SIGKILL, every
process it started ends with it (the sandbox's PID namespace dies with bwrap,
which `--die-with-parent` ties to us); a dead sandbox or forwarder ends it, so a
broken desktop never looks half alive. It also holds the display's flock
(inherited descriptor), which the kernel drops when it exits. Stdlib only: it
starts on every (re)start, so it must start fast.

The provider-side half of the lifecycle, stopping a session from outside
(`kill_session`), lives here too, beside the namespace helpers both halves use.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import cua_rl
from cua_rl.desktop.providers.local import seccomp as local_seccomp
from cua_rl.desktop.providers.local.cgroup import Cgroup, create
from cua_rl.desktop.providers.local.log import copy_capped
from cua_rl.desktop.providers.local.sandbox import (
    FORWARDED,
    STAGE,
    ListenFds,
    SandboxFds,
    SandboxSpec,
    bwrap_argv,
    host_forwarder,
    quoted,
    sandbox_env,
)
from cua_rl.desktop.providers.local.stage import data_fd, listen_socket, stage
from cua_rl.desktop.providers.local.sudo import SUDO_SHIM
from cua_rl.desktop.providers.local.user import DesktopUser, chrome_shim, chromium_binary
from cua_rl.desktop.providers.local.vscode import code_script, install_dir
from cua_rl.errors import DesktopError

_PR_SET_CHILD_SUBREAPER = 36
_HOST_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
"""All that bwrap and the host forwarders get of the launcher's environment."""
STOP_DEADLINE_S = 10.0
TERM_GRACE_S = 3.0


def namespace_pids(mnt_ns: str, exclude: tuple[int, ...] = ()) -> list[int]:
    """Pids of every process whose mount namespace is `mnt_ns` (`mnt:[inode]`)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/mnt") == mnt_ns:
                pids.append(int(entry))
        except OSError:  # exited meanwhile, or a kernel thread
            continue
    return pids


def kill_namespace(mnt_ns: str, exclude: tuple[int, ...] = ()) -> list[int]:
    """SIGKILL every process of the namespace, including ones that left the
    session's process group (apps that daemonize with setsid)."""
    pids = namespace_pids(mnt_ns, exclude)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def _forwarder_env() -> dict[str, str]:
    """`_HOST_ENV` plus what the forwarder needs to import cua_rl: the directory
    this package was loaded from, then the launcher's own PYTHONPATH."""
    paths = [str(Path(cua_rl.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]
    return {**_HOST_ENV, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def _start(spec: dict, user: DesktopUser, log: Any, cgroups: list[Cgroup]) -> dict[int, str]:
    """Start the sandbox (in its cgroup, which is appended to `cgroups` for the
    caller to remove) and the host forwarders; returns {pid: what} of the
    processes whose exit ends the desktop."""
    limits = spec.get("limits") or None
    chromium = chromium_binary()
    code_server = install_dir()
    box = SandboxSpec(
        desktop_id=spec["id"],
        display=spec["display"],
        width=spec["width"],
        height=spec["height"],
        window_manager=spec["window_manager"],
        uid=user.uid,
        gid=user.gid,
        user=user.name,
        network=spec.get("network", False),
        guest_port=spec["ports"]["guest"],
        chrome_binary=chromium or "",
        tmp_bytes=limits["tmp_mb"] << 20 if limits else 0,
        code_server=code_server or "",
    )
    sock_dir = stage(
        spec["home"], spec["guest_venv"], user, limits["home_mb"] << 20 if limits else 0
    )
    socks = (
        {} if box.network else {n: listen_socket(f"{sock_dir}/{n}.sock", user) for n in FORWARDED}
    )
    listen = ListenFds(socks["guest"].fileno(), socks["cdp"].fileno()) if socks else None
    if limits:
        # Named by the launcher's pid too: two state dirs may hold desktops of one id.
        cgroups.append(
            create(
                f"{spec['id']}-{os.getpid()}",
                pids=limits["pids"],
                memory_bytes=limits["memory_mb"] << 20,
                cpu_weight=limits["cpu_weight"],
            )
        )
    token = data_fd(Path(spec["token_file"]).read_text().strip())
    seccomp = spec.get("seccomp", True) and local_seccomp.supported()
    if spec.get("seccomp", True) and not seccomp:
        log("no seccomp filter: no system call table for this machine's ABI")
    fds = SandboxFds(
        token=token,
        shim=data_fd(chrome_shim()) if chromium else None,
        seccomp=data_fd(local_seccomp.program(local_seccomp.machine())) if seccomp else None,
        sudo=data_fd(SUDO_SHIM),
        code=data_fd(code_script()) if code_server else None,
    )
    out_r, out_w = os.pipe()  # the sandbox's stdout/stderr: never a host file
    try:
        argv = bwrap_argv(box, sandbox_env(os.environ, box), fds, STAGE, listen)
        passed = (*fds.all(), *(s.fileno() for s in socks.values()))
        for cgroup in cgroups:  # bwrap is born in the desktop's cgroup, we step back out
            cgroup.enter()
        try:
            sandbox = subprocess.Popen(
                argv,
                pass_fds=passed,
                env=_HOST_ENV,
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=out_w,
                **user.popen_kwargs(),
            )
        finally:
            for cgroup in cgroups:
                cgroup.leave()
    except BaseException:
        os.close(out_r)
        raise
    finally:
        os.close(out_w)
        for fd in fds.all():
            os.close(fd)
        for sock in socks.values():  # the sandbox holds them now
            sock.close()
    threading.Thread(
        target=copy_capped,
        args=(out_r, sys.stderr.buffer),
        kwargs={"label": f"session {spec['id']}"},
        daemon=True,
        name="desktop-output",
    ).start()
    critical = {sandbox.pid: "sandbox (bwrap)"}
    if not box.network:
        ports = spec["ports"]
        fwd_argv = host_forwarder(sys.executable, ports, sock_dir, user.uid, user.gid)
        fwd = subprocess.Popen(fwd_argv, env=_forwarder_env(), cwd="/", stdin=subprocess.DEVNULL)
        critical[fwd.pid] = f"host forwarder {ports}"
    log(f"sandbox: {quoted(argv)}")
    return critical


class _Stop(Exception):
    pass


def _on_term(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def run(spec: dict) -> int:
    """Set up, supervise until a critical child dies or we are told to stop, tear down."""
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    libc = ctypes.CDLL(None, use_errno=True)
    # Daemonizing descendants re-parent to us, so we reap them and they stay ours.
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    my_ns = os.readlink("/proc/self/ns/mnt")
    cgroups: list[Cgroup] = []
    log = lambda msg: print(f"[session {spec['id']}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        user = DesktopUser.lookup(spec.get("user", "user"))
        critical = _start(spec, user, log, cgroups)
        log(f"up: display :{spec['display']} ports {spec['ports']} ns {my_ns}")
        return _supervise(critical, spec.get("owner_pid"), log)
    except _Stop as stop:
        log(f"stopping on {stop}")
        return 0
    except Exception as exc:  # report any setup failure in the log the host reads
        log(f"failed: {exc!r}\n{traceback.format_exc()}")
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _end_namespace(my_ns)
        for cgroup in cgroups:
            cgroup.remove()


def _supervise(critical: dict[int, str], owner_pid: int | None, log: Any) -> int:
    """Reap children until a critical one dies (1) or the owning run exits (0).

    The owner is the process that started this desktop for a run; a run killed by
    SIGKILL cannot stop its desktops, so they stop themselves. pidfds become
    readable when their process exits, so nothing is polled for it; the timeout
    only paces the reaping of orphans we inherit as subreaper."""
    watched: dict[int, int | None] = {os.pidfd_open(pid): pid for pid in critical}
    if owner_pid:
        try:
            watched[os.pidfd_open(owner_pid)] = None
        except ProcessLookupError:
            log(f"owner {owner_pid} is gone; stopping the desktop")
            return 0
    statuses: dict[int, int] = {}
    while True:
        ready, _, _ = select.select(list(watched), [], [], 1.0)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            statuses[pid] = status
        for fd in ready:
            pid = watched[fd]
            if pid is None:
                log(f"owner {owner_pid} exited; stopping the desktop")
                return 0
            log(f"{critical[pid]} exited ({statuses.get(pid, -1):#x}); stopping the desktop")
            return 1


def _end_namespace(my_ns: str, deadline_s: float = 5.0) -> None:
    """Kill every other process of the namespace and reap them, so that no zombie
    is left to an init that may not reap (some containers)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        kill_namespace(my_ns, exclude=(os.getpid(),))
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no children left; as subreaper we also inherited the orphans
        if pid == 0:
            time.sleep(0.005)


# stopping a session from outside (the provider) -----------------------------------


def process_start_time(pid: int) -> float | None:
    """Start time (clock ticks since boot) of a live, non-zombie process, else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else float(fields[19])


def kill_session(pid: int, start_time: float | None) -> None:
    """Stop the launcher (SIGTERM, then SIGKILL to its process group), then kill
    everything left in its namespace.

    The namespace is pinned by an open descriptor while we scan: a namespace whose
    last process died frees its inode number, and the next desktop's namespace
    may get it, so an unpinned `mnt:[inode]` could name someone else's desktop.
    """
    try:
        ns_fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    except OSError:
        ns_fd = None
    try:
        if start_time is None or process_start_time(pid) != start_time:
            return  # gone already, or the pid now names another process
        mnt_ns = os.readlink(f"/proc/{pid}/ns/mnt") if ns_fd is not None else None
        # SIGTERM first: the launcher then kills and reaps its whole namespace.
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + TERM_GRACE_S
        while process_start_time(pid) == start_time and time.monotonic() < end:
            time.sleep(0.005)
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if mnt_ns and mnt_ns not in _host_namespaces():
            _wait_gone(mnt_ns)
    finally:
        if ns_fd is not None:
            os.close(ns_fd)


def _host_namespaces() -> set[str]:
    """Namespaces never to sweep: ours and init's (a launcher not yet unshared)."""
    found = set()
    for path in ("/proc/self/ns/mnt", "/proc/1/ns/mnt"):
        try:
            found.add(os.readlink(path))
        except OSError:  # pid 1 may be hidden from us (sandboxes)
            pass
    return found


def _wait_gone(mnt_ns: str) -> None:
    """Kill what is left in the namespace until nothing is (apps that setsid)."""
    deadline = time.monotonic() + STOP_DEADLINE_S
    while kill_namespace(mnt_ns):
        if time.monotonic() > deadline:
            raise DesktopError(f"processes of {mnt_ns} survive SIGKILL: {namespace_pids(mnt_ns)}")
        time.sleep(0.02)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    sys.exit(run(spec))


if __name__ == "__main__":
    main()
