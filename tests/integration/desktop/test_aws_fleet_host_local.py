"""A fleet host's container part for real, on this machine: the `cua-fleet-desktop`
script and the agent exactly as the aws provider renders them into a fleet host's user
data (only their /etc and /var/lib paths moved into a temporary directory), run
against the local Docker engine (no bridge: `--network none` containers) with the
minimal image; the guests reached over TLS on loopback, pinned to the fingerprints
the provider tagged, and one desktop reset through the control endpoint. Each slot's
container takes the root init channel (a root-owned run dir and socket, the session
as the image's `user`) under our seccomp profile."""

from __future__ import annotations

import asyncio
import gzip
import json
import secrets
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest
import yaml

pytest.importorskip("cryptography")
pytest.importorskip("botocore")

from tests_support.servers import free_port_run  # noqa: E402

from cua_rl.desktop.providers.aws.config import AwsProviderConfig  # noqa: E402
from cua_rl.desktop.providers.aws.fleet import FleetLaunch  # noqa: E402
from cua_rl.desktop.providers.aws.fleet_hosts import FleetHosts  # noqa: E402
from cua_rl.desktop.providers.aws.launch import launch_params  # noqa: E402
from cua_rl.desktop.providers.aws.provider import AwsProvider  # noqa: E402
from cua_rl.desktop.providers.aws.tls import instance_token, make_pair  # noqa: E402
from cua_rl.desktop.providers.base import DesktopHandle  # noqa: E402
from cua_rl.images.recipe import UID as IMAGE_UID  # noqa: E402

pytestmark = pytest.mark.desktop
TOKEN = "fleet-local-" + "k" * 20
K = 2


@pytest.fixture
def fleet_image(request: pytest.FixtureRequest) -> str:
    """A minimal desktop image: the suite's (built once per run, `minimal_docker_image`),
    or an already built `cua-rl-desktop:minimal` when the engine has one: this test is
    about the fleet host's scripts and agent, which any minimal image exercises."""
    from tests_support.images import engine_answers

    if (reason := request.getfixturevalue("docker_available")) is not None:
        pytest.skip(reason)  # the session's engine (started here when none runs)
    if (
        engine_answers()
        and subprocess.run(
            ["docker", "image", "inspect", "cua-rl-desktop:minimal"],
            capture_output=True,
            timeout=60,
        ).returncode
        == 0
    ):
        return "cua-rl-desktop:minimal"
    return str(request.getfixturevalue("minimal_docker_image"))


def render_host(
    root: Path, image: str, guest_port: int, control_port: int, prefix: str
) -> tuple[AwsProviderConfig, FleetLaunch, Path, Path]:
    """The provider's user data for one host, written under `root` as the host would."""
    config = AwsProviderConfig(
        image_kind="fleet-host",
        ami_id="ami-x",
        guest_token=TOKEN,
        desktops_per_instance=K,
        fleet_image=image,
        fleet_image_pull="unused",
        guest_port=guest_port,
        control_port=control_port,
        fleet_width=1024,
        fleet_height=768,
        fleet_memory="1g",
    )
    now = datetime.now(UTC)
    fleet = FleetLaunch([make_pair(f"s{i}", now) for i in range(K)], make_pair("c", now), "d")
    params = launch_params(config, "host-1", "ami-x", now, fleet=fleet)
    data = yaml.safe_load(gzip.decompress(params["UserData"]))

    def moved(text: str) -> str:
        return (
            text.replace("/etc/cua-fleet", str(root / "etc"))
            .replace("/var/lib/cua-fleet", str(root / "state"))
            .replace("/usr/local/sbin/", str(root / "sbin") + "/")
            .replace("/usr/local/lib/cua-fleet", str(root / "lib"))
            .replace("CUA_FLEET_PREFIX=cua-fleet-", f"CUA_FLEET_PREFIX={prefix}")
        )

    for item in data["write_files"]:
        path = Path(moved(item["path"]))
        assert path.is_relative_to(root), path  # never write the machine's own paths
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(moved(item["content"]))
        path.chmod(int(item.get("permissions", "0644"), 8))
    agent_json = root / "etc" / "agent.json"
    agent = json.loads(agent_json.read_text())
    agent_json.write_text(json.dumps({**agent, "bind": "127.0.0.1"}))
    return config, fleet, root / "sbin" / "cua-fleet-desktop", agent_json


