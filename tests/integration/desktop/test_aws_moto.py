"""The aws provider and the sweep against moto's EC2 (a real HTTP server on
127.0.0.1, reached through `endpoint_url`, so boto3, our thread pool and our
pagination all run for real).

moto's instances have no guest behind them, so readiness is handled in two
ways, both tested: `guest_url` points every instance at a local guest-protocol
stub (aiohttp, /healthz + /platform) and the real GuestClient probe polls it;
and `wait_ready: false` skips the guest and returns once EC2 says `running`.
For image_kind `cua`, a real guest serves HTTPS with the pair the provider put in the
user data.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("moto.server")
import boto3  # noqa: E402
from aiohttp import web  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402
from tests_support.servers import free_port_run  # noqa: E402

from cua_rl.desktop.providers.aws import AwsProvider  # noqa: E402
from cua_rl.desktop.providers.aws_api import Ec2Api  # noqa: E402
from cua_rl.desktop.providers.aws_config import AwsProviderConfig  # noqa: E402
from cua_rl.desktop.providers.aws_sweep import sweep  # noqa: E402
from cua_rl.desktop.providers.aws_tls import instance_token, make_pair  # noqa: E402
from cua_rl.desktop.providers.base import GuestClients  # noqa: E402
from cua_rl.errors import DesktopError, GuestError  # noqa: E402

REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    """One moto server for the module (starting it costs seconds); fake credentials
    so nothing can reach real AWS."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION,
                           "AWS_CONFIG_FILE": "/dev/null",
                           "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}.items():
            patch.setenv(key, value)
        port = free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        yield f"http://127.0.0.1:{port}"
        server.stop()


@pytest.fixture
def moto_url(moto_server: str) -> str:
    """The moto server with empty state (moto keeps state per process)."""
    with urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/reset",
                                                       method="POST"), timeout=10):
        pass
    return moto_server


@pytest.fixture
def network(moto_url: str) -> dict[str, Any]:
    """A VPC, subnet, security group (guest port open), key pair and an AMI in moto."""
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url)
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="cua-rl-desktops", Description="guests",
                                      VpcId=vpc)["GroupId"]
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[{
        "IpProtocol": "tcp", "FromPort": 5000, "ToPort": 5000,
        "IpRanges": [{"CidrIp": "10.9.0.0/16"}]}])
    ec2.create_key_pair(KeyName="cua-rl-test")
    ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    return {"ec2": ec2, "subnet": subnet, "group": group, "ami": ami, "url": moto_url}


@pytest.fixture
async def guest_stub() -> AsyncIterator[str]:
    """A guest-protocol stub: what an OSWorld guest answers for readiness."""
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def platform(_: web.Request) -> web.Response:
        return web.Response(text="Linux")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/platform", platform)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


def make_config(network: dict[str, Any], **kwargs: Any) -> AwsProviderConfig:
    defaults = {"region": REGION, "endpoint_url": network["url"], "ami_id": network["ami"],
                "subnet_id": network["subnet"], "security_group_ids": [network["group"]],
                "key_name": "cua-rl-test", "run_id": "run-1", "poll_interval_s": 0.05,
                "ready_timeout_s": 30, "extra_tags": {"team": "rl"}}
    return AwsProviderConfig(**{**defaults, **kwargs})


def describe(ec2: Any, instance_id: str) -> dict[str, Any]:
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def tags_of(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


async def test_lifecycle_with_a_guest_stub(network: dict[str, Any], guest_stub: str) -> None:
    ec2 = network["ec2"]
    provider = AwsProvider(make_config(network, ttl_s=3600),
                           guest_url=lambda instance: guest_stub)
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
        user_data = ec2.describe_instance_attribute(InstanceId=instance_id,
                                                    Attribute="userData")["UserData"]["Value"]
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
            "shutting-down", "terminated")
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
    provider = AwsProvider(make_config(network, ready_timeout_s=1.5),
                           guest_url=lambda instance: dead)
    try:
        with pytest.raises(DesktopError, match="not ready within"):
            await provider.start("d-3")
        assert await provider.list() == []
        filters = [{"Name": "tag:cua-rl:desktop", "Values": ["d-3"]}]
        (instance,) = [i for r in network["ec2"].describe_instances(Filters=filters)
                       ["Reservations"] for i in r["Instances"]]
        assert instance["State"]["Name"] in ("shutting-down", "terminated")
    finally:
        await provider.close()


