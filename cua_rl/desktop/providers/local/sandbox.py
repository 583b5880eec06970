"""The bubblewrap sandbox of one local desktop: what it sees, what it runs, and
how the host reaches its ports (docs/sandbox.md).

`bwrap` runs as the desktop's unprivileged account with every namespace of its
own (user, PID, IPC, mount, network, UTS, cgroup) and an environment built from
an allowlist. The file system is assembled from nothing: read-only system
directories (/usr, an allowlist of /etc, the fontconfig cache), the guest venv
read-only at /opt/cua-guest (and code-server at /opt/code-server when installed,
`local.vscode`), a private /tmp and /run, an empty /home with this
desktop's home at /home/user. The checkout, task sets, caches, run and state
directories, /root and /opt are simply absent.

The network namespace has only its own loopback, so nothing on the host's
loopback (model servers, Ray, other guests) is reachable. The ports the host
needs (the guest and Chromium's DevTools 9222) are forwarded through Unix sockets
the launcher binds, as root, in a root-owned directory of its private mount
namespace that the sandbox never sees; the sandbox gets only their listening
descriptors (`ListenFds`): the guest serves on its own (`--listen-fd`) and
`cua_guest.fd_forward` pipes the DevTools one to 127.0.0.1:9222 inside. Both turn
non-dumpable, so no other process of the desktop user can ptrace them or copy the
descriptor. Nothing inside can rename, replace or create the path the host
connects to. On the host (`host_forwarder`), `cua_rl.desktop.unix_forward` serves
127.0.0.1:HOSTPORT from each socket (and still never follows a link). No bridge,
no address outside 127.0.0.0/8.

Inside, `SESSION_SCRIPT` starts Xvfb, the session bus, the window manager, the
forwarders and the guest, and exits as soon as one of the critical ones does;
the sandbox's PID 1 (bwrap) then exits and the kernel kills everything left in
the PID namespace, so a desktop never half-lives. Stdlib only.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from cua_rl.desktop.providers.local.etc_view import etc_args
from cua_rl.images.openbox_keys import OPENBOX_KEYS
from cua_rl.images.vscode_script import CODE_SERVER_MOUNT

GUEST_MOUNT = "/opt/cua-guest"
SHIM_BIN = "/tmp/.cua-bin"
CHROME_EXE = "/tmp/.cua-chrome/chrome"
"""Chromium's executable, bound read-only under the name `chrome` (off PATH) in a
directory of links to the rest of its install directory: the google-chrome shim
execs it so the browser's processes are called `chrome` (`local.user.chrome_shim`).
A link would not do: Chromium names its processes after /proc/self/exe, which
resolves links but not bind mounts, and finds its resources beside it."""
TOKEN_PATH = "/run/cua-guest/token"
SESSION_BUS = "/tmp/runtime-user/bus"
OSWORLD_BUS = "/run/user/1000/bus"
"""Where OSWorld's image has the session bus (uid 1000's runtime directory): tasks
start gnome-terminal or gsettings with `DBUS_SESSION_BUS_ADDRESS=unix:path=` this,
so it is a link to the desktop's own bus (`SESSION_BUS`)."""
CDP_PORT = 9222
"""Chromium's DevTools port inside, as on OSWorld's images (forwarded to the host)."""
FORWARDED = ("guest", "cdp")
"""Names of the Unix sockets (`<name>.sock`) the launcher binds for the host forwarder."""

