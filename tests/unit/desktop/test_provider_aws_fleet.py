"""Fleet hosts (`image_kind: fleet-host`): the config's limits and what one host's
launch carries: K pairs in gzip'd user data, their fingerprints as tags, the
container commands (EC2 itself: tests/integration/desktop/aws/)."""

from __future__ import annotations

import gzip
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

pytest.importorskip("cryptography")

from cua_rl.desktop.providers.aws.config import AwsProviderConfig  # noqa: E402
from cua_rl.desktop.providers.aws.fleet import FleetLaunch, agent_source  # noqa: E402
from cua_rl.desktop.providers.aws.launch import launch_params  # noqa: E402
from cua_rl.desktop.providers.aws.tls import instance_token, make_pair  # noqa: E402
from cua_rl.desktop.providers.container.seccomp import profile as seccomp_profile  # noqa: E402
from cua_rl.images.recipe import UID as IMAGE_UID  # noqa: E402

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
TOKEN = "run-token-" + "q" * 20


def fleet_config(**kwargs: Any) -> AwsProviderConfig:
    defaults: dict[str, Any] = {
        "image_kind": "fleet-host",
        "ami_id": "ami-debian",
        "guest_token": TOKEN,
        "fleet_image_pull": "registry.example/desk:1",
        "run_id": "run-7",
        "ttl_s": 7200,
    }
    return AwsProviderConfig(**{**defaults, **kwargs})


def launch(config: AwsProviderConfig) -> tuple[dict[str, Any], FleetLaunch]:
    k = config.desktops_per_instance
    fleet = FleetLaunch(
        [make_pair(f"slot {i}", NOW) for i in range(k)], make_pair("control", NOW), "d-0"
    )
    return launch_params(config, "host-1", "ami-debian", NOW, fleet=fleet), fleet


def test_user_data_holds_k_pairs_tokens_and_the_container_commands() -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    config = fleet_config(desktops_per_instance=4, guest_port=6000, control_port=5999)
    params, fleet = launch(config)
    tags = {t["Key"]: t["Value"] for t in params["TagSpecifications"][0]["Tags"]}
    assert tags["cua-rl:kind"] == "fleet-host" and tags["cua-rl:slot-0"] == "d-0"
    assert tags["cua-rl:desktop"] == "host-1"
    assert "PRIVATE KEY" not in json.dumps(params["TagSpecifications"])
    data = yaml.safe_load(gzip.decompress(params["UserData"]))
    files = {f["path"]: f for f in data["write_files"]}
    for i, pair in enumerate([*fleet.slots, fleet.control]):
        name = f"slot-{i}" if i < 4 else "control"
        cert_pem = files[f"/etc/cua-fleet/tls/{name}.crt"]["content"]
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        digest = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
        assert digest == pair.fingerprint == tags[f"cua-rl:tls-{i if i < 4 else 'control'}"]
        key_file = files[f"/etc/cua-fleet/tls/{name}.key"]
        key = serialization.load_pem_private_key(key_file["content"].encode(), None)
        assert key.public_key() == cert.public_key()
        assert (key_file["permissions"], key_file["owner"]) == ("0600", "root:root")
        token_path = (
            f"/etc/cua-fleet/tokens/slot-{i}" if i < 4 else "/etc/cua-fleet/tls/control.token"
        )
        assert files[token_path]["content"].strip() == instance_token(TOKEN, pair.fingerprint)
        assert files[token_path]["permissions"] == "0600"
    assert len({p.fingerprint for p in fleet.slots}) == 4  # a pair per desktop
    assert TOKEN not in gzip.decompress(params["UserData"]).decode()  # the run's secret stays
    agent = json.loads(files["/etc/cua-fleet/agent.json"]["content"])
    assert (agent["slots"], agent["guest_port"], agent["control_port"]) == (4, 6000, 5999)
    assert agent["desktop_command"] == ["/usr/local/sbin/cua-fleet-desktop"]
    desktop = files["/usr/local/sbin/cua-fleet-desktop"]["content"]
    # the root init channel, as container desktops: a root-owned run dir and token,
    # root with SETUID/SETGID only, then `user` (the image's init)
    for flag in (
        "--network none",
        "--cap-drop ALL",
        "no-new-privileges",
        "--user 0:0",
        "--cap-add SETUID --cap-add SETGID",
        "install -d -m 0755 -o 0 -g 0",
        "install -m 0600 -o 0 -g 0",
        '--security-opt "seccomp=$CUA_FLEET_ETC/seccomp.json"',
    ):
        assert flag in desktop
    assert str(IMAGE_UID) not in desktop  # the image's user comes from its init
    assert "-p " not in desktop and "--publish" not in desktop
    assert json.loads(files["/etc/cua-fleet/seccomp.json"]["content"]) == seccomp_profile()
    env = files["/etc/cua-fleet/fleet.env"]["content"]
    assert "CUA_FLEET_SLOTS=4\n" in env and "CUA_FLEET_PULL=registry.example/desk:1\n" in env
    assert files["/usr/local/lib/cua-fleet/agent.py"]["content"] == agent_source()
    assert data["runcmd"] == [
        ["shutdown", "-h", "+120", "cua-rl ttl reached"],
        ["/usr/local/sbin/cua-fleet-host"],
    ]


