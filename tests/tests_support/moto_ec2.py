"""Helpers of the aws provider's tests against moto's EC2 (tests/integration/desktop/aws/):
the provider config for a moto network, instance lookups, and a fleet host's agent
served on loopback from the user data the provider rendered."""

from __future__ import annotations

import base64
import gzip
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from cua_rl.desktop.providers.aws_config import AwsProviderConfig

REGION = "us-east-1"
FLEET_TOKEN = "fleet-run-token-" + "z" * 16


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


def fleet_user_data(ec2: Any, instance_id: str) -> dict[str, Any]:
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

