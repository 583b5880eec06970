"""Fleet hosts (`image_kind: fleet-host`): the config's limits and what one host's
launch carries: K pairs in gzip'd user data, their fingerprints as tags, the
container commands (EC2 itself: tests/integration/desktop/test_aws_moto.py)."""

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

from cua_rl.desktop.providers.aws_launch import launch_params  # noqa: E402
from cua_rl.desktop.providers.aws_config import AwsProviderConfig  # noqa: E402
from cua_rl.desktop.providers.aws_fleet import (  # noqa: E402
    FleetLaunch,
    agent_source,
)
from cua_rl.desktop.providers.aws_tls import instance_token, make_pair  # noqa: E402

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
TOKEN = "run-token-" + "q" * 20


def fleet_config(**kwargs: Any) -> AwsProviderConfig:
    defaults: dict[str, Any] = {
        "image_kind": "fleet-host", "ami_id": "ami-debian", "guest_token": TOKEN,
        "fleet_image_pull": "registry.example/desk:1", "run_id": "run-7", "ttl_s": 7200}
    return AwsProviderConfig(**{**defaults, **kwargs})


def launch(config: AwsProviderConfig) -> tuple[dict[str, Any], FleetLaunch]:
    k = config.desktops_per_instance
    fleet = FleetLaunch([make_pair(f"slot {i}", NOW) for i in range(k)],
                        make_pair("control", NOW), "d-0")
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
        token_path = (f"/etc/cua-fleet/tokens/slot-{i}" if i < 4
                      else "/etc/cua-fleet/tls/control.token")
        assert files[token_path]["content"].strip() == instance_token(TOKEN, pair.fingerprint)
        assert files[token_path]["permissions"] == "0600"
    assert len({p.fingerprint for p in fleet.slots}) == 4  # a pair per desktop
    assert TOKEN not in gzip.decompress(params["UserData"]).decode()  # the run's secret stays
    agent = json.loads(files["/etc/cua-fleet/agent.json"]["content"])
    assert (agent["slots"], agent["guest_port"], agent["control_port"]) == (4, 6000, 5999)
    assert agent["desktop_command"] == ["/usr/local/sbin/cua-fleet-desktop"]
    desktop = files["/usr/local/sbin/cua-fleet-desktop"]["content"]
    for flag in ("--network none", "--cap-drop ALL", "no-new-privileges", "--user 1000:1000"):
        assert flag in desktop
    assert "-p " not in desktop and "--publish" not in desktop
    env = files["/etc/cua-fleet/fleet.env"]["content"]
    assert "CUA_FLEET_SLOTS=4\n" in env and "CUA_FLEET_PULL=registry.example/desk:1\n" in env
    assert files["/usr/local/lib/cua-fleet/agent.py"]["content"] == agent_source()
    assert data["runcmd"] == [["shutdown", "-h", "+120", "cua-rl ttl reached"],
                              ["/usr/local/sbin/cua-fleet-host"]]


def test_sixteen_desktops_fit_the_user_data_limit() -> None:
    params, _ = launch(fleet_config(desktops_per_instance=16))
    assert len(params["UserData"]) <= 16 * 1024


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"ami_id": None}, "needs `ami_id`"),
    ({"guest_token": None}, "needs `ami_id`"),
    ({"fleet_image_pull": None}, "fleet_image_pull` or `fleet_repo"),
    ({"desktops_per_instance": 4, "guest_port": 5000, "control_port": 5002}, "control_port"),
    ({"desktops_per_instance": 16, "extra_tags": {f"t{i}": "v" for i in range(20)}},
     "too many tags"),
])
def test_fleet_host_config_refuses_what_cannot_work(kwargs: dict[str, Any],
                                                    message: str) -> None:
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