def test_sixteen_desktops_fit_the_user_data_limit() -> None:
    params, _ = launch(fleet_config(desktops_per_instance=16))
    assert len(params["UserData"]) <= 16 * 1024


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ami_id": None}, "needs `ami_id`"),
        ({"guest_token": None}, "needs `ami_id`"),
        ({"fleet_image_pull": None}, "fleet_image_pull` or `fleet_repo"),
        ({"desktops_per_instance": 4, "guest_port": 5000, "control_port": 5002}, "control_port"),
        (
            {"desktops_per_instance": 16, "extra_tags": {f"t{i}": "v" for i in range(20)}},
            "too many tags",
        ),
    ],
)
def test_fleet_host_config_refuses_what_cannot_work(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        fleet_config(**kwargs)


def test_k_desktops_per_instance_needs_a_fleet_host() -> None:
    with pytest.raises(ValidationError, match="needs image_kind 'fleet-host'"):
        AwsProviderConfig(desktops_per_instance=2)
    fleet_config(fleet_image_pull=None, fleet_repo="https://example.org/cua-rl.git")


def test_launch_params_and_kind_must_agree() -> None:
    _, fleet = launch(fleet_config())
    with pytest.raises(ValueError, match="with fleet pairs"):
        launch_params(AwsProviderConfig(), "h", "ami-1", NOW, fleet=fleet)
    with pytest.raises(ValueError, match="without fleet pairs"):
        launch_params(fleet_config(), "h", "ami-1", NOW)


def test_agent_leases_each_slot_once_keeps_them_across_restarts_and_closes(tmp_path: Any) -> None:
    """The agent's lease book: a claim takes the lowest free slot, a repeated claim by
    the same desktop gets its own slot back, a full or closed host leases nothing, and
    a restarted agent reads the book back instead of its launch config."""
    from cua_rl.desktop.providers.aws.fleet_agent import RETIRED, Leases

    book = tmp_path / "leases.json"
    leases = Leases(book, 3, {"0": "d-0"})
    assert [leases.claim("d-1"), leases.claim("d-2"), leases.claim("d-1")] == [1, 2, 1]
    assert leases.claim("d-3") is None  # full
    leases.end(1, retire=False)
    restarted = Leases(book, 3, {"0": "someone-else"})  # the config's leases are ignored
    assert restarted.held == {0: "d-0", 2: "d-2"} and not restarted.closed
    assert restarted.claim("d-3") == 1
    restarted.end(2, retire=True)
    assert restarted.claim("d-4") is None and restarted.holder(2) == RETIRED
    restarted.end(0, retire=False)
    restarted.end(1, retire=False)
    assert restarted.closed and restarted.claim("d-5") is None  # the host is ending
    assert Leases(book, 3, {}).closed


async def test_agent_never_follows_a_link_planted_for_a_slots_guest_socket(tmp_path: Any) -> None:
    """The slot's run dir is writable from inside the desktop and the agent runs as
    root: a `guest.sock` swapped for a link to another socket (the engine's) must give
    a dropped connection, not a connection to what the link names."""
    import asyncio

    from cua_rl.desktop.providers.aws.fleet_agent import forwarder

    reached: list[str] = []

    def server(name: str) -> Any:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            reached.append(name)
            writer.write(name.encode())
            await writer.drain()
            writer.close()

        return handle

    trap = await asyncio.start_unix_server(server("trap"), path=str(tmp_path / "engine.sock"))
    guest_sock = tmp_path / "guest.sock"
    guest_sock.symlink_to(tmp_path / "engine.sock")
    agent = await asyncio.start_server(forwarder(guest_sock), "127.0.0.1", 0)
    port = agent.sockets[0].getsockname()[1]

    async def through_agent() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.0\r\n\r\n")
        data = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        return data

    try:
        assert await through_agent() == b"" and reached == []
        guest_sock.unlink()
        guest = await asyncio.start_unix_server(server("guest"), path=str(guest_sock))
        assert await through_agent() == b"guest" and reached == ["guest"]
        guest.close()
    finally:
        agent.close()
        trap.close()
