"""Container desktops of the minimal image on a real Docker engine: the guest
answering on 127.0.0.1 through the Unix-socket forwarder, reset, and what a container
desktop has and cannot reach. Isolation between desktops and nothing outliving a run
killed by SIGKILL: `check_provider` (last test of test_sandbox_escapes.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cua_rl.desktop.providers.container.config import ContainerProviderConfig
from cua_rl.desktop.providers.container.provider import ContainerProvider
from cua_rl.images.recipe import UID

pytestmark = pytest.mark.desktop


@pytest.fixture
async def provider(tmp_path: Path, minimal_docker_image: str):
    prov = ContainerProvider(
        ContainerProviderConfig(
            image=minimal_docker_image,
            state_dir=tmp_path / "state",
            engine="docker",
            name_prefix=f"cua-rl-test-{os.getpid()}-",
        )
    )
    prov.owner_pid = os.getpid()
    yield prov
    for handle in await prov.list():
        await prov.stop(handle)
    await prov.close()


async def test_start_screenshot_reset_restores_the_home(provider: ContainerProvider) -> None:
    began = time.monotonic()
    handle = await provider.start("one")
    print(f"\ncontainer desktop start took {time.monotonic() - began:.2f} s")
    assert handle.url.startswith("http://127.0.0.1:")
    client = provider.client(handle)
    png = await client.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert await client.screen_size() == (1920, 1080)
    assert await provider.health(handle)
    who = await client.execute(["id", "-un"])
    assert who.ok and who.output.strip() == "user", who
    # issue 29: a uid no host account has; a read-only root, every writable place a
    # size-capped tmpfs (nothing lands on the engine's overlay, the host's disk).
    uid = await client.execute(["id", "-u"])
    assert uid.output.strip() == str(UID) == str(handle.info["limits"]["uid"]), uid
    mounts = await client.execute(["cat", "/proc/self/mounts"])
    table = {f[1]: (f[2], f[3]) for f in (line.split() for line in mounts.output.splitlines())}
    assert table["/"][1].startswith("ro,"), table["/"]
    limits = handle.info["limits"]
    for path, mb in (
        ("/home/user", limits["home_mb"]),
        ("/tmp", limits["tmp_mb"]),
        ("/var/tmp", limits["tmp_mb"]),
        ("/run", limits["tmp_mb"]),
    ):
        assert table[path][0] == "tmpfs" and f"size={mb * 1024}k" in table[path][1], table[path]
    # Every module the guest imports has a valid pyc (hash-checked: the image's files
    # carry mtime 0), so no desktop compiles Python at start.
    pycs = await client.execute(
        [
            "python3",
            "-c",
            textwrap.dedent("""
        import importlib.util, json, aiohttp, PIL.Image, cua_guest.app
        for mod in (json, aiohttp, PIL.Image, cua_guest.app):
            pyc = importlib.util.cache_from_source(mod.__file__)
            flags = int.from_bytes(open(pyc, "rb").read()[4:8], "little")
            print(mod.__name__, "hash" if flags & 1 else "timestamp")"""),
        ]
    )
    assert pycs.ok and all(line.endswith(" hash") for line in pycs.output.splitlines()), pycs
    await client.upload_file("/home/user/Desktop/made.txt", b"x")
    assert await client.get_file("/home/user/Desktop/made.txt") == b"x"
    handle = await provider.reset(handle)
    print(f"container desktop reset took {handle.info['reset_s']:.2f} s")
    client = provider.client(handle)
    assert await client.get_file("/home/user/Desktop/made.txt") is None
    assert "Documents" in str(await client.list_directory("/home/user"))
    assert (await client.act("pyautogui.moveTo(10, 20)")).ok
    assert await client.cursor_position() == (10, 20)
    assert [h.id for h in await provider.list()] == ["one"]


async def test_a_container_desktop_has_what_a_local_one_has(provider: ContainerProvider) -> None:
    """Issue 50: the session OSWorld's goldens rely on (docs/osworld-local.md), in the
    minimal image too: the rootless sudo answering from the image's packages, python
    with pyautogui, the session bus at /run/user/1000/bus, PulseAudio's null sink
    below full volume, openbox's Ctrl+Alt+T, the local hostname, and Chromium's
    DevTools port 9222 reachable from the host on the handle's `cdp_port`."""
    import aiohttp

    handle = await provider.start("session")
    client = provider.client(handle)
    script = (
        "hostname; command -v sudo; command -v python; readlink /run/user/1000/bus; "
        "test -S /run/user/1000/bus && echo BUS; echo password | sudo -S apt install "
        "jq xsel -y; echo rc=$?; sudo apt-get install gimp; echo rc=$?; "
        "python -c 'import pyautogui; print(pyautogui.size())'; "
        "grep -c C-A-t /etc/xdg/openbox/rc.xml; pulseaudio --start; "
        "pactl list sinks | grep -m1 'Volume:'"
    )
    done = await client.execute(script, shell=True, timeout=60)
    lines = done.output.splitlines()
    assert lines[:5] == [
        "cua-desktop",
        "/usr/local/lib/cua-rl/bin/sudo",
        "/usr/local/lib/cua-rl/bin/python",
        "/tmp/runtime-user/bus",
        "BUS",
    ]
    assert lines[6:9] == ["rc=0", "rc=100", "Size(width=1920, height=1080)"], lines
    assert "E: no root on this desktop to install: gimp" in done.error
    assert lines[9] == "1" and " 40% " in lines[10], lines
    await client.launch("python3 -m http.server 9222 --bind 127.0.0.1", shell=True)
    assert handle.cdp_port is not None and handle.cdp_port != int(handle.url.rsplit(":")[-1])
    deadline = asyncio.get_running_loop().time() + 30
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as http:
        while True:
            try:
                async with http.get(f"http://127.0.0.1:{handle.cdp_port}/") as resp:
                    assert resp.status == 200
                    break
            except aiohttp.ClientError:
                assert asyncio.get_running_loop().time() < deadline, "9222 not reached"
                await asyncio.sleep(0.2)


