"""The cgroup of one local desktop: processes, memory and CPU share (docs/sandbox.md).

bubblewrap has no resource limits of its own, so the session launcher (root)
makes a cgroup per desktop with the kernel's own controllers and starts bwrap in
it; everything of the sandbox then lives there. Both hierarchies are handled:

- cgroup v1 (this machine; older hosts): one directory per controller, under the
  launcher's own cgroup of that controller (`<ctl><own>/cua-rl/<id>-<pid>`), with
  `pids.max`, `memory.limit_in_bytes` (+ `memory.memsw.limit_in_bytes`: no swap
  beyond it) and `cpu.shares`;
- cgroup v2 (most cloud hosts): `/sys/fs/cgroup/cua-rl/<id>-<pid>` with `pids.max`,
  `memory.max`, `memory.swap.max = 0` and `cpu.weight`; `cua-rl` holds no process,
  so its controllers can be delegated to the leaves.

Memory counts the desktop's tmpfs files (pages are charged to the cgroup of the
process that writes them), so the size-capped tmpfs mounts are bounded twice.
When the limit is hit the kernel's OOM killer picks a process inside the
desktop; the host and other desktops are untouched. Written by hand (a few
files per controller) rather than with cgroup-tools: cgcreate/cgexec cover v1
only and are not installed everywhere. Stdlib only: the launcher imports it.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass

ROOT = "/sys/fs/cgroup"
V1_CONTROLLERS = ("pids", "memory", "cpu")
GROUP = "cua-rl"


class CgroupError(RuntimeError):
    """The desktop's cgroup could not be made or entered (the message says which file)."""


def version() -> int:
    """2 on a unified hierarchy, 1 when the v1 controllers are mounted, else 0."""
    if os.path.exists(f"{ROOT}/cgroup.controllers"):
        return 2
    if all(os.path.isdir(f"{ROOT}/{ctl}") for ctl in V1_CONTROLLERS):
        return 1
    return 0


def _own_paths() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            for ctl in ctls.split(",") if ctls else [""]:
                paths[ctl] = path
    return paths


def _write(path: str, value: str) -> None:
    try:
        with open(path, "w") as fh:
            fh.write(value)
    except OSError as exc:
        raise CgroupError(f"cannot write {value!r} to {path}: {exc.strerror}") from None


@dataclass(frozen=True, slots=True)
class Cgroup:
    """One desktop's cgroup directories (one per v1 controller, one on v2) and the
    launcher's original ones, to step back into after starting the sandbox."""

    version: int
    dirs: tuple[str, ...]
    home: tuple[str, ...]

    def enter(self) -> None:
        """Move the calling process in (its children from now on are born inside)."""
        for path in self.dirs:
            _write(f"{path}/cgroup.procs", str(os.getpid()))

    def leave(self) -> None:
        """Move the calling process back to where it was."""
        for path in self.home:
            _write(f"{path}/cgroup.procs", str(os.getpid()))

    def remove(self, deadline_s: float = 2.0) -> None:
        """Remove the directories once their processes are gone (best effort)."""
        end = time.monotonic() + deadline_s
        for path in self.dirs:
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or time.monotonic() > end:
                        break
                    time.sleep(0.02)


def create(name: str, *, pids: int, memory_bytes: int, cpu_weight: int) -> Cgroup:
    """Make (or reuse: a launcher killed by SIGKILL leaves it) the desktop's cgroup."""
    found = version()
    own = _own_paths()
    if found == 2:
        parent = f"{ROOT}/{GROUP}"
        os.makedirs(parent, exist_ok=True)
        _write(f"{parent}/cgroup.subtree_control", "+pids +memory +cpu")
        leaf = f"{parent}/{name}"
        os.makedirs(leaf, exist_ok=True)
        _write(f"{leaf}/pids.max", str(pids))
        _write(f"{leaf}/memory.max", str(memory_bytes))
        if os.path.exists(f"{leaf}/memory.swap.max"):
            _write(f"{leaf}/memory.swap.max", "0")
        _write(f"{leaf}/cpu.weight", str(cpu_weight))
        return Cgroup(2, (leaf,), (f"{ROOT}{own.get('', '/')}".rstrip("/"),))
    if found == 1:
        dirs, home = [], []
        for ctl in V1_CONTROLLERS:
            base = f"{ROOT}/{ctl}{own.get(ctl, '/')}".rstrip("/")
            path = f"{base}/{GROUP}/{name}"
            os.makedirs(path, exist_ok=True)
            dirs.append(path)
            home.append(base)
        pids_dir, mem_dir, cpu_dir = dirs
        _write(f"{pids_dir}/pids.max", str(pids))
        _write(f"{mem_dir}/memory.limit_in_bytes", str(memory_bytes))
        if os.path.exists(f"{mem_dir}/memory.memsw.limit_in_bytes"):
            _write(f"{mem_dir}/memory.memsw.limit_in_bytes", str(memory_bytes))
        _write(f"{cpu_dir}/cpu.shares", str(max(2, cpu_weight * 1024 // 100)))
        return Cgroup(1, tuple(dirs), tuple(home))
    raise CgroupError(
        f"no cgroup v2 at {ROOT} and no v1 {'/'.join(V1_CONTROLLERS)} "
        "controllers mounted: set desktops.provider.limits.enabled: false "
        "to run desktops without limits"
    )
