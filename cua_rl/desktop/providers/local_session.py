"""Session launcher of one local desktop: runs as the leader of its own session,
inside a private mount namespace, and supervises Xvfb, the window manager and
the guest server.

Started by `LocalProvider` as

    unshare --mount --propagation private -- PYTHON -m cua_rl.desktop.providers.local_session SPEC

so every mount below is invisible to the host and vanishes with the namespace:

    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp      (private /tmp)
    mount -t tmpfs -o mode=755 tmpfs /home                   (hide host homes)
    mount --bind <state_dir>/<id>/home /home/user            (this desktop's home)
    mount -t tmpfs -o mode=755 tmpfs /root                   (hide root's home)
    mount --bind -o ro <dir> <dir>     (guest interpreter and package, if hidden)

Everything a task or the agent can run (window manager, D-Bus session bus, the
guest server and whatever it starts) runs as the unprivileged `user` of
OSWorld's image (`local_user`); only the launcher and Xvfb stay root. The
guest's interpreter and package are bound back at their own paths when the
tmpfs mounts hide them, so a checkout or venv under /tmp or /root still starts
its guest.

Invariant: when this process ends, for whatever reason short of SIGKILL, every
process of its namespace ends with it; a dead Xvfb or guest server ends it, so
a broken desktop never looks half alive. It also holds the display's flock
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
import time
import traceback
from pathlib import Path
from typing import Any

from cua_rl.desktop.providers.local_user import (
    DesktopUser,
    chown_tree,
    desktop_env,
    write_chrome_shim,
)
from cua_rl.errors import DesktopError

_MS_NOSUID, _MS_NODEV, _MS_BIND = 2, 4, 4096
_PR_SET_CHILD_SUBREAPER = 36
_XVFB_READY_S = 20.0
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


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


SHIM_BIN = "/tmp/.cua-bin"
BUS_PATH = "/tmp/runtime-user/bus"
HIDDEN_ROOTS = ("/tmp", "/home", "/root")
"""Covered by an empty tmpfs inside every desktop: the host's temporary files and
homes are none of a task's business, and `user` must be able to traverse them to
reach what is exposed again (see `_expose`)."""
_MS_RDONLY, _MS_REMOUNT = 1, 32


def _hidden(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in HIDDEN_ROOTS)


def _open_exposed(paths: list[str]) -> list[tuple[str, int]]:
    """O_PATH descriptors of the paths that the tmpfs mounts will hide, outermost
    first, skipping paths inside another exposed one."""
    chosen: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if p}):
        if _hidden(path) and os.path.isdir(path) and not any(
                path.startswith(outer + "/") for outer in chosen):
            chosen.append(path)
    return [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in chosen]


def _expose(opened: list[tuple[str, int]]) -> None:
    """Bind each directory back at its own path, read-only: the guest's
    interpreter and package then work wherever the checkout or venv lives."""
    for path, fd in opened:
        os.makedirs(path, mode=0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND, None)
        os.close(fd)
        _mount("none", path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY, None)


def _isolate(home: str, desktop_id: str, token: str, expose: list[str],
             user: DesktopUser) -> str:
    """Private /tmp, /root and /home/user owned by `user`; the guest's interpreter
    and package exposed again; returns the token path inside the desktop."""
    # Opened before the tmpfs mounts hide them (the home or the checkout may live
    # under /tmp or /home); mount(2) follows the /proc magic link to the directory.
    home_fd = os.open(home, os.O_PATH | os.O_DIRECTORY)
    opened = _open_exposed(expose)
    _mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777")
    os.makedirs("/home", exist_ok=True)
    _mount("tmpfs", "/home", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755")
    _mount("tmpfs", "/root", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755")
    os.mkdir("/home/user", 0o755)
    _mount(f"/proc/self/fd/{home_fd}", "/home/user", None, _MS_BIND, None)
    os.close(home_fd)
    chown_tree("/home/user", user)
    for path, mode in (("/tmp/.X11-unix", 0o1777), ("/tmp/.ICE-unix", 0o1777),
                       ("/tmp/runtime-user", 0o700), ("/tmp/.cua-guest", 0o700),
                       (SHIM_BIN, 0o755)):
        os.mkdir(path)
        os.chmod(path, mode)
    for path in ("/tmp/runtime-user", "/tmp/.cua-guest"):
        os.chown(path, user.uid, user.gid)
    _expose(opened)
    write_chrome_shim(SHIM_BIN)
    token_path = f"/tmp/.cua-guest/{desktop_id}.token"
    fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token)
    os.chown(token_path, user.uid, user.gid)
    return token_path


def _start_bus(env: dict[str, str], user: DesktopUser) -> subprocess.Popen:
    """The session bus of `user`; returns once it listens (it prints its address)."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address=unix:path={BUS_PATH}",
         f"--print-address={write_fd}"],
        pass_fds=(write_fd,), env=env, cwd="/home/user", **user.popen_kwargs(),
    )
    os.close(write_fd)
    try:
        _read_line(read_fd, proc, "dbus-daemon")
    finally:
        os.close(read_fd)
    return proc