SYSTEM_DIRS = ("/usr", "/var/cache/fontconfig", "/var/lib/dbus", "/var/lib/dpkg")
"""Host directories bound read-only; /bin, /lib*, /sbin follow (symlinks on merged-/usr).
The package database lets `dpkg -l` answer as on OSWorld's image, and the desktop's
`sudo` (`local.sudo`) check that an `apt install` asks only for what the host has.
/etc is an allowlist of its own (`local.etc_view`)."""
MERGED_USR = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEV_SHM_BYTES = 256 << 20
"""Size of the desktop's /dev/shm (POSIX shared memory: Chromium's renderers, as the
container provider's `shm_size`); /dev itself is read-only."""
ENV_FROM_HOST = ("LANG", "LANGUAGE", "TZ", "SAL_USE_VCLPLUGIN", "CUA_GUEST_FAULT_HOOKS")
"""The only variables (with LC_*) taken from the launcher's environment
(CUA_GUEST_FAULT_HOOKS arms the guest's fault hook for `cua-rl bench faults`)."""
STAGE = "/run/cua-rl-stage"
"""Where the launcher, root in its private mount namespace, binds this desktop's
home, socket directory and guest venv for bwrap: bwrap runs as the desktop user,
who cannot traverse a state dir under /root or a 0700 temporary directory.
`STAGE/sock` (root-owned, on that tmpfs) holds the forwarded sockets; it is never
bound into the sandbox."""
# The guest venv's bin/ is on PATH: `python`/`python3` there are Debian's python3
# with the guest's packages (pyautogui, Pillow...), as the system Python of
# OSWorld's image has them; tasks run `python -c "import pyautogui; ..."`.
PATH = f"{SHIM_BIN}:{GUEST_MOUNT}/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
OPENBOX_RC = "/etc/xdg/openbox/rc.xml"
# OPENBOX_KEYS (`images.openbox_keys`): GNOME's keys openbox's default rc.xml lacks.
# The session writes openbox's default configuration plus these into its runtime
# directory and starts openbox on it (`--config-file`), so the home stays as the task
# left it; a user's ~/.config/openbox/rc.xml is not read.


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """One desktop's sandbox, as the session launcher builds it."""

    desktop_id: str
    display: int
    width: int
    height: int
    window_manager: str
    uid: int
    gid: int
    user: str
    network: bool = False
    """Share the host's network namespace (egress, and host loopback!) instead of
    an own one with only loopback; the guest then listens on `guest_port` of the
    host directly and nothing is forwarded."""
    guest_port: int = 0
    chrome_binary: str = ""
    """Chromium's executable, bound at `CHROME_EXE` when the google-chrome shim is
    installed."""
    tmp_bytes: int = 0
    """Size of each of /tmp, /run and /var/tmp (0: the kernel's default, half the RAM)."""
    code_server: str = ""
    """The code-server install (`local.vscode.install_dir`), bound at
    `CODE_SERVER_MOUNT` when the `code` script is installed."""


def sandbox_env(base: Mapping[str, str], spec: SandboxSpec) -> dict[str, str]:
    """The whole environment of the session: an allowlist, never the launcher's."""
    env = {k: v for k, v in base.items() if k in ENV_FROM_HOST or k.startswith("LC_")}
    env.setdefault("LANG", "C.UTF-8")
    env.setdefault("SAL_USE_VCLPLUGIN", "gtk3")
    env.update(
        DISPLAY=f":{spec.display}",
        HOME="/home/user",
        USER=spec.user,
        LOGNAME=spec.user,
        SHELL="/bin/bash",
        TMPDIR="/tmp",
        PATH=PATH,
        XDG_RUNTIME_DIR="/tmp/runtime-user",
        XDG_CONFIG_HOME="/home/user/.config",
        XDG_DATA_HOME="/home/user/.local/share",
        XDG_CACHE_HOME="/home/user/.cache",
        DBUS_SESSION_BUS_ADDRESS=f"unix:path={SESSION_BUS}",
        CUA_RL_DESKTOP_ID=spec.desktop_id,
        # Toolkits export their widgets to AT-SPI only when asked to.
        GNOME_ACCESSIBILITY="1",
        QT_ACCESSIBILITY="1",
        QT_LINUX_ACCESSIBILITY_ALWAYS_ON="1",
    )
    return env


@dataclass(frozen=True, slots=True)
class SandboxFds:
    """Pipes bwrap copies into files inside (`--file`), so neither the token nor
    the shim exists anywhere the desktop could share."""

    token: int
    shim: int | None
    """The google-chrome shim, or None when no shim is needed."""
    seccomp: int | None = None
    """The seccomp filter (`local.seccomp.program`), or None for none."""
    sudo: int | None = None
    """The desktop's `sudo` (`local.sudo.SUDO_SHIM`), or None for no sudo at all."""
    code: int | None = None
    """The desktop's `code` (`local.vscode.code_script`), or None without VS Code."""

    def all(self) -> tuple[int, ...]:
        return tuple(
            fd
            for fd in (self.token, self.shim, self.seccomp, self.sudo, self.code)
            if fd is not None
        )


