"""Helpers of the aws provider's tests against moto's EC2 (tests/integration/desktop/aws/):
the provider config for a moto network, instance lookups, and a fleet host's agent
served on loopback from the user data the provider rendered."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import threading
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from cua_rl.desktop.providers.aws.config import AwsProviderConfig

REGION = "us-east-1"
FLEET_TOKEN = "fleet-run-token-" + "z" * 16


class SerializedMotoServer:
    """moto's EC2 on 127.0.0.1, one request at a time.

    moto's own ThreadedMotoServer answers each request on its own thread, but its EC2
    backend is not thread-safe: two concurrent RunInstances in one subnet race on the
    subnet's address generator ("generator already executing") and one gets an HTML 500
    that botocore cannot parse. Real EC2 has no such race, so the fake is serialized here
    (a lock around the WSGI app) rather than the provider taught to retry moto's bug."""

    def __init__(self, port: int) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        app = DomainDispatcherApplication(create_backend_app)
        lock = threading.Lock()

        def serialized(environ: dict[str, Any], start_response: Any) -> list[bytes]:
            with lock:
                return list(app(environ, start_response))

        self._server = make_server(
            "127.0.0.1", port, serialized, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="moto-ec2"
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)


def make_config(network: dict[str, Any], **kwargs: Any) -> AwsProviderConfig:
    defaults = {
        "region": REGION,
        "endpoint_url": network["url"],
        "ami_id": network["ami"],
        "subnet_id": network["subnet"],
        "security_group_ids": [network["group"]],
        "key_name": "cua-rl-test",
        "run_id": "run-1",
        "poll_interval_s": 0.05,
        "ready_timeout_s": 30,
        "extra_tags": {"team": "rl"},
    }
    return AwsProviderConfig(**{**defaults, **kwargs})


def describe(ec2: Any, instance_id: str) -> dict[str, Any]:
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def tags_of(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def fleet_user_data(ec2: Any, instance_id: str) -> dict[str, Any]:
    raw = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"][
        "Value"
    ]
    return yaml.safe_load(gzip.decompress(base64.b64decode(raw)))


async def serve_fleet_host(
    user_data: dict[str, Any],
    root: Path,
    guest_port: int,
    control_port: int,
    slots: int,
    bind: str = "127.0.0.1",
) -> tuple[Any, list[Any], Path]:
    """What the instance runs, on loopback: the agent from the user data's own files
    (pairs, control token, its config's initial leases) and, per slot, a guest stub on
    the slot's Unix socket that accepts only the slot's token from the user data. The
    desktop command records the slots it was asked to replace."""
    from cua_rl.desktop.providers.aws.fleet_agent import serve

    files = {f["path"]: f["content"] for f in user_data["write_files"]}
    tls = root / "tls"
    tls.mkdir(parents=True)
    for path, content in files.items():
        if path.startswith("/etc/cua-fleet/tls/"):
            (tls / Path(path).name).write_text(content)
    log = root / "resets.log"
    command = root / "cua-fleet-desktop"
    command.write_text(f'#!/bin/sh\necho "$1" >> {log}\n')
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
    leases = json.loads(files["/etc/cua-fleet/agent.json"])["leases"]
    agent = asyncio.create_task(
        serve(
            {
                "slots": slots,
                "guest_port": guest_port,
                "control_port": control_port,
                "state_dir": str(root),
                "tls_dir": str(tls),
                "desktop_command": [str(command)],
                "bind": bind,
                "leases": leases,
            }
        )
    )
    deadline = asyncio.get_running_loop().time() + 10.0
    while True:  # poll until the agent listens (its last listener is the control port)
        assert not agent.done(), agent.exception()
        try:
            _, writer = await asyncio.open_connection(bind, control_port)
            writer.close()
            break
        except OSError:
            assert asyncio.get_running_loop().time() < deadline, "the agent never listened"
            await asyncio.sleep(0.02)
    return agent, runners, log


class FleetAgents:
    """The agent of every fleet host moto lists, each served (`serve_fleet_host`) on
    its own loopback address 127.0.0.<n> from its own user data as soon as the host
    appears, and stopped when it terminates: what the instances would run. Pass
    `address` as the provider's `host_address`."""

    def __init__(
        self, ec2: Any, root: Path, guest_port: int, control_port: int, slots: int
    ) -> None:
        self.ec2, self.root = ec2, root
        self.ports, self.slots = (guest_port, control_port), slots
        self.addresses: dict[str, str] = {}
        self.served: dict[str, tuple[Any, list[Any], Path]] = {}
        self._watch: asyncio.Task[None] | None = None

    def address(self, instance: dict[str, Any]) -> str:
        return self.addresses.setdefault(
            instance["InstanceId"], f"127.0.0.{len(self.addresses) + 2}"
        )

    def resets(self, instance_id: str) -> list[str]:
        """The slots the host's desktop command was run for (resets and releases)."""
        log = self.served[instance_id][2]
        return log.read_text().split() if log.exists() else []

    async def __aenter__(self) -> FleetAgents:
        self._watch = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._watch is not None
        self._watch.cancel()
        await asyncio.gather(self._watch, return_exceptions=True)
        for instance_id in list(self.served):
            await self._stop(instance_id)

    async def _run(self) -> None:
        while True:
            found = await asyncio.to_thread(
                self.ec2.describe_instances,
                Filters=[{"Name": "tag:cua-rl:kind", "Values": ["fleet-host"]}],
            )
            for instance in (i for r in found["Reservations"] for i in r["Instances"]):
                instance_id, state = instance["InstanceId"], instance["State"]["Name"]
                if state == "running" and instance_id not in self.served:
                    data = await asyncio.to_thread(fleet_user_data, self.ec2, instance_id)
                    root = self.root / f"h{len(self.served)}"  # short: socket paths
                    self.served[instance_id] = await serve_fleet_host(
                        data, root, *self.ports, self.slots, bind=self.address(instance)
                    )
                elif state != "running" and instance_id in self.served:
                    await self._stop(instance_id)
            await asyncio.sleep(0.02)

    async def _stop(self, instance_id: str) -> None:
        agent, runners, _ = self.served[instance_id]
        if not agent.done():
            agent.cancel()
            await asyncio.gather(agent, return_exceptions=True)
            for runner in runners:
                await runner.cleanup()
