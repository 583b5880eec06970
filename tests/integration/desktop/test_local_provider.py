"""The local provider, the pool, `cua-rl vm` and the guest bench on real desktops
(Xvfb + openbox + cua_guest in private mount namespaces). No timing asserts.
Isolation and cleanup after a run's SIGKILL: `check_provider` (test_check_provider.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
from tests_support.desktops import local_desktops_unavailable  # noqa: E402

from cua_rl.bench.guest import measure_guest
from cua_rl.desktop.pool import DesktopPool
from cua_rl.desktop.providers.local import state as st
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.provider import LocalProvider
from cua_rl.desktop.providers.local.session import namespace_pids

pytestmark = pytest.mark.desktop


if (_reason := local_desktops_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
async def provider(state_dir: Path) -> AsyncIterator[LocalProvider]:
    provider = LocalProvider(LocalProviderConfig(state_dir=state_dir, ready_timeout_s=60))
    yield provider
    for handle in await provider.list():
        await provider.stop(handle)
    await provider.close()


def _live(pids: list[int]) -> list[int]:
    """The pids that still run (zombies waiting for a non-reaping init don't)."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


async def test_click_moves_the_cursor(provider: LocalProvider) -> None:
    handle = await provider.start("click")
    client = provider.client(handle)
    result = await client.act("pyautogui.click(321, 234)")
    assert result.ok, result
    assert await client.cursor_position() == (321, 234)
    assert await provider.health(handle)


async def test_reset_restores_the_home(provider: LocalProvider) -> None:
    """Reset brings the template's home back with a working desktop (that changes are
    gone, and that two desktops share no home or /tmp, is check_provider's part:
    test_check_provider.py)."""
    handle = await provider.start("reset")
    client = provider.client(handle)
    await client.upload_file("/home/user/Desktop/made.txt", b"x")
    await client.upload_file("/tmp/scratch.txt", b"tmp of one")
    assert not await asyncio.to_thread(os.path.exists, "/tmp/scratch.txt")
    # The desktop's /home/user is its own dir under the state dir...
    assert (Path(handle.info["home"]) / "Desktop" / "made.txt").read_bytes() == b"x"
    # ...and the host's /home (whatever it holds) is hidden behind a tmpfs.
    listing = await client.execute(["ls", "-A", "/home"])
    assert listing.ok and listing.output.split() == ["user"], listing
    await client.launch(["mousepad"])
    handle = await provider.reset(handle)
    print(f"\nlocal desktop reset took {handle.info['reset_s']:.2f} s")
    client = provider.client(handle)
    assert await client.get_file("/home/user/Desktop/made.txt") is None
    listing = await client.list_directory("/home/user")
    names = json.dumps(listing)
    for name in ("Desktop", "Documents", "Downloads"):
        assert name in names
    assert (await client.act("pyautogui.moveTo(10, 20)")).ok
    assert await client.cursor_position() == (10, 20)


async def test_pool_replaces_a_desktop_whose_guest_was_killed(
    provider: LocalProvider, state_dir: Path
) -> None:
    async with DesktopPool(
        provider, 1, id_prefix="pool", health_interval_s=0.3, failures_to_replace=1
    ) as pool:
        async with pool.lease() as (handle, client):
            assert (await client.act("pyautogui.moveTo(5, 5)")).ok
        record = st.DesktopRecord.load(state_dir / handle.id)
        assert record is not None
        guests = [
            p
            for p in psutil.process_iter(["pid", "cmdline"])
            if "cua_guest" in " ".join(p.info["cmdline"] or [])
            and _pgid(p.info["pid"]) == record.pgid
        ]
        assert guests, "guest server not found in the desktop's process group"
        for proc in guests:
            os.kill(proc.pid, signal.SIGKILL)
        end = time.monotonic() + 60
        while pool.replacements < 1 or pool.idle_count < 1:
            assert time.monotonic() < end, "dead desktop not replaced"
            await asyncio.sleep(0.1)
        async with pool.lease() as (new, client):
            assert new.id == handle.id and new.info["pid"] != handle.info["pid"]
            assert (await client.act("pyautogui.click(50, 60)")).ok
            assert await client.cursor_position() == (50, 60)
    assert _live([record.pid, *(p.pid for p in guests)]) == []
    assert st.list_records(state_dir) == []


def test_vm_cli_up_list_down_leaves_no_processes(state_dir: Path) -> None:
    env = {**os.environ, "CUA_RL_STATE_DIR": str(state_dir)}

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "cua_rl.cli", "vm", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    up = json.loads(cli("up", "--count", "2", "--json"))
    assert len(up) == 2 and all({"id", "url", "token"} <= set(d) for d in up)
    limits = up[0]["limits"]  # issue 29: what each desktop may use, and how
    assert limits["pids"] > 0 and limits["memory_mb"] > 0 and limits["cgroup"] in ("v1", "v2")
    listed = json.loads(cli("list", "--json"))
    assert sorted(d["id"] for d in listed) == sorted(d["id"] for d in up)
    assert all(d["alive"] for d in listed)
    records = st.list_records(state_dir)
    pids = [pid for r in records for pid in namespace_pids(r.mnt_ns)]
    displays = {f":{r.display}" for r in records}
    assert len(pids) >= 6  # launcher, Xvfb, openbox, guest (+ its worker) per desktop
    out = cli("exec", up[0]["id"], "pyautogui.moveTo(7, 8)")
    assert json.loads(out)["status"] == "success"
    cli("screenshot", up[1]["id"], str(state_dir.parent / "shot.png"))
    assert (state_dir.parent / "shot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "stopped" in cli("down", "--all")
    assert _live(pids) == []
    strays = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"]
        and p.info["cmdline"][0].endswith("Xvfb")
        and displays & set(p.info["cmdline"])
    ]
    assert strays == []
    assert json.loads(cli("list", "--json")) == []


async def test_bench_measures_a_live_guest(provider: LocalProvider) -> None:
    handle = await provider.start("bench")
    figures = await measure_guest(provider.client(handle), calls=2)
    assert (figures["width"], figures["height"]) == (1920, 1080)
    for key in ("screenshot_ms", "screenshot_png_ms", "action_ms"):
        assert figures[key] > 0


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
