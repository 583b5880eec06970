"""What a container desktop may use of the host (issue 29; docs/sandbox.md, "Limits").

The engine enforces the same `limits` as local desktops' cgroups: processes and
threads (`--pids-limit`), memory without swap (`--memory` = `--memory-swap`),
a CPU share (`--cpu-shares`). Storage is bounded by construction: the image's root
is read-only (`--read-only`, so nothing lands on the engine's overlay, which is
the host's disk: `--storage-opt size` needs xfs with project quotas, and hosts
are ext4) and every place the session writes is a size-capped tmpfs, counted in
the memory limit. The home is a tmpfs too, filled from the image's home by the
engine (tmpfs copy-up) in every new container, so a reset still restores it.
The engine keeps at most `LOG_MAX` of the container's output (json-file
rotation), and the run dir the host shares with the container is a tiny tmpfs
on the host when the provider runs as root (else a plain directory: `limits`
then says `run_dir: "host disk"`), emptied before every container starts.

The desktop runs as the image's `user`, whose uid (`recipe.UID`) must be no
account and no subordinate id range of the host: `check_host_uid` refuses to
start otherwise, since a process that escaped the container would own that
account's files.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

from cua_rl.desktop.providers.local.config import DesktopLimits
from cua_rl.errors import DesktopError
from cua_rl.images.recipe import UID

LOG_MAX = "1m"
"""The engine's log of one container: one file of at most 1 MiB (`--log-opt`)."""
RUN_DIR_SIZE = "1m"
"""The host-side tmpfs of a desktop's run dir (a socket and a token; 64 inodes)."""
TMP_DIRS = ("/tmp", "/var/tmp", "/run")
"""Writable places of the session besides the home and /dev/shm (the engine's)."""


def limits_args(limits: DesktopLimits, home: str) -> list[str]:
    """The `run` options that bound one desktop (empty when limits are off)."""
    if not limits.enabled:
        return []
    mem = f"{limits.memory_mb}m"
    args = [
        "--pids-limit",
        str(limits.pids),
        "--memory",
        mem,
        "--memory-swap",
        mem,
        "--cpu-shares",
        str(max(2, limits.cpu_weight * 1024 // 100)),
        "--read-only",
        "--log-driver",
        "json-file",
        "--log-opt",
        f"max-size={LOG_MAX}",
        "--log-opt",
        "max-file=1",
        # exec: scripts a task leaves in the home or /tmp run as they do on OSWorld
        "--tmpfs",
        f"{home}:size={limits.home_mb}m,mode=755,exec,uid={UID},gid={UID}",
    ]
    for path in TMP_DIRS:
        mode = "755" if path == "/run" else "1777"
        args += ["--tmpfs", f"{path}:size={limits.tmp_mb}m,mode={mode},exec"]
    return args


def limits_info(
    limits: DesktopLimits, cpus: float, shm_size: str, run_dir_bounded: bool
) -> dict | None:
    """What `vm up --json` reports as a desktop's `limits` (None: off)."""
    if not limits.enabled:
        return None
    return {
        **limits.model_dump(exclude={"enabled"}),
        "cpus": cpus,
        "shm": shm_size,
        "root": "read-only",
        "uid": UID,
        "log": LOG_MAX,
        "run_dir": f"tmpfs {RUN_DIR_SIZE}" if run_dir_bounded else "host disk",
    }


def check_host_uid(
    uid: int = UID, subid_files: tuple[str, ...] = ("/etc/subuid", "/etc/subgid")
) -> None:
    """Raise DesktopError when `uid` is a host account or inside a subordinate id
    range of /etc/subuid or /etc/subgid (a malformed line there is skipped)."""
    try:
        owner = pwd.getpwuid(uid).pw_name
    except KeyError:
        owner = None
    if owner is not None:
        raise DesktopError(
            f"container provider: the image's uid {uid} is the host account "
            f"{owner!r}; a desktop that escaped would own its files"
        )
    for name in subid_files:
        try:
            lines = Path(name).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.strip().split(":")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                start, count = int(parts[1]), int(parts[2])
                if start <= uid < start + count:
                    raise DesktopError(
                        f"container provider: the image's uid {uid} is in {name}'s range of "
                        f"{parts[0]!r} ({start}+{count}); a desktop that escaped would own "
                        "that user's container files"
                    )


def mount_run_dir(run: Path) -> bool:
    """A size-capped tmpfs at `run`, root's and 0755, when we are root (True); else
    leave the plain directory (False: on the host's disk; it is then ours, which
    is the container's root under rootless podman)."""
    if os.geteuid() != 0:
        return False
    result = subprocess.run(
        [
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size={RUN_DIR_SIZE},nr_inodes=64,mode=755,uid=0,gid=0,nosuid,nodev,noexec",
            "cua-rl-run",
            str(run),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if result.returncode != 0:
        raise DesktopError(
            f"container provider: cannot mount the run dir tmpfs at {run}: "
            f"{result.stderr.strip()[-300:] or result.returncode}"
        )
    return True


def unmount_run_dir(run: Path) -> None:
    """Detach a run dir tmpfs left by `mount_run_dir` (no-op when there is none)."""
    if os.geteuid() != 0 or not os.path.ismount(run):
        return
    result = subprocess.run(
        ["umount", "--lazy", str(run)], capture_output=True, text=True, timeout=30
    )
    if result.returncode != 0:
        raise DesktopError(
            f"container provider: cannot unmount {run}: "
            f"{result.stderr.strip()[-300:] or result.returncode}"
        )


def reset_run_dir(run: Path, token: str) -> None:
    """Empty `run` (without following anything left there: rmtree works on
    descriptors and never follows links) and write the container init's copy of
    `token`, readable by the owner (the container's root) only."""
    for entry in os.scandir(run):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    fd = os.open(run / "token", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, token.encode())
    finally:
        os.close(fd)
