"""The aws provider's pure parts: RunInstances arguments, throttling backoff, the
root-volume reset and sweep decisions (EC2 itself: tests/integration/desktop/
aws/)."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

pytest.importorskip("botocore")
from botocore.exceptions import ClientError  # noqa: E402

from cua_rl.desktop.providers.aws.api import Ec2Api, backoff_delay  # noqa: E402
from cua_rl.desktop.providers.aws.config import AwsProviderConfig  # noqa: E402
from cua_rl.desktop.providers.aws.launch import launch_params  # noqa: E402
from cua_rl.desktop.providers.aws.provider import AwsProvider  # noqa: E402
from cua_rl.desktop.providers.aws.sweep import sweep_reason  # noqa: E402
from cua_rl.desktop.providers.aws.tls import instance_token, make_pair  # noqa: E402
from cua_rl.desktop.providers.base import DesktopHandle, GuestClients  # noqa: E402
from cua_rl.errors import DesktopError, Ec2Error  # noqa: E402

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def client_error(code: str, op: str = "RunInstances") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"{code} says no"}}, op)


class FlakyClient:
    """An EC2 client whose describe_instances fails `failures` times first."""

    def __init__(self, failures: list[str]) -> None:
        self.failures = list(failures)
        self.threads: list[int] = []

    def describe_instances(self, **kwargs: Any) -> dict[str, Any]:
        self.threads.append(threading.get_ident())
        if self.failures:
            raise client_error(self.failures.pop(0), "DescribeInstances")
        return {"Reservations": []}


def tags(params: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in params["TagSpecifications"][0]["Tags"]}


def test_launch_params_tag_bound_and_place_the_instance() -> None:
    config = AwsProviderConfig(
        run_id="run-7",
        subnet_id="subnet-1",
        security_group_ids=["sg-1"],
        key_name="me",
        ttl_s=7200,
        extra_tags={"team": "rl"},
        root_volume_gb=40,
    )
    params = launch_params(config, "d-1", "ami-1", NOW, root_device="/dev/sda1")
    assert params["ImageId"] == "ami-1" and params["InstanceType"] == "t3.medium"
    assert params["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert tags(params) == {
        "cua-rl:run": "run-7",
        "cua-rl:desktop": "d-1",
        "team": "rl",
        "cua-rl:expires-at": "2025-01-01T14:00:00Z",
        "Name": "cua-rl-run-7-d-1",
    }
    assert params["TagSpecifications"][1]["ResourceType"] == "volume"
    assert params["NetworkInterfaces"] == [
        {
            "DeviceIndex": 0,
            "SubnetId": "subnet-1",
            "Groups": ["sg-1"],
            "AssociatePublicIpAddress": False,
        }
    ]
    assert "SecurityGroupIds" not in params and params["KeyName"] == "me"
    assert "shutdown -h +120" in params["UserData"]
    assert params["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 40
    assert len(params["ClientToken"]) <= 64
    plain = launch_params(
        AwsProviderConfig(security_group_ids=["sg-2"], self_shutdown=False), "d-1", "ami-1", NOW
    )
    assert plain["SecurityGroupIds"] == ["sg-2"] and "NetworkInterfaces" not in plain
    assert "UserData" not in plain and "KeyName" not in plain


def test_backoff_is_exponential_capped_and_jittered() -> None:
    assert [backoff_delay(a, 0.5, 4.0, lambda: 1.0) for a in range(5)] == [0.5, 1, 2, 4, 4]
    assert backoff_delay(3, 0.5, 4.0, lambda: 0.25) == 1.0


async def test_throttling_is_retried_with_backoff_off_the_event_loop() -> None:
    sleeps: list[float] = []

    async def sleep(delay: float) -> None:
        sleeps.append(delay)

    client = FlakyClient(["RequestLimitExceeded", "Throttling", "InternalError"])
    api = Ec2Api(
        AwsProviderConfig(backoff_base_s=1.0, backoff_max_s=3.0),
        client,
        sleep=sleep,
        rand=lambda: 1.0,
    )
    assert await api.instances() == []
    assert sleeps == [1.0, 2.0, 3.0]
    assert threading.get_ident() not in client.threads, "boto3 must not run on the loop"
    await api.close()


async def test_throttling_gives_up_after_max_attempts_and_other_errors_fail_at_once() -> None:
    async def sleep(delay: float) -> None:
        return None

    api = Ec2Api(AwsProviderConfig(max_attempts=3), FlakyClient(["Throttling"] * 5), sleep=sleep)
    with pytest.raises(Ec2Error, match="describe_instances.*Throttling") as caught:
        await api.instances()
    assert caught.value.code == "Throttling" and isinstance(caught.value, DesktopError)
    client = FlakyClient(["UnauthorizedOperation", "Throttling"])
    api = Ec2Api(AwsProviderConfig(), client, sleep=sleep)
    with pytest.raises(Ec2Error, match="UnauthorizedOperation"):
        await api.instances()
    assert len(client.threads) == 1
    await api.close()


class ScriptedApi:
    """Stands in for Ec2Api where moto has no implementation (replace-root-volume)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.task_states = ["in-progress", "succeeded"]

    async def call(self, op: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((op, kwargs))
        if op == "create_replace_root_volume_task":
            return {
                "ReplaceRootVolumeTask": {
                    "ReplaceRootVolumeTaskId": "replacevol-1",
                    "TaskState": "pending",
                }
            }
        if op == "describe_replace_root_volume_tasks":
            state = self.task_states.pop(0)
            return {
                "ReplaceRootVolumeTasks": [
                    {"ReplaceRootVolumeTaskId": "replacevol-1", "TaskState": state}
                ]
            }
        return {}

    async def instances(self, filters: Any = None, ids: Any = None) -> list[dict[str, Any]]:
        return [
            {
                "InstanceId": "i-1",
                "State": {"Name": "running"},
                "PrivateIpAddress": "10.0.0.5",
                "Tags": [{"Key": "cua-rl:desktop", "Value": "d-1"}],
            }
        ]

    async def close(self) -> None:
        return None


async def test_replace_root_volume_reset_keeps_the_instance_and_refreshes_expiry() -> None:
    api = ScriptedApi()
    probed: list[str] = []

    async def probe(handle: DesktopHandle, deadline_s: float) -> None:
        probed.append(handle.url)

    provider = AwsProvider(
        AwsProviderConfig(reset_mode="replace_root_volume", poll_interval_s=0.01),
        api=api,
        probe=probe,
        clock=lambda: NOW,
    )  # type: ignore[arg-type]
    old = DesktopHandle("d-1", "http://10.0.0.5:5000", None, "aws", {"instance_id": "i-1"})
    new = await provider.reset(old)
    ops = [op for op, _ in api.calls]
    assert ops == [
        "create_replace_root_volume_task",
        "describe_replace_root_volume_tasks",
        "describe_replace_root_volume_tasks",
        "create_tags",
    ]
    assert api.calls[0][1] == {"InstanceId": "i-1", "DeleteReplacedRootVolume": True}
    assert api.calls[-1][1]["Tags"] == [
        {"Key": "cua-rl:expires-at", "Value": "2025-01-01T18:00:00Z"}
    ]
    assert new.info["instance_id"] == "i-1" and probed == ["http://10.0.0.5:5000"]


async def test_failed_root_volume_task_is_a_desktop_error() -> None:
    api = ScriptedApi()
    api.task_states = ["failed"]
    provider = AwsProvider(
        AwsProviderConfig(reset_mode="replace_root_volume", poll_interval_s=0.01), api=api
    )  # type: ignore[arg-type]
    old = DesktopHandle("d-1", "http://10.0.0.5:5000", None, "aws", {"instance_id": "i-1"})
    with pytest.raises(DesktopError, match="replacing the root volume of i-1 failed"):
        await provider.reset(old)


def test_unknown_region_without_ami_names_the_fix() -> None:
    provider = AwsProvider(AwsProviderConfig(region="eu-west-3"), api=ScriptedApi())  # type: ignore[arg-type]
    with pytest.raises(DesktopError, match="copy-image.*ami_id"):
        provider._ami()


@pytest.mark.parametrize(
    ("instance_tags", "run_id", "expected"),
    [
        ({"cua-rl:run": "a", "cua-rl:expires-at": "2025-01-01T11:59:59Z"}, None, "expired"),
        ({"cua-rl:run": "a", "cua-rl:expires-at": "2025-01-01T12:00:01Z"}, None, None),
        ({"cua-rl:run": "a", "cua-rl:expires-at": "soon"}, None, "unreadable"),
        ({"cua-rl:run": "a"}, None, "missing"),
        ({"cua-rl:run": "a", "cua-rl:expires-at": "2099-01-01T00:00:00Z"}, "a", "run a swept"),
        ({"cua-rl:run": "b", "cua-rl:expires-at": "2000-01-01T00:00:00Z"}, "a", None),
        ({"Name": "someone else's"}, None, None),
    ],
)
def test_sweep_reason(
    instance_tags: dict[str, str], run_id: str | None, expected: str | None
) -> None:
    instance = {"Tags": [{"Key": k, "Value": v} for k, v in instance_tags.items()]}
    reason = sweep_reason(instance, run_id, NOW)
    assert (reason is None) if expected is None else (expected in (reason or ""))


def cua_config(**kwargs: Any) -> AwsProviderConfig:
    return AwsProviderConfig(
        image_kind="cua",
        ami_id="ami-cua",
        guest_token="tok-" + "x" * 20,
        run_id="run-7",
        ttl_s=7200,
        **kwargs,
    )


def test_cua_image_user_data_carries_the_pair_and_the_tag_its_fingerprint() -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    config = cua_config()
    pair = make_pair("cua-rl run-7 d-1", NOW)
    params = launch_params(config, "d-1", "ami-cua", NOW, pair=pair)
    assert tags(params)["cua-rl:tls-sha256"] == pair.fingerprint
    assert "PRIVATE KEY" not in str(params["TagSpecifications"])
    assert params["UserData"].startswith("#cloud-config\n")
    data = yaml.safe_load(params["UserData"])
    files = {f["path"]: f for f in data["write_files"]}
    cert_pem = files["/etc/cua-guest/tls/guest.crt"]["content"]
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    assert (
        hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
        == pair.fingerprint
        == files["/etc/cua-guest/tls/guest.sha256"]["content"].strip()
    )
    key = serialization.load_pem_private_key(
        files["/etc/cua-guest/tls/guest.key"]["content"].encode(), password=None
    )
    assert key.public_key() == cert.public_key()  # the key belongs to the pinned cert
    for private in ("/etc/cua-guest/tls/guest.key", "/etc/cua-guest/token"):
        assert files[private]["permissions"] == "0640"
        assert files[private]["owner"] == "root:user"
    assert config.guest_token and config.guest_token not in params["UserData"]  # host only
    token = files["/etc/cua-guest/token"]["content"].strip()
    assert token == instance_token(config.guest_token, pair.fingerprint)
    assert len(token) >= 40 and token != instance_token(config.guest_token, "ab" * 32)
    assert data["runcmd"] == [
        ["systemctl", "restart", "cua-guest.service"],
        ["shutdown", "-h", "+120", "cua-rl ttl reached"],
    ]
    assert pair.key_pem not in repr(pair)
    assert make_pair("x", NOW).fingerprint != pair.fingerprint  # a fresh key per instance
    quiet = launch_params(cua_config(self_shutdown=False), "d-1", "ami-cua", NOW, pair=pair)
    assert yaml.safe_load(quiet["UserData"])["runcmd"] == [
        ["systemctl", "restart", "cua-guest.service"]
    ]
    with pytest.raises(ValueError, match="without a TLS pair"):
        launch_params(config, "d-1", "ami-cua", NOW)
    with pytest.raises(ValueError, match="with a TLS pair"):
        launch_params(AwsProviderConfig(), "d-1", "ami-1", NOW, pair=pair)


@pytest.mark.parametrize("kwargs", [{"ami_id": "ami-1"}, {"guest_token": "t" * 20}])
def test_cua_image_needs_its_ami_and_a_token(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match="image_kind 'cua' needs"):
        AwsProviderConfig(image_kind="cua", **kwargs)


@pytest.mark.parametrize(
    ("image", "tag_value", "url", "pin"),
    [
        ("cua", "ab" * 32, "https://10.0.0.5:5000", "ab" * 32),
        ("cua", "not-a-digest", "https://10.0.0.5:5000", None),
        ("cua", None, "https://10.0.0.5:5000", None),
        ("osworld", "ab" * 32, "http://10.0.0.5:5000", None),
    ],
)
def test_handles_pin_the_fingerprint_tag_of_cua_instances_and_derive_their_token(
    image: str, tag_value: str | None, url: str, pin: str | None
) -> None:
    config = cua_config() if image == "cua" else AwsProviderConfig()
    provider = AwsProvider(config, api=ScriptedApi())  # type: ignore[arg-type]
    instance = {
        "InstanceId": "i-1",
        "State": {"Name": "running"},
        "PrivateIpAddress": "10.0.0.5",
        "Tags": [
            {"Key": "cua-rl:desktop", "Value": "d-1"},
            *([{"Key": "cua-rl:tls-sha256", "Value": tag_value}] if tag_value else []),
        ],
    }
    handle = provider._handle(instance)
    assert (handle.url, handle.tls_fingerprint) == (url, pin)
    if image == "osworld":
        assert handle.token is None  # OSWorld's server has no auth
    else:  # the instance's own token, and none at all for a guest we cannot pin
        assert config.guest_token
        assert handle.token == (instance_token(config.guest_token, pin) if pin else None)
    client = handle.guest_client()  # builds (the pin is valid for its URL) without I/O
    assert client.url == url


async def test_cached_clients_follow_a_changed_pin_or_token() -> None:
    """A desktop whose certificate or token changed at the same address (a reset that
    kept the IP) must not be driven through a client holding the old pin."""
    clients = GuestClients()
    old = DesktopHandle("d-1", "https://10.0.0.5:5000", "t1", "aws", tls_fingerprint="ab" * 32)
    try:
        first = clients.get(old)
        assert clients.get(replace(old, info={"state": "running"})) is first
        for new in (replace(old, tls_fingerprint="cd" * 32), replace(old, token="t2")):
            assert clients.get(new) is not first
            first = clients.get(new)
            assert clients.get(new) is first
    finally:
        await clients.close()


async def test_a_replaced_client_is_closed_and_a_cdp_port_updates_in_place() -> None:
    """Rebuilding a desktop's client closes the old one (an unclosed one leaked its
    session), and a handle that only adds the CDP port keeps the client."""
    clients = GuestClients()
    bare = DesktopHandle("d-1", "http://127.0.0.1:5000", "t1", "local")
    try:
        first = clients.get(bare)
        first._http()  # the session a request would open
        same = clients.get(replace(bare, info={"cdp_port": 9300}))
        assert same is first and same.cdp_port == 9300
        second = clients.get(replace(bare, url="http://127.0.0.1:5001"))
        assert second is not first
    finally:
        await clients.close()
    assert first._session is None  # closed although it had left the cache