async def test_a_desktop_reaches_nothing_but_its_own_channel(provider: ContainerProvider) -> None:
    """No network but loopback (its own forwarded port is out of reach too), no engine,
    and a run dir whose token and sockets are the container root's (issue 29)."""
    one = await provider.start("a")
    c1 = provider.client(one)
    port = one.url.rsplit(":", 1)[1]
    probe = await c1.execute(
        [
            "python3",
            "-c",
            textwrap.dedent(f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2); print("open")
        except OSError as e:
            print("refused")"""),
        ]
    )
    assert probe.ok and probe.output.splitlines()[0] == "refused", probe
    procs = await c1.execute(["ps", "-eo", "comm="])
    assert procs.ok and "dockerd" not in procs.output and procs.output.count("Xvfb") == 1
    mounts = await c1.execute(["ls", "-A", "/run/cua"])
    assert sorted(mounts.output.split()) == ["cdp.sock", "guest.sock", "token"], mounts
    # the agent reads only its guest's copy of the token, which is its own desktop's
    owners = await c1.execute(
        [
            "stat",
            "-c",
            "%u %a %n",
            "/run/cua",
            "/run/cua/token",
            "/run/cua/guest.sock",
            "/run/cua/cdp.sock",
        ]
    )
    assert owners.output.split("\n")[:4] == [
        "0 755 /run/cua",
        "0 600 /run/cua/token",
        "0 600 /run/cua/guest.sock",
        "0 600 /run/cua/cdp.sock",
    ], owners
    assert not (await c1.execute(["cat", "/run/cua/token"])).ok
    token = await c1.execute(["cat", "/tmp/.guest-token"])
    assert token.output.strip() == one.token


def _containers(prefix: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"name={prefix}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return out.stdout.split()


def test_vm_up_json_reports_the_limits_and_down_unmounts(
    tmp_path: Path, minimal_docker_image: str
) -> None:
    """issue 29: `vm up --json` says what a container desktop may use; `vm down`
    leaves neither a container nor the run dir's tmpfs behind."""
    prefix = f"cua-rl-test-cli-{os.getpid()}-"
    common = [
        "--provider",
        "container",
        "--set",
        f"image={minimal_docker_image}",
        "--set",
        f"name_prefix={prefix}",
        "--state-dir",
        str(tmp_path / "state"),
    ]

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "cua_rl.cli", "vm", *args, *common],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    try:
        up = json.loads(cli("up", "--json"))
        limits = up[0]["limits"]
        assert (limits["pids"], limits["memory_mb"], limits["uid"]) == (2048, 4096, UID)
        assert limits["root"] == "read-only" and limits["run_dir"] == "tmpfs 1m", limits
        run_dir = tmp_path / "state" / up[0]["id"] / "run"
        assert os.path.ismount(run_dir)
        assert "stopped" in cli("down", "--all")
        assert _containers(prefix) == [] and not os.path.ismount(run_dir)
    finally:
        for cid in _containers(prefix):
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True, timeout=60)