@dataclass(frozen=True, slots=True)
class ListenFds:
    """Listening Unix sockets bwrap passes through to the session (not consumed):
    the guest serves on `guest`, `cua_guest.fd_forward` on `cdp`."""

    guest: int
    cdp: int


def bwrap_argv(
    spec: SandboxSpec,
    env: Mapping[str, str],
    fds: SandboxFds,
    stage: str,
    listen: ListenFds | None = None,
) -> list[str]:
    """The full `bwrap ... bash -c SESSION_SCRIPT` command line; `stage` holds
    home/ and guest/ (see `STAGE`); `listen` is required unless `spec.network`."""
    if listen is None and not spec.network:
        raise ValueError("a desktop without network needs its listening sockets (ListenFds)")
    # --disable-userns: no nested user namespace (`unshare -Ur` would give uid 0
    # inside one, and with it the kernel's namespace-only code paths).
    argv = [
        "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--uid",
        str(spec.uid),
        "--gid",
        str(spec.gid),
        "--hostname",
        "cua-desktop",
        "--clearenv",
    ]
    if spec.network:
        argv.append("--share-net")
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    for path in MERGED_USR:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in SYSTEM_DIRS:
        if os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += etc_args(spec.network)
    size = ["--size", str(spec.tmp_bytes)] if spec.tmp_bytes else []
    shm = ["--size", str(DEV_SHM_BYTES)] if spec.tmp_bytes else []
    # /dev: bwrap's tmpfs of device nodes, read-only once /dev/shm has a sized tmpfs
    # of its own (it had no size: the memory limit was its only bound)
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *shm,
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        *size,
        "--tmpfs",
        "/tmp",
        *size,
        "--tmpfs",
        "/run",
        *size,
        "--tmpfs",
        "/var/tmp",
        "--size",
        str(1 << 20),
        "--tmpfs",
        "/home",
        "--bind",
        f"{stage}/home",
        "/home/user",
        "--ro-bind",
        f"{stage}/guest",
        GUEST_MOUNT,
        "--perms",
        "0700",
        "--dir",
        "/tmp/runtime-user",
        "--perms",
        "1777",
        "--dir",
        "/tmp/.X11-unix",
        "--perms",
        "1777",
        "--dir",
        "/tmp/.ICE-unix",
        "--perms",
        "0700",
        "--dir",
        os.path.dirname(OSWORLD_BUS),
        "--symlink",
        SESSION_BUS,
        OSWORLD_BUS,
        "--perms",
        "0755",
        "--dir",
        SHIM_BIN,
        "--perms",
        "0700",
        "--dir",
        os.path.dirname(TOKEN_PATH),
        "--perms",
        "0600",
        "--file",
        str(fds.token),
        TOKEN_PATH,
    ]
    if fds.shim is not None:
        argv += ["--perms", "0755", "--file", str(fds.shim), f"{SHIM_BIN}/google-chrome"]
        if spec.chrome_binary:
            argv += _chrome_exe(spec.chrome_binary)
    if fds.sudo is not None:
        argv += ["--perms", "0755", "--file", str(fds.sudo), f"{SHIM_BIN}/sudo"]
    if fds.code is not None and spec.code_server:
        argv += [
            "--ro-bind",
            spec.code_server,
            CODE_SERVER_MOUNT,
            "--perms",
            "0755",
            "--file",
            str(fds.code),
            f"{SHIM_BIN}/code",
        ]
    if fds.seccomp is not None:
        argv += ["--seccomp", str(fds.seccomp)]
    # The root itself (bwrap's tmpfs) read-only: no new top-level directories.
    argv += [
        "--remount-ro",
        "/",
        "--chdir",
        "/home/user",
        "--",
        "/bin/bash",
        "-c",
        SESSION_SCRIPT,
        "session",
        str(spec.display),
        str(spec.width),
        str(spec.height),
        spec.window_manager,
        str(spec.guest_port),
        "" if listen is None else str(listen.guest),
        "" if listen is None else str(listen.cdp),
    ]
    return argv


