"""What the escape suite reads on the host about a desktop it attacked: its root
process, cgroup memory peak, the disks it could fill, the container's socket
directory and engine log, the neighbour's screenshot latency."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from pathlib import Path

import psutil

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.local.sandbox import STAGE


async def host_root_process(handle: DesktopHandle) -> psutil.Process:
    """The host process under which a desktop's processes run: the local
    launcher, or the container's init (as the engine reports its pid)."""
    if "pid" in handle.info:
        return psutil.Process(handle.info["pid"])
    proc = await asyncio.create_subprocess_exec(
        "docker",
        "inspect",
        "--format",
        "{{.State.Pid}}",
        handle.info["container"],
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    return psutil.Process(int(out.decode().strip()))


def shared_socket_dir(handle: DesktopHandle) -> Path:
    """The host side of the container's /run/cua (the one directory both write)."""
    return Path(handle.info["run_dir"])


def local_socket_dir(handle: DesktopHandle) -> Path:
    """The launcher's socket directory, seen through its own mount namespace."""
    return Path(f"/proc/{handle.info['pid']}/root{STAGE}/sock")


async def listeners(handle: DesktopHandle) -> list[str]:
    """The command lines of the container's processes holding the guest's listening
    socket (seen from the host: every process of the container, as root)."""
    init = await host_root_process(handle)
    holders = []
    for proc in [init, *init.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            if any(c.laddr == "/run/cua/guest.sock" for c in proc.net_connections("unix")):
                holders.append(" ".join(proc.cmdline()))
    return holders


async def engine_log(handle: DesktopHandle) -> Path:
    proc = await asyncio.create_subprocess_exec(
        "docker",
        "inspect",
        "--format",
        "{{.LogPath}}",
        handle.info["container"],
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    return Path(out.decode().strip())


async def screenshot_p99(client: GuestClient, count: int = 20) -> float:
    """p99 (the max of `count`) of the neighbour's screenshot latency, in seconds."""
    times = []
    for _ in range(count):
        began = asyncio.get_running_loop().time()
        await client.screenshot()
        times.append(asyncio.get_running_loop().time() - began)
    return max(times)


def processes_in_pid_namespace(ns: str) -> int:
    """How many of the host's processes are in the PID namespace `ns`, as `readlink
    /proc/self/ns/pid` prints it from inside ("pid:[4026532301]"): every process a
    desktop's agent can start is in it, and nothing else a shared machine runs is
    (a host-wide count also counted other test runs' processes)."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                count += os.readlink(f"/proc/{name}/ns/pid") == ns
            except OSError:  # gone meanwhile
                continue
    return count


HOST_NOISE_MB = 2048
"""Margin on the host's available-memory drop for other processes of a shared machine."""


async def desktop_memory_peak(handle: DesktopHandle) -> int:
    """The desktop cgroup's peak memory (v1 max_usage_in_bytes, v2 memory.peak), read
    through a process of the sandbox (the local launcher's child bwrap, or the
    container's init)."""
    if "pid" in handle.info:
        inside = next(
            c for c in psutil.Process(handle.info["pid"]).children() if c.name() == "bwrap"
        )
    else:
        inside = await host_root_process(handle)
    return await asyncio.to_thread(cgroup_memory_peak, inside.pid)


def cgroup_memory_peak(pid: int) -> int:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctls, path = line.split(":", 2)
        if "memory" in ctls.split(","):
            return int(Path(f"/sys/fs/cgroup/memory{path}/memory.max_usage_in_bytes").read_text())
        if ctls == "" and Path(f"/sys/fs/cgroup{path}/memory.peak").exists():
            return int(Path(f"/sys/fs/cgroup{path}/memory.peak").read_text())
    raise AssertionError(f"no memory cgroup for pid {pid}")


def disk_used(paths: list[Path]) -> int:
    """Used bytes summed over the distinct file systems holding `paths`."""
    seen: dict[int, int] = {}
    for path in paths:
        if path.exists():
            seen.setdefault(path.stat().st_dev, shutil.disk_usage(path).used)
    return sum(seen.values())
