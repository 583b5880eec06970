"""The aws provider with OSWorld's AMI (`image_kind: osworld`, the default) against
moto's EC2: launch, tags, expiry, readiness, reset by replacement, the sweep, the
`vm` commands, missing credentials, and `check_provider` (fixtures: conftest.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("moto.server")

import base64  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from tests_support.instance_guests import InstanceGuests  # noqa: E402
from tests_support.moto_ec2 import REGION, describe, make_config, tags_of  # noqa: E402
from tests_support.servers import free_port  # noqa: E402
from tests_support.xvfb import kill_group, start_xvfb  # noqa: E402

from cua_rl.desktop import check_provider  # noqa: E402
from cua_rl.desktop.conformance import CHECKS  # noqa: E402
from cua_rl.desktop.providers.aws.api import Ec2Api  # noqa: E402
from cua_rl.desktop.providers.aws.provider import AwsProvider  # noqa: E402
from cua_rl.desktop.providers.aws.sweep import sweep  # noqa: E402
from cua_rl.errors import DesktopError  # noqa: E402


async def test_lifecycle_with_a_guest_stub(network: dict[str, Any], guest_stub: str) -> None:
    ec2 = network["ec2"]
    provider = AwsProvider(make_config(network, ttl_s=3600), guest_url=lambda instance: guest_stub)
    began = datetime.now(UTC)
    try:
        handle = await provider.start("d-1")
        assert handle.url == guest_stub and handle.token is None
        instance_id = handle.info["instance_id"]
        instance = describe(ec2, instance_id)
        assert instance["State"]["Name"] == "running"
        assert instance["InstanceType"] == "t3.medium"
        assert instance["SubnetId"] == network["subnet"] and instance["KeyName"] == "cua-rl-test"
        nic_groups = [g["GroupId"] for g in instance["NetworkInterfaces"][0]["Groups"]]
        assert nic_groups == [network["group"]]
        tags = tags_of(instance)
        assert tags["cua-rl:run"] == "run-1" and tags["cua-rl:desktop"] == "d-1"
        assert tags["team"] == "rl"
        expiry = datetime.fromisoformat(tags["cua-rl:expires-at"].replace("Z", "+00:00"))
        assert began + timedelta(seconds=3590) <= expiry <= began + timedelta(seconds=3610)
        user_data = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")[
            "UserData"
        ]["Value"]
        assert "shutdown -h +60" in base64.b64decode(user_data).decode()

        assert await provider.health(handle)
        assert [h.id for h in await provider.list()] == ["d-1"]
        assert (await provider.get("d-1")).info["instance_id"] == instance_id
        with pytest.raises(DesktopError, match="already running"):
            await provider.start("d-1")

        new = await provider.reset(handle)  # replace_instance: terminate + launch
        assert new.info["instance_id"] != instance_id
        assert describe(ec2, instance_id)["State"]["Name"] in ("shutting-down", "terminated")
        assert await provider.health(new) and not await provider.health(handle)

        await provider.stop(new)
        assert describe(ec2, new.info["instance_id"])["State"]["Name"] in (
            "shutting-down",
            "terminated",
        )
        assert await provider.list() == []
        await provider.stop(new)  # idempotent
    finally:
        await provider.close()


async def test_wait_ready_false_returns_once_running(network: dict[str, Any]) -> None:
    provider = AwsProvider(make_config(network, wait_ready=False, self_shutdown=False))
    try:
        handle = await provider.start("d-2")
        assert handle.info["state"] == "running"
        assert handle.url == f"http://{handle.info['private_ip']}:5000"
        assert await provider.health(handle)
        await provider.stop(handle)
    finally:
        await provider.close()


async def test_guest_that_never_answers_terminates_the_instance(network: dict[str, Any]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    provider = AwsProvider(
        make_config(network, ready_timeout_s=1.5), guest_url=lambda instance: dead
    )
    try:
        with pytest.raises(DesktopError, match="not ready within"):
            await provider.start("d-3")
        assert await provider.list() == []
        filters = [{"Name": "tag:cua-rl:desktop", "Values": ["d-3"]}]
        (instance,) = [
            i
            for r in network["ec2"].describe_instances(Filters=filters)["Reservations"]
            for i in r["Instances"]
        ]
        assert instance["State"]["Name"] in ("shutting-down", "terminated")
    finally:
        await provider.close()


async def test_sweep_terminates_expired_and_dead_runs_only(network: dict[str, Any]) -> None:
    ec2 = network["ec2"]
    now = datetime.now(UTC)

    def launch(tags: dict[str, str]) -> str:
        spec = [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
        return ec2.run_instances(
            ImageId=network["ami"], MinCount=1, MaxCount=1, TagSpecifications=spec
        )["Instances"][0]["InstanceId"]

    past = (now - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    future = (now + timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    expired = launch({"cua-rl:run": "a", "cua-rl:desktop": "d-0", "cua-rl:expires-at": past})
    fresh = launch({"cua-rl:run": "a", "cua-rl:desktop": "d-1", "cua-rl:expires-at": future})
    other = launch({"cua-rl:run": "b", "cua-rl:desktop": "d-0", "cua-rl:expires-at": future})
    foreign = launch({"Name": "not ours"})
    api = Ec2Api(make_config(network))
    try:
        planned = await sweep(api, None, dry_run=True)
        assert [s.instance_id for s in planned] == [expired]
        assert describe(ec2, expired)["State"]["Name"] == "running"

        swept = await sweep(api, None)
        assert [(s.instance_id, s.run) for s in swept] == [(expired, "a")]
        swept = await sweep(api, "b")
        assert [s.instance_id for s in swept] == [other]
        states = {i: describe(ec2, i)["State"]["Name"] for i in (expired, fresh, other, foreign)}
        assert states[fresh] == states[foreign] == "running"
        assert states[expired] != "running" and states[other] != "running"
    finally:
        await api.close()


def test_vm_sweep_command_dry_run_lists_without_terminating(network: dict[str, Any]) -> None:
    from click.testing import CliRunner

    from cua_rl.cli.vm import sweep_command

    ec2 = network["ec2"]
    spec = [
        {
            "ResourceType": "instance",
            "Tags": [
                {"Key": "cua-rl:run", "Value": "dead"},
                {"Key": "cua-rl:desktop", "Value": "d-0"},
                {"Key": "cua-rl:expires-at", "Value": "2099-01-01T00:00:00Z"},
            ],
        }
    ]
    instance_id = ec2.run_instances(
        ImageId=network["ami"], MinCount=1, MaxCount=1, TagSpecifications=spec
    )["Instances"][0]["InstanceId"]
    args = ["--run", "dead", "--endpoint-url", network["url"], "--region", REGION]
    result = CliRunner().invoke(sweep_command, [*args, "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    # stdout alone: a log handler an earlier test installed may write to stderr
    assert [s["instance_id"] for s in json.loads(result.stdout)] == [instance_id]
    assert describe(ec2, instance_id)["State"]["Name"] == "running"
    result = CliRunner().invoke(sweep_command, args)
    assert result.exit_code == 0 and f"terminated {instance_id}" in result.output
    assert describe(ec2, instance_id)["State"]["Name"] != "running"


def test_vm_up_list_down_with_the_aws_provider(network: dict[str, Any]) -> None:
    from click.testing import CliRunner

    from cua_rl.cli import cli

    sets = [
        f"endpoint_url={network['url']}",
        f"region={REGION}",
        f"ami_id={network['ami']}",
        f"subnet_id={network['subnet']}",
        "run_id=by-hand",
        "wait_ready=false",
        "self_shutdown=false",
        "poll_interval_s=0.05",
    ]
    args = ["--provider", "aws", *(a for s in sets for a in ("--set", s))]
    up = CliRunner().invoke(cli, ["vm", "up", *args, "--count", "2", "--json"])
    assert up.exit_code == 0, up.output
    ids = sorted(d["id"] for d in json.loads(up.stdout))  # stderr has the log lines
    listed = CliRunner().invoke(cli, ["vm", "list", *args, "--json"])
    assert listed.exit_code == 0 and sorted(d["id"] for d in json.loads(listed.stdout)) == ids
    down = CliRunner().invoke(cli, ["vm", "down", *args, "--all"])
    assert down.exit_code == 0 and all(f"stopped {i}" in down.output for i in ids), down.output
    assert json.loads(CliRunner().invoke(cli, ["vm", "list", *args, "--json"]).stdout) == []


def test_missing_credentials_are_one_line_not_a_traceback(tmp_path: Any) -> None:
    """`vm sweep --dry-run` and `vm list --provider aws` on a machine with no AWS
    credentials (no network: the credential lookup fails before any request)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        HOME=str(tmp_path),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
    )
    endpoint = f"http://127.0.0.1:{free_port()}"
    for args in (
        ["vm", "sweep", "--dry-run", "--endpoint-url", endpoint],
        ["vm", "list", "--provider", "aws", "--set", f"endpoint_url={endpoint}"],
        ["vm", "list", "--provider", "aws", "--set", "profile=nobody"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "cua_rl.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (args, done.stderr)
        assert "credentials" in lines[0] or "profile" in lines[0], lines[0]


CHECK_TOKEN = "aws-check-token-" + "k" * 16


async def test_check_provider_passes(network: dict[str, Any], tmp_path: Path) -> None:
    """`check_provider` with each instance served by a guest of its own
    (tests_support.instance_guests): start, auth, isolation, limits, reset by
    replacement, stop; cleanup is noted, not checked: instances go at their expiry,
    not with their owner (`AwsProvider.orphans`)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("Xvfb") is None:
        pytest.skip("instance guests need root, unshare and Xvfb (their private /tmp)")
    xvfb, display = start_xvfb(tmp_path / "xvfb.log", (1024, 768))
    guests = InstanceGuests(display, CHECK_TOKEN, tmp_path)
    provider = AwsProvider(
        make_config(network, guest_token=CHECK_TOKEN, ttl_s=3600),
        guest_url=guests.url,
        probe=guests.probe,
    )
    try:
        report = await check_provider(provider)
    finally:
        await provider.close()
        await guests.close()
        kill_group(xvfb)
    print(f"\ncheck_provider(aws): {report.seconds}")
    report.raise_if_failed()
    assert report.passed == [c for c in CHECKS if c != "cleanup"]
    assert report.notes == [
        "cleanup: not bound to an owner: an instance shuts itself down "
        "at its `cua-rl:expires-at` tag (launch + ttl_s, terminating it) "
        "and `cua-rl vm sweep` terminates expired ones"
    ]
