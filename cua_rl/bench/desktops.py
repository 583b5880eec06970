"""Start, reset and screenshot times and memory per desktop (`cua-rl bench
desktops`), side by side for each provider, plus how many local desktops this
machine holds with p99 screenshot latency within budget.

Memory is the resident set of the desktop's processes: for `local` the
processes in the desktop's session, for `container` the container's cgroup
(`docker stats`), for `qemu` the QEMU process. The reset timed is the
provider's default one: for `qemu` the snapshot restore (`loadvm`); qemu also
reports `reboot_reset_s`, the reset of a desktop without a snapshot (a reboot), on a
second VM. `local_no_limits` is a local desktop without its limits (no cgroup, no
tmpfs sizes, the home on the host's disk), measured right after `local` in the
same run: the limits' cost.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import subprocess
import time
from typing import Any

from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider

SCREENSHOT_BUDGET_MS = 100.0
SCREENSHOT_FORMAT = "jpeg"
"""The episode's default transport (JPEG q90), as `bench guest` measures it."""
ALL_PROVIDERS = ("local", "container", "qemu")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list: the smallest value
    with at least q % of the values at or below it (rank ceil(q * n / 100)).
    `q * n` is multiplied first so that p99 of 100 samples is rank 99, not 100."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered) / 100)))
    return ordered[rank - 1]


def provider_figures(
    start_s: float, reset_s: float, shots_ms: list[float], rss: float | None
) -> dict[str, Any]:
    """One provider's entry of the JSON: the measured samples reduced to the
    figures docs/figures.md quotes (times rounded to what the machine can resolve)."""
    return {
        "start_s": round(start_s, 2),
        "reset_s": round(reset_s, 2),
        "screenshot_p50_ms": round(statistics.median(shots_ms), 1),
        "screenshot_p99_ms": round(percentile(shots_ms, 99), 1),
        "rss_mb": rss,
    }