def _read_line(read_fd: int, proc: subprocess.Popen, what: str) -> bytes:
    """Wait (deadline) for a newline-terminated line a starting server writes to a pipe."""
    deadline = time.monotonic() + _XVFB_READY_S
    got = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([read_fd], [], [], 0.1)
        # Xvfb writes the number and the newline separately; closing the pipe
        # before the newline arrives makes its second write fail fatally.
        if ready:
            chunk = os.read(read_fd, 256)
            got += chunk
            if got.endswith(b"\n"):
                return got
            if not chunk and proc.poll() is not None:
                break
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
    raise RuntimeError(f"{what} not ready within {_XVFB_READY_S:.0f} s")


def _start_xvfb(display: int, width: int, height: int, env: dict[str, str]) -> subprocess.Popen:
    """Start Xvfb and return once it accepts connections (-displayfd reports that)."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", f":{display}", "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp",
         "-noreset", "-displayfd", str(write_fd)],
        pass_fds=(write_fd,), env=env,
    )
    os.close(write_fd)
    try:
        _read_line(read_fd, proc, f"Xvfb :{display}")
    finally:
        os.close(read_fd)
    return proc


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
    log = lambda msg: print(f"[session {spec['id']}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        token = Path(spec["token_file"]).read_text().strip()
        user = DesktopUser.lookup(spec.get("user", "user"))
        token_path = _isolate(spec["home"], spec["id"], token, spec.get("expose", []), user)
        env = desktop_env(os.environ, display=spec["display"], desktop_id=spec["id"],
                          user=user, bus=f"unix:path={BUS_PATH}", shim_bin=SHIM_BIN,
                          guest_lib=spec.get("guest_lib"))
        as_user = user.popen_kwargs()
        xvfb = _start_xvfb(spec["display"], spec["width"], spec["height"], env)
        bus = _start_bus(env, user)
        if spec.get("window_manager"):
            subprocess.Popen(spec["window_manager"].split(), env=env, cwd="/home/user",
                             **as_user)
        guest = subprocess.Popen(
            [spec["guest_python"], "-m", "cua_guest", "--host", "127.0.0.1",
             "--port", str(spec["port"]), "--token-file", token_path],
            env=env, cwd="/home/user", **as_user,
        )
        critical = {xvfb.pid: "Xvfb", bus.pid: "session bus", guest.pid: "guest server"}
        log(f"up: display :{spec['display']} port {spec['port']} ns {my_ns}")
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
            raise DesktopError(f"processes of {mnt_ns} survive SIGKILL: "
                               f"{namespace_pids(mnt_ns)}")
        time.sleep(0.02)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    sys.exit(run(spec))


if __name__ == "__main__":
    main()