async def test_rendered_fleet_host_serves_k_container_desktops_over_pinned_tls(
    tmp_path: Path, fleet_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    guest_port = free_port_run(K + 1)  # K guest ports, then the control port
    ports = list(range(guest_port, guest_port + K + 1))
    prefix = f"cua-fleet-test-{secrets.token_hex(3)}-"
    config, fleet, desktop_cmd, agent_json = render_host(
        tmp_path, fleet_image, guest_port, ports[-1], prefix
    )
    monkeypatch.setenv("CUA_FLEET_ENV", str(tmp_path / "etc" / "fleet.env"))
    agent_cfg = json.loads(agent_json.read_text())
    agent_cfg["desktop_command"] = [str(desktop_cmd)]
    agent_json.write_text(json.dumps(agent_cfg))
    agent = None
    provider = AwsProvider(config)
    try:
        for slot in range(K):  # what cua-fleet-host does after getting the image
            done = await asyncio.to_thread(
                subprocess.run,
                [str(desktop_cmd), str(slot)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
        agent = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, str(agent_path(tmp_path)), str(agent_json)],
            stdout=(tmp_path / "agent.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        handles = [
            DesktopHandle(
                f"d-{i}",
                f"https://127.0.0.1:{guest_port + i}",
                instance_token(TOKEN, pair.fingerprint),
                "aws",
                tls_fingerprint=pair.fingerprint,
                info={
                    "instance_id": "i-local",
                    "slot": i,
                    "control_pin": fleet.control.fingerprint,
                    "control_url": f"https://127.0.0.1:{ports[-1]}",
                },
            )
            for i, pair in enumerate(fleet.slots)
        ]
        for handle in handles:
            async with handle.guest_client() as client:
                await client.wait_ready(90.0, interval_s=0.1)
                await client.upload_file("/home/user/Desktop/mine.txt", handle.id.encode())
        for slot in range(K):  # the root init's channel, under our seccomp profile
            await _assert_root_channel(
                tmp_path / "state" / f"slot-{slot}" / "run", f"{prefix}{slot}"
            )
        async with handles[0].guest_client() as one, handles[1].guest_client() as two:
            assert await one.get_file("/home/user/Desktop/mine.txt") == b"d-0"
            assert await two.get_file("/home/user/Desktop/mine.txt") == b"d-1"
            shot = await one.screenshot()
            assert shot[:8] == b"\x89PNG\r\n\x1a\n"
            assert await one.screen_size() == (1024, 768)
        began = asyncio.get_running_loop().time()
        await FleetHosts(provider).reset_slot(handles[0])
        async with handles[0].guest_client() as one, handles[1].guest_client() as two:
            await one.wait_ready(90.0, interval_s=0.1)
            print(
                f"\nfleet slot reset (control call + guest ready) took "
                f"{asyncio.get_running_loop().time() - began:.2f} s"
            )
            assert await one.get_file("/home/user/Desktop/mine.txt") is None  # a new desktop
            assert await two.get_file("/home/user/Desktop/mine.txt") == b"d-1"  # untouched
    except BaseException:  # say why: the agent's and the containers' own words
        log = tmp_path / "agent.log"
        print("agent:", log.read_text() if log.exists() else "(not started)")
        for slot in range(K):
            logs = await asyncio.to_thread(
                subprocess.run,
                ["docker", "logs", f"{prefix}{slot}"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            print(f"slot {slot}:", (logs.stdout + logs.stderr)[-1500:])
        raise
    finally:
        if agent is not None:
            agent.terminate()
            try:
                await asyncio.to_thread(agent.wait, 10)
            except subprocess.TimeoutExpired:
                agent.kill()
        for slot in range(K):
            await asyncio.to_thread(
                subprocess.run,
                ["docker", "rm", "-f", f"{prefix}{slot}"],
                capture_output=True,
                timeout=60,
            )
        await provider.close()


def agent_path(root: Path) -> Path:
    return root / "lib" / "agent.py"


def _root_owned(run: Path) -> None:
    here = run.stat()
    assert (here.st_uid, stat.S_IMODE(here.st_mode)) == (0, 0o755)
    sock = (run / "guest.sock").lstat()
    assert stat.S_ISSOCK(sock.st_mode) and (sock.st_uid, stat.S_IMODE(sock.st_mode)) == (0, 0o600)
    token = (run / "token").lstat()
    assert (token.st_uid, stat.S_IMODE(token.st_mode)) == (0, 0o600)


async def _assert_root_channel(run: Path, container: str) -> None:
    """The slot's run dir and guest socket are root's (0755, 0600): the image's root
    init bound the socket and dropped to `user`, whose processes run the session; the
    container runs our seccomp profile, not the engine's default."""
    await asyncio.to_thread(_root_owned, run)
    inspect = await asyncio.to_thread(
        subprocess.run,
        [
            "docker",
            "inspect",
            "--format",
            "{{json .HostConfig.SecurityOpt}} {{.Config.User}}",
            container,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert inspect.returncode == 0, inspect.stderr
    assert "io_uring_setup" in inspect.stdout and inspect.stdout.rstrip().endswith(" 0:0")
    pid = await asyncio.to_thread(
        subprocess.run,
        ["docker", "inspect", "--format", "{{.State.Pid}}", container],
        capture_output=True,
        text=True,
        timeout=60,
    )
    tree = psutil.Process(int(pid.stdout)).children(recursive=True)
    guests = [p for p in tree if "cua_guest" in " ".join(p.cmdline())]
    assert guests and {p.uids().real for p in guests} == {IMAGE_UID}, guests