def _chrome_exe(binary: str) -> list[str]:
    """bwrap arguments that put `binary` at `CHROME_EXE` beside links to its siblings."""
    source, target = os.path.dirname(binary), os.path.dirname(CHROME_EXE)
    name = os.path.basename(CHROME_EXE)
    argv = ["--perms", "0755", "--dir", target]
    for entry in sorted(os.listdir(source)) if os.path.isdir(source) else ():
        if entry != name:
            argv += ["--symlink", f"{source}/{entry}", f"{target}/{entry}"]
    return [*argv, "--ro-bind", binary, CHROME_EXE]


def host_forwarder(
    python: str, ports: Mapping[str, int], sock_dir: str, uid: int, gid: int
) -> list[str]:
    """The command that serves 127.0.0.1:port on the host from each Unix socket
    `sock_dir/<name>.sock` (`cua_rl.desktop.unix_forward`): it starts as root, from
    the launcher's interpreter (which `user` may not even be able to read), binds,
    then drops to the desktop's uid:gid; it never follows a link the agent plants
    in the socket directory."""
    argv = [python, "-m", "cua_rl.desktop.unix_forward", "--user", f"{uid}:{gid}"]
    for name, port in ports.items():
        argv += ["--forward", f"{port}:{sock_dir}/{name}.sock"]
    return argv


SESSION_SCRIPT = f"""
set -u
display=$1 width=$2 height=$3 wm=${{4:-}} port=$5 gfd=${{6:-}} cfd=${{7:-}}
wait_for() {{  # a socket a starting server creates, within 20 s
  for _ in $(seq 400); do [ -S "$1" ] && return 0; sleep 0.05; done
  echo "session: $2 not ready within 20 s" >&2; exit 1
}}
only() {{  # exec "$@" holding no listening descriptor but the one named by $1
  keep=$1; shift
  for fd in $gfd $cfd; do [ "$fd" = "$keep" ] || eval "exec $fd<&-"; done
  exec "$@"
}}
trap 'exit 0' TERM INT
only - Xvfb ":$display" -screen 0 "${{width}}x${{height}}x24" -nolisten tcp -noreset & crit=$!
wait_for "/tmp/.X11-unix/X$display" Xvfb
only - dbus-daemon --session --nofork --nopidfile --address=unix:path={SESSION_BUS} &
crit="$crit $!"
wait_for {SESSION_BUS} "session bus"
if [ "$wm" = openbox ] && [ -r {OPENBOX_RC} ]; then  # GNOME's keys (OPENBOX_KEYS)
  sed 's|</keyboard>|{OPENBOX_KEYS}</keyboard>|' {OPENBOX_RC} >/tmp/runtime-user/openbox-rc.xml \
    && wm="openbox --config-file /tmp/runtime-user/openbox-rc.xml"
fi
[ -n "$wm" ] && {{ only - $wm & }}
if [ -n "$gfd" ]; then
  only "$cfd" {GUEST_MOUNT}/bin/python -m cua_guest.fd_forward "$cfd" 127.0.0.1 {CDP_PORT} &
  crit="$crit $!"
  listen="--listen-fd $gfd"
else
  listen="--host 127.0.0.1 --port $port"
fi
only "$gfd" {GUEST_MOUNT}/bin/python -m cua_guest $listen --token-file {TOKEN_PATH} &
crit="$crit $!"
for fd in $gfd $cfd; do eval "exec $fd<&-"; done
echo "session: up (display :$display)" >&2
wait -n $crit
echo "session: a critical process exited ($?); stopping the desktop" >&2
exit 1
"""
"""Runs inside the sandbox as `user`; its exit ends the desktop (see module doc)."""


def quoted(argv: list[str]) -> str:
    """A command line for logs (the script itself elided)."""
    return " ".join(shlex.quote(a) if a != SESSION_SCRIPT else "SCRIPT" for a in argv)
