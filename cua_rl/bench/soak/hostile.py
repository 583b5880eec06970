"""Hostile actions played inside a live desktop of a soak, as a policy would type them.

A policy under RL eventually finds what a desktop lets it exhaust. The soak plays the
containment work's hostile programs (`cua_rl.desktop.attack_scripts`) through the desktop's
own authenticated `/execute`, the channel a policy's actions take, on a desktop that
is running an episode of the live run:

- `fork_loop`: forks past the desktop's `pids` limit;
- `disk_fill`: writes past the size of its /home/user and /tmp;
- `memory_hog`: allocates past its `memory_mb` (the kernel's OOM killer then picks a
  process inside the desktop, which may be its guest or X server: a lost desktop the
  run must reset or replace).

Each runs on a thread (the soak's driver ticks every two seconds) with a deadline.
What the program reports is checked against the desktop's limits (`contained`:
the fork loop got at most `pids` processes, the fills at most the tmpfs sizes, the
hog at most `memory_mb`); a program that ends without a report (its desktop died
under it) is recorded as such. Recovered, as for every fault: the run stored a good
trajectory that started after it (`soak.injections.recovered`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cua_rl.desktop import attack_scripts
from cua_rl.desktop.providers.local.config import DesktopLimits

SOAK_LIMITS = DesktopLimits(pids=1024, memory_mb=1536, home_mb=256, tmp_mb=256)
"""The soak's desktops' limits (`soak_overrides`): the quickstart's terminal tasks fit
them several times over, and a hog past them stays small beside the model servers
on a 24 GB machine."""
EXECUTE_TIMEOUT_S = 60.0
"""A hostile program's deadline inside the desktop (each bounds itself to seconds)."""


def limit_overrides(limits: DesktopLimits = SOAK_LIMITS) -> list[str]:
    """`key=value` overrides that give the run's local desktops `limits`."""
    return [
        f"desktops.provider.limits.{key}={getattr(limits, key)}"
        for key in ("pids", "memory_mb", "home_mb", "tmp_mb")
    ]


@dataclass(frozen=True)
class Program:
    """One hostile program: its script for `limits`, and whether a report stayed
    within them."""

    script: Callable[[DesktopLimits], str]
    contained: Callable[[dict[str, str], DesktopLimits], bool]


def _fills(limits: DesktopLimits) -> str:
    return attack_scripts.disk_fill(
        "/home/user/fill", limits.home_mb + 64
    ) + attack_scripts.disk_fill("/tmp/fill", limits.tmp_mb + 64)


PROGRAMS: dict[str, Program] = {
    "fork_loop": Program(
        lambda lim: attack_scripts.fork_loop(max_procs=lim.pids + 300, seconds=5),
        lambda rep, lim: int(rep["started"]) <= lim.pids,
    ),
    "disk_fill": Program(
        _fills, lambda rep, lim: int(rep["written_mib"]) <= max(lim.home_mb, lim.tmp_mb)
    ),
    "memory_hog": Program(
        lambda lim: attack_scripts.memory_hog(lim.memory_mb + 256, seconds=2),
        lambda rep, lim: int(rep["held_mib"]) <= lim.memory_mb,
    ),
}
"""Every hostile kind the soak injects."""


async def _execute(url: str, token: str, script: str) -> str:
    from cua_rl.desktop.client import GuestClient

    client = GuestClient(url, token, timeout=EXECUTE_TIMEOUT_S + 10)
    try:
        result = await client.execute(script, shell=True, timeout=EXECUTE_TIMEOUT_S)
    finally:
        await client.close()
    return (result.output or "") + (result.error or "")


def play(kind: str, url: str, token: str, limits: DesktopLimits) -> dict[str, Any]:
    """Run `kind` in the desktop at `url` as its agent; what it reported, and whether
    that stayed within `limits` (None: no report, the desktop or its guest died)."""
    program = PROGRAMS[kind]
    try:
        output = asyncio.run(_execute(url, token, program.script(limits)))
    except Exception as exc:  # noqa: BLE001 - a desktop killed under it is an outcome
        return {"contained": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
    reports = [
        attack_scripts.report(line, kind)
        for line in output.splitlines()
        if line.startswith(f"HOSTILE {kind} ")
    ]
    if not reports:
        return {"contained": None, "error": f"no HOSTILE {kind} line: {output[-200:]!r}"}
    try:
        contained = all(program.contained(rep, limits) for rep in reports)
    except (KeyError, ValueError) as exc:
        return {"contained": None, "error": f"bad report {reports}: {exc}"}
    return {"contained": contained, "reports": reports}


class HostilePlayer:
    """Plays hostile programs one at a time on a thread; results land in the dict
    the caller gave (the fault's `extra`) when the program ends."""

    def __init__(self, limits: DesktopLimits = SOAK_LIMITS) -> None:
        self.limits = limits
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="hostile")
        self._pending: list[concurrent.futures.Future[None]] = []

    def start(self, kind: str, url: str, token: str, into: dict[str, Any]) -> None:
        def run() -> None:
            into.update(play(kind, url, token, self.limits))

        self._pending.append(self._pool.submit(run))

    def close(self, timeout_s: float = EXECUTE_TIMEOUT_S + 15) -> None:
        """Wait for the programs still running (each bounded by its deadline)."""
        concurrent.futures.wait(self._pending, timeout=timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)
