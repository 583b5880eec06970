"""Fixtures of the aws provider's tests: moto's EC2 as a real HTTP server on 127.0.0.1
(reached through `endpoint_url`, so boto3, our thread pool and our pagination all run
for real), a network in it, and a guest-protocol stub.

moto's instances have no guest behind them, so readiness is handled in two ways, both
tested: `guest_url` points every instance at the stub (aiohttp, /healthz + /platform)
and the real GuestClient probe polls it; and `wait_ready: false` skips the guest and
returns once EC2 says `running`.
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiohttp import web
from tests_support.moto_ec2 import REGION, SerializedMotoServer
from tests_support.servers import free_port


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    """One moto server for the module (starting it costs seconds); fake credentials
    so nothing can reach real AWS."""
    pytest.importorskip("moto.server")

    with pytest.MonkeyPatch.context() as patch:
        for key, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        }.items():
            patch.setenv(key, value)
        port = free_port()
        server = SerializedMotoServer(port)
        yield f"http://127.0.0.1:{port}"
        server.stop()


@pytest.fixture
def moto_url(moto_server: str) -> str:
    """The moto server with empty state (moto keeps state per process)."""
    with urllib.request.urlopen(
        urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST"), timeout=10
    ):
        pass
    return moto_server


@pytest.fixture
def network(moto_url: str) -> dict[str, Any]:
    """A VPC, subnet, security group (guest port open), key pair and an AMI in moto."""
    import boto3

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_url)
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="cua-rl-desktops", Description="guests", VpcId=vpc)[
        "GroupId"
    ]
    ec2.authorize_security_group_ingress(
        GroupId=group,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 5000,
                "ToPort": 5000,
                "IpRanges": [{"CidrIp": "10.9.0.0/16"}],
            }
        ],
    )
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