def _rss_mb_of_pids(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


def _session_pids(pgid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,pgid="], capture_output=True, text=True).stdout
    return [int(p) for p, g in (line.split() for line in out.splitlines()) if int(g) == pgid]


async def rss_mb(provider: DesktopProvider, handle: DesktopHandle) -> float | None:
    if provider.type == "local":
        return _rss_mb_of_pids(_session_pids(os.getpgid(int(handle.info["pid"]))))
    if provider.type == "qemu":
        return _rss_mb_of_pids([int(handle.info["pid"])])
    if provider.type == "container":
        out = await asyncio.to_thread(
            subprocess.run,
            [
                getattr(provider, "engine", "docker"),
                "stats",
                "--no-stream",
                "--format",
                "{{.MemUsage}}",
                handle.info["container"],
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        used = out.stdout.split("/")[0].strip()
        units = {"KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "B": 1 / 2**20}
        for unit, factor in units.items():
            if used.endswith(unit):
                return round(float(used[: -len(unit)]) * factor, 1)
    return None


async def screenshot_ms(
    provider: DesktopProvider, handle: DesktopHandle, calls: int
) -> list[float]:
    client = provider.client(handle)  # type: ignore[attr-defined]  # every provider of this bench has client()
    await client.screenshot(SCREENSHOT_FORMAT)  # warm-up
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        await client.screenshot(SCREENSHOT_FORMAT)
        times.append((time.perf_counter() - began) * 1000)
    return times


def make(name: str, **fields: Any) -> DesktopProvider:
    from pydantic import TypeAdapter

    from cua_rl.desktop.providers.config import ProviderConfig
    from cua_rl.desktop.providers.factory import make_provider

    config = TypeAdapter(ProviderConfig).validate_python({"type": name, **fields})
    return make_provider(config, owner_pid=os.getpid())


async def bench_provider(name: str, calls: int, **fields: Any) -> dict[str, Any]:
    provider = make(name, **fields)
    handle = None
    try:
        began = time.monotonic()
        handle = await provider.start(f"bench-{name}")
        start_s = time.monotonic() - began
        began = time.monotonic()
        handle = await provider.reset(handle)
        reset_s = time.monotonic() - began
        shots = await screenshot_ms(provider, handle, calls)
        figures = provider_figures(start_s, reset_s, shots, await rss_mb(provider, handle))
    finally:
        if handle is not None:
            await provider.stop(handle)
        await provider.close()
    if name == "qemu":  # the reset a snapshot saves us from, measured beside it
        figures["reboot_reset_s"] = round(
            await reset_seconds(
                make(name, **{**fields, "snapshot_reset": False}), "bench-qemu-reboot"
            ),
            2,
        )
    return figures


async def reset_seconds(provider: DesktopProvider, desktop_id: str) -> float:
    """Start a desktop, then time one reset of it (and stop it)."""
    handle = None
    try:
        handle = await provider.start(desktop_id)
        began = time.monotonic()
        handle = await provider.reset(handle)
        return time.monotonic() - began
    finally:
        if handle is not None:
            await provider.stop(handle)
        await provider.close()


async def max_local_desktops(limit: int, calls: int) -> dict[str, Any]:
    """Add local desktops one at a time; at each count take screenshots on all of
    them concurrently; the answer is the last count whose p99 stayed in budget."""
    provider = make("local")
    handles: list[DesktopHandle] = []
    best, curve = 0, {}
    try:
        for n in range(1, limit + 1):
            handles.append(await provider.start(f"bench-max-{n}"))
            per = await asyncio.gather(*(screenshot_ms(provider, h, calls) for h in handles))
            p99 = percentile([t for ts in per for t in ts], 99)
            curve[n] = round(p99, 1)
            if p99 > SCREENSHOT_BUDGET_MS:
                break
            best = n
    finally:
        await asyncio.gather(*(provider.stop(h) for h in handles), return_exceptions=True)
        await provider.close()
    return {"max_desktops": best, "max_desktops_p99_ms": curve, "max_desktops_limit": limit}


def machine() -> dict[str, Any]:
    """Cores and the 1-minute load beside the figures (the machine is shared)."""
    return {"cores": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2)}


def provider_fields(
    container_image: str, qemu_image: str | None, qemu_memory_mb: int
) -> dict[str, dict[str, Any]]:
    """Each provider's settings in this bench (small VMs, no VNC)."""
    return {
        "local": {},
        "container": {"image": container_image},
        "qemu": {
            "memory_mb": qemu_memory_mb,
            "vnc": False,
            "firmware": None,
            **({"image": qemu_image} if qemu_image else {}),
        },
    }


def measure(
    names: list[str],
    calls: int,
    max_limit: int,
    container_image: str,
    qemu_image: str | None,
    qemu_memory_mb: int,
) -> dict[str, Any]:
    """The figures of every provider in `names` (a provider that fails is one error
    line in its entry, the others go on), `local` and `container` each followed by
    the same desktop without its limits (the limits' cost, side by side: issue 29),
    and, when `max_limit` and `local` is measured, how many local desktops fit."""
    from cua_rl.errors import CuaRlError

    fields = provider_fields(container_image, qemu_image, qemu_memory_mb)
    figures: dict[str, Any] = {}
    runs = [(name, name, fields[name]) for name in names]
    for name in ("local", "container"):
        if name in names:
            at = next(i for i, run in enumerate(runs) if run[0] == name)
            runs.insert(
                at + 1, (f"{name}_no_limits", name, {**fields[name], "limits": {"enabled": False}})
            )
    for key, name, extra in runs:
        try:
            figures[key] = asyncio.run(bench_provider(name, calls, **extra))
        except CuaRlError as exc:
            figures[key] = {"error": str(exc).splitlines()[0]}
    if max_limit and "local" in names:  # a search of local desktops only when asked for
        figures.update(asyncio.run(max_local_desktops(max_limit, max(5, calls // 5))))
    return figures