async def test_sweep_terminates_expired_and_dead_runs_only(network: dict[str, Any]) -> None:
    ec2 = network["ec2"]
    now = datetime.now(UTC)

    def launch(tags: dict[str, str]) -> str:
        spec = [{"ResourceType": "instance",
                 "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
        return ec2.run_instances(ImageId=network["ami"], MinCount=1, MaxCount=1,
                                 TagSpecifications=spec)["Instances"][0]["InstanceId"]

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

    from cua_rl.desktop.providers.aws_sweep import sweep_command

    ec2 = network["ec2"]
    spec = [{"ResourceType": "instance", "Tags": [
        {"Key": "cua-rl:run", "Value": "dead"}, {"Key": "cua-rl:desktop", "Value": "d-0"},
        {"Key": "cua-rl:expires-at", "Value": "2099-01-01T00:00:00Z"}]}]
    instance_id = ec2.run_instances(ImageId=network["ami"], MinCount=1, MaxCount=1,
                                    TagSpecifications=spec)["Instances"][0]["InstanceId"]
    args = ["--run", "dead", "--endpoint-url", network["url"], "--region", REGION]
    result = CliRunner().invoke(sweep_command, [*args, "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    assert [s["instance_id"] for s in json.loads(result.output)] == [instance_id]
    assert describe(ec2, instance_id)["State"]["Name"] == "running"
    result = CliRunner().invoke(sweep_command, args)
    assert result.exit_code == 0 and f"terminated {instance_id}" in result.output
    assert describe(ec2, instance_id)["State"]["Name"] != "running"


async def test_cua_instance_serving_another_certificate_fails_naming_it(
        network: dict[str, Any], tmp_path: Path) -> None:
    """A guest with a certificate other than the one the provider made (a man in the
    middle, an image that ignored its user data) is never trusted: the launch fails
    with the fingerprint it got, and the instance is terminated."""
    impostor = make_pair("impostor")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text(impostor.cert_pem)
    key.write_text(impostor.key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    async def platform(_: web.Request) -> web.Response:
        return web.Response(text="Linux")

    app = web.Application()
    app.router.add_get("/platform", platform)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    provider = AwsProvider(make_config(network, image_kind="cua", guest_token="t" * 24,
                                       ready_timeout_s=2),
                           guest_url=lambda instance: f"https://127.0.0.1:{port}")
    try:
        with pytest.raises(DesktopError, match=f"not the pinned one.*{impostor.fingerprint}"):
            await provider.start("d-mitm")
        assert await provider.list() == []
    finally:
        await provider.close()
        await runner.cleanup()


@pytest.mark.desktop
async def test_cua_image_a_real_tls_guest_with_the_pair_from_the_user_data(
        network: dict[str, Any], tmp_path: Path) -> None:
    """image_kind 'cua' end to end, EC2 faked only: the provider makes the pair, moto keeps
    the user data and tags, a real guest serves HTTPS with the pair from that user data,
    and clients built from handles (the pool's cache, health) pin its fingerprint."""
    from tests_support.guest_server import TOKEN, running_guest

    ec2 = network["ec2"]
    launcher = AwsProvider(make_config(network, image_kind="cua", guest_token=TOKEN,
                                       wait_ready=False))
    try:
        handle = await launcher.start("d-tls")
        instance_id = handle.info["instance_id"]
        assert handle.url == f"https://{handle.info['private_ip']}:5000"
        assert handle.token and handle.token != TOKEN  # the instance's own token
        assert tags_of(describe(ec2, instance_id))["cua-rl:tls-sha256"] == handle.tls_fingerprint
        user_data = base64.b64decode(ec2.describe_instance_attribute(
            InstanceId=instance_id, Attribute="userData")["UserData"]["Value"]).decode()
        files = {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}
        guest_dir = tmp_path / "etc"
        guest_dir.mkdir()
        for path, content in files.items():
            (guest_dir / Path(path).name).write_text(content)
        (guest_dir / "guest.key").chmod(0o600)
        assert (guest_dir / "token").read_text().strip() == handle.token
        args = ("--tls-cert", str(guest_dir / "guest.crt"), "--tls-key",
                str(guest_dir / "guest.key"))
        (tmp_path / "guest").mkdir()
        with running_guest(tmp_path / "guest", args=args, scheme="https",
                           token=handle.token) as guest:
            # another process of the run: knows the instance from its tags only
            other = AwsProvider(make_config(network, image_kind="cua", guest_token=TOKEN),
                                guest_url=lambda instance: guest.url)
            clients = GuestClients()
            try:
                (listed,) = await other.list()
                assert listed.tls_fingerprint == handle.tls_fingerprint
                assert listed.token == handle.token  # recomputed from the tag
                assert await other.health(listed)
                result = await clients.get(listed).execute(["echo", "pinned"])
                assert result.output == "pinned\n"
                forged = replace(listed, id="d-forged", tls_fingerprint="ab" * 32)
                with pytest.raises(GuestError, match="not the pinned one"):
                    await clients.get(forged).platform()
                assert not await other.health(forged)
                unpinned = replace(listed, id="d-unpinned", tls_fingerprint=None)
                assert not await other.health(unpinned)  # self-signed: no system CA has it
                run_secret = replace(listed, id="d-run-token", token=TOKEN)
                with pytest.raises(GuestError, match="HTTP 401"):
                    await clients.get(run_secret).platform()
            finally:
                await clients.close()
                await other.close()
        await launcher.stop(handle)
    finally:
        await launcher.close()
def test_vm_up_list_down_with_the_aws_provider(network: dict[str, Any]) -> None:
    from click.testing import CliRunner

    from cua_rl.cli import cli

    sets = [f"endpoint_url={network['url']}", f"region={REGION}", f"ami_id={network['ami']}",
            f"subnet_id={network['subnet']}", "run_id=by-hand", "wait_ready=false",
            "self_shutdown=false", "poll_interval_s=0.05"]
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
    env.update(HOME=str(tmp_path), AWS_EC2_METADATA_DISABLED="true",
               AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    endpoint = f"http://127.0.0.1:{free_port()}"
    for args in (["vm", "sweep", "--dry-run", "--endpoint-url", endpoint],
                 ["vm", "list", "--provider", "aws", "--set", f"endpoint_url={endpoint}"],
                 ["vm", "list", "--provider", "aws", "--set", "profile=nobody"]):
        done = subprocess.run([sys.executable, "-m", "cua_rl.cli", *args], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (args, done.stderr)
        assert "credentials" in lines[0] or "profile" in lines[0], lines[0]


# fleet hosts (image_kind fleet-host): K desktops per instance ---------------------------

FLEET_TOKEN = "fleet-run-token-" + "z" * 16


def fleet_user_data(ec2: Any, instance_id: str) -> dict[str, Any]:
    import gzip

    raw = ec2.describe_instance_attribute(InstanceId=instance_id,
                                          Attribute="userData")["UserData"]["Value"]
    return yaml.safe_load(gzip.decompress(base64.b64decode(raw)))


async def serve_fleet_host(user_data: dict[str, Any], root: Path, guest_port: int,
                           control_port: int, slots: int) -> tuple[Any, list[Any], Path]:
    """What the instance runs, on loopback: the agent from the user data's own files
    (pairs, control token) and, per slot, a guest stub on the slot's Unix socket that
    accepts only the slot's token from the user data. The desktop command records the
    slots it was asked to replace."""
    import asyncio

    from cua_rl.desktop.providers.aws_fleet_agent import serve

    files = {f["path"]: f["content"] for f in user_data["write_files"]}
    tls = root / "tls"
    tls.mkdir(parents=True)
    for path, content in files.items():
        if path.startswith("/etc/cua-fleet/tls/"):
            (tls / Path(path).name).write_text(content)
    log = root / "resets.log"
    command = root / "cua-fleet-desktop"
    command.write_text(f"#!/bin/sh\necho \"$1\" >> {log}\n")
    command.chmod(0o755)
    runners = []
    for slot in range(slots):
        token = files[f"/etc/cua-fleet/tokens/slot-{slot}"].strip()

        async def healthz(request: web.Request, token: str = token) -> web.Response:
            if request.headers.get("Authorization") != f"Bearer {token}":
                return web.json_response({"error": "bad token"}, status=401)
            return web.json_response({"status": "ok"})

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        runner = web.AppRunner(app)
        await runner.setup()
        (root / f"slot-{slot}" / "run").mkdir(parents=True)
        await web.UnixSite(runner, str(root / f"slot-{slot}" / "run" / "guest.sock")).start()
        runners.append(runner)
    agent = asyncio.create_task(serve({
        "slots": slots, "guest_port": guest_port, "control_port": control_port,
        "state_dir": str(root), "tls_dir": str(tls), "desktop_command": [str(command)],
        "bind": "127.0.0.1"}))
    deadline = asyncio.get_running_loop().time() + 10.0
    while True:  # poll until the agent listens (its last listener is the control port)
        assert not agent.done(), agent.exception()
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", control_port)
            writer.close()
            break
        except OSError:
            assert asyncio.get_running_loop().time() < deadline, "the agent never listened"
            await asyncio.sleep(0.02)
    return agent, runners, log


async def test_fleet_hosts_hold_k_desktops_each_over_pinned_tls_and_are_reset_and_released(
        network: dict[str, Any], tmp_path: Path) -> None:
    import asyncio

    import aiohttp

    ec2 = network["ec2"]
    k = 3
    guest_port = free_port_run(k + 1)
    control_port = guest_port + k
    provider = AwsProvider(
        make_config(network, image_kind="fleet-host", desktops_per_instance=k,
                    guest_token=FLEET_TOKEN, fleet_image_pull="registry.example/desk:1",
                    guest_port=guest_port, control_port=control_port, wait_ready=False,
                    poll_interval_s=0.05),
        host_address=lambda instance: "127.0.0.1")
    agent = None
    runners: list[Any] = []
    try:
        first = [await provider.start(f"d-{i}") for i in range(k + 1)]
        hosts = {h.info["instance_id"] for h in first}
        assert len(hosts) == 2, "K desktops share one instance, the K+1st gets a new one"
        host = first[0].info["instance_id"]
        assert [(h.info["instance_id"], h.info["slot"]) for h in first] == [
            (host, 0), (host, 1), (host, 2), ((hosts - {host}).pop(), 0)]
        assert [h.url for h in first[:k]] == [f"https://127.0.0.1:{guest_port + s}"
                                              for s in range(k)]
        tags = tags_of(describe(ec2, host))
        assert tags["cua-rl:kind"] == "fleet-host" and tags["cua-rl:run"] == "run-1"
        assert [tags[f"cua-rl:slot-{s}"] for s in range(k)] == ["d-0", "d-1", "d-2"]
        assert [h.tls_fingerprint for h in first[:k]] == [tags[f"cua-rl:tls-{s}"]
                                                         for s in range(k)]
        assert len(set(tags[f"cua-rl:tls-{s}"] for s in range(k))) == k  # a pair per desktop
        with pytest.raises(DesktopError, match="already running"):
            await provider.start("d-1")

        user_data = fleet_user_data(ec2, host)
        agent, runners, log = await serve_fleet_host(user_data, tmp_path, guest_port,
                                                     control_port, k)
        for handle in first[:k]:  # each guest through the agent's TLS, pinned, own token
            async with handle.guest_client() as client:
                assert await client.healthy(timeout=5.0), handle
        crossed = replace(first[1], tls_fingerprint=first[0].tls_fingerprint)
        async with crossed.guest_client() as client:
            assert not await client.healthy(timeout=5.0), "slot 1 must not pass slot 0's pin"
        stolen = replace(first[1], token=first[0].token)
        async with stolen.guest_client() as client:
            assert not await client.healthy(timeout=5.0), "slot 0's token must not open slot 1"

        control = first[0].info["control_url"]
        async with aiohttp.ClientSession() as session:
            from cua_rl.desktop.client import tls_settings

            pinned = tls_settings(control, first[0].info["control_pin"], None)
            async with session.post(f"{control}/slots/1/reset", ssl=pinned,
                                    headers={"Authorization": f"Bearer {FLEET_TOKEN}"}) as r:
                assert r.status == 401  # the run's token is not the host's
            async with session.post(f"{control}/slots/1/reset", ssl=pinned) as r:
                assert r.status == 401
            host_token = instance_token(FLEET_TOKEN, first[0].info["control_pin"])
            async with session.post(f"{control}/slots/{k}/reset", ssl=pinned,
                                    headers={"Authorization": f"Bearer {host_token}"}) as r:
                assert r.status == 404  # slots 0..K-1 only, and nothing but reset
            async with session.get(f"{control}/slots/0/reset", ssl=pinned,
                                   headers={"Authorization": f"Bearer {host_token}"}) as r:
                assert r.status == 404

        reset = await provider.reset(first[1])
        assert (reset.id, reset.url, reset.info["slot"]) == ("d-1", first[1].url, 1)
        assert log.read_text().split() == ["1"]
        assert await provider.health(reset)

        await provider.stop(first[1])  # the slot is replaced (fresh) and freed
        assert log.read_text().split() == ["1", "1"]
        assert "cua-rl:slot-1" not in tags_of(describe(ec2, host))
        assert [h.id for h in await provider.list()] == ["d-0", "d-2", "d-3"]
        again = await provider.start("d-4")  # lands in the freed slot, no new instance
        assert (again.info["instance_id"], again.info["slot"]) == (host, 1)
        for handle in (first[0], first[2]):
            await provider.stop(handle)
        assert describe(ec2, host)["State"]["Name"] == "running"  # d-4 still on it
        await provider.stop(again)
        assert describe(ec2, host)["State"]["Name"] in ("shutting-down", "terminated")

        # the other host dies: its desktop is unhealthy, stopping it retires its slot
        # (no reset on a dead host) and the replacement gets a new host
        other = first[k].info["instance_id"]
        ec2.terminate_instances(InstanceIds=[other])
        assert not await provider.health(first[k])
        await provider.stop(first[k])
        replacement = await provider.start("d-3")
        assert replacement.info["instance_id"] not in (host, other)
        assert [h.id for h in await provider.list()] == ["d-3"]
        await provider.stop(replacement)
    finally:
        if agent is not None:
            agent.cancel()
            await asyncio.gather(agent, return_exceptions=True)
        for runner in runners:
            await runner.cleanup()
        await provider.close()


async def test_pool_on_fleet_hosts_counts_k_per_instance_and_replaces_a_dead_host(
        network: dict[str, Any]) -> None:
    """The real DesktopPool over fleet hosts (K=2, 4 desktops): two instances; one dies,
    its two desktops are replaced on one new instance; closing ends every instance. No
    agent answers here, so the stops retire their slots (a host that cannot reset a slot
    never hands it out again) and the last one terminates the host."""
    import asyncio

    from cua_rl.desktop.pool import DesktopPool

    ec2 = network["ec2"]
    closed = free_port_run(3)  # nothing listens: control calls are refused at once
    provider = AwsProvider(
        make_config(network, image_kind="fleet-host", desktops_per_instance=2,
                    guest_token=FLEET_TOKEN, fleet_image_pull="registry.example/desk:1",
                    guest_port=closed, control_port=closed + 2, wait_ready=False),
        host_address=lambda instance: "127.0.0.1")

    def live() -> dict[str, list[str]]:
        found = ec2.describe_instances(Filters=[
            {"Name": "tag:cua-rl:run", "Values": ["run-1"]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]}])
        return {i["InstanceId"]: sorted(v for k, v in tags_of(i).items()
                                        if k.startswith("cua-rl:slot-"))
                for r in found["Reservations"] for i in r["Instances"]}

    pool = DesktopPool(provider, 4, id_prefix="a", health_interval_s=0.05,
                       failures_to_replace=1, retry_backoff_s=0.05)
    try:
        await pool.start()
        hosts = live()
        assert sorted(sum(hosts.values(), [])) == ["a-0", "a-1", "a-2", "a-3"]
        assert len(hosts) == 2 and all(len(v) == 2 for v in hosts.values())
        dead, survivor = sorted(hosts)
        ec2.terminate_instances(InstanceIds=[dead])
        deadline = asyncio.get_running_loop().time() + 30
        while pool.replacements < 2:  # poll the pool's own accounting, bounded
            assert asyncio.get_running_loop().time() < deadline, "no replacement"
            await asyncio.sleep(0.05)
        after = live()
        assert len(after) == 2 and survivor in after and dead not in after
        assert sorted(sum(after.values(), [])) == ["a-0", "a-1", "a-2", "a-3"]
        assert after[survivor] == hosts[survivor]  # the live host's desktops untouched
    finally:
        await pool.close()
        await provider.close()
    assert live() == {}, "closing the pool released every slot, so every host ended"
