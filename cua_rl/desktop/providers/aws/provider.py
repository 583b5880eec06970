"""The `aws` provider: OSWorld desktops as EC2 instances of the OSWorld AMI.

An instance is found by its tags (`cua-rl:run`, `cua-rl:desktop`), never by
local state, so any process of the run can list, reset and stop it. Nothing may
leak: every launch carries `cua-rl:expires-at` (now + ttl_s) and shutdown
behaviour `terminate` (plus, by default, user data that shuts the instance down
at that time); a launch that does not become ready is terminated before the
error propagates; `sweep` (aws/sweep.py) terminates the rest.

Reset replaces the instance by default (terminate + launch: the only revert
that needs no API beyond RunInstances, the one OSWorld uses too);
`reset_mode: replace_root_volume` keeps the instance and restores its root
volume to the launch state with a CreateReplaceRootVolumeTask.

Two kinds of AMI (`image_kind`): OSWorld's public one (its server, plain http, no
auth) and ours (`cua`: our guest over HTTPS). For ours each launch makes a
certificate on the host, sends it with a token derived for that instance in the
user data and tags the instance with its fingerprint, which every handle then
pins (aws/tls.py). A third kind, `fleet-host`, runs `desktops_per_instance`
container desktops on each instance (aws/fleet.py, aws/fleet_hosts.py).

The guest on an instance (its URL, pin and token in the handle, waiting until it
answers) is in aws/instance_guest.py; this module handles the instances.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from cua_rl.desktop.providers.aws.api import Ec2Api
from cua_rl.desktop.providers.aws.config import (
    OSWORLD_AMIS,
    TAG_DESKTOP,
    TAG_EXPIRES,
    TAG_RUN,
    AwsProviderConfig,
)
from cua_rl.desktop.providers.aws.fleet import FleetLaunch
from cua_rl.desktop.providers.aws.fleet_hosts import FleetHosts
from cua_rl.desktop.providers.aws.instance_guest import (
    GuestUrl,
    address,
    default_url,
    instance_handle,
    wait_guest,
)
from cua_rl.desktop.providers.aws.launch import expires_at, launch_params
from cua_rl.desktop.providers.aws.tls import make_pair
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.core import ProviderCore, poll_until, wait_watching
from cua_rl.desktop.providers.local.state import check_desktop_id
from cua_rl.errors import DesktopError, Ec2Error

LIVE_STATES = ["pending", "running", "stopping", "stopped"]
Probe = Callable[[DesktopHandle, float], Awaitable[None]]


class AwsProvider(ProviderCore):
    """EC2 instances tagged per run and desktop; see the module docstring.

    `guest_url` maps an instance description to its guest URL (default: its
    private or public IP and `guest_port`) and `probe` waits until that guest
    answers (default: `GuestClient.wait_ready`); both are injectable because
    tests against moto have instances without a guest behind them. `host_address`
    (fleet hosts) maps an instance to the address of its guest and control ports
    (default: the `address` IP), so tests can serve a host's ports on loopback.
    """

    type = "aws"
    orphans = (
        "an instance shuts itself down at its `cua-rl:expires-at` tag (launch + "
        "ttl_s, terminating it) and `cua-rl vm sweep` terminates expired ones"
    )
    cannot_fork = (
        "EC2 images a stopped instance's disk (an AMI), never a running one's "
        "memory, so groups set up per rollout"
    )

    def __init__(
        self,
        config: AwsProviderConfig | None = None,
        *,
        api: Ec2Api | None = None,
        guest_url: GuestUrl | None = None,
        probe: Probe | None = None,
        host_address: Callable[[dict[str, Any]], str] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__()
        self.config = config or AwsProviderConfig()
        self.api = api or Ec2Api(self.config)
        self._guest_url = guest_url or (lambda instance: default_url(self.config, instance))
        self.host_address = host_address or self._address
        self._fleet = FleetHosts(self) if self.config.image_kind == "fleet-host" else None
        self._probe = probe or wait_guest
        self._clock = clock
        self._root_device: str | None = None
        self._states: tuple[float, dict[str, str]] | None = None
        self._states_refresh: asyncio.Future[list[dict[str, Any]]] | None = None

    # public API ---------------------------------------------------------------

    async def start(self, desktop_id: str) -> DesktopHandle:
        check_desktop_id(desktop_id)
        if self._fleet is not None:
            return await self._fleet.start(desktop_id)
        existing = await self._find(desktop_id)
        if existing:
            ids = ", ".join(i["InstanceId"] for i in existing)
            raise DesktopError(
                f"desktop {desktop_id!r} of run {self.config.run_id!r} is already running ({ids})"
            )
        return await self._launch(desktop_id)

    async def _reset(self, handle: DesktopHandle) -> DesktopHandle:
        if self._fleet is not None:
            return await self._fleet.reset(handle)
        if self.config.reset_mode == "replace_root_volume":
            return await self._replace_root_volume(handle)
        await self.stop(handle)
        return await self._launch(handle.id)

    async def stop(self, handle: DesktopHandle) -> None:
        """Terminate the handle's instance and any other live one with its tags
        (a handle may come from another process); returns without waiting. A fleet
        host's desktop frees its slot, and the last one terminates the host."""
        await self._clients.drop(handle.id)
        if self._fleet is not None:
            return await self._fleet.stop(handle)
        ids = {i["InstanceId"] for i in await self._find(handle.id)}
        if handle.info.get("instance_id"):
            ids.add(str(handle.info["instance_id"]))
        self._states = None  # a cached `running` of these would be a lie now
        await self.api.terminate(sorted(ids))

    async def health(self, handle: DesktopHandle) -> bool:
        """Instance `running` (and the guest answering, with `wait_ready`)."""
        if not self.config.wait_ready:
            return await self._running(handle)
        return await super().health(handle)

    async def _running(self, handle: DesktopHandle) -> bool:
        """The instance is `running`.

        The pool asks every idle desktop every few seconds; one DescribeInstances
        per desktop would exhaust EC2's request budget for a few hundred desktops,
        so states come from one run-wide describe shared by concurrent callers
        and reused for `poll_interval_s`."""
        instance_id = str(handle.info.get("instance_id") or "")
        if not instance_id:
            return False
        state = (await self._run_states()).get(instance_id)
        if state is None:  # launched after the snapshot: ask about it alone
            try:
                found = await self.api.instances(ids=[instance_id])
            except Ec2Error as exc:
                if exc.code == "InvalidInstanceID.NotFound":
                    return False
                raise
            state = found[0]["State"]["Name"] if found else None
        return state == "running"

    async def remains(self, handle: DesktopHandle) -> builtins.list[str]:
        found = {i["InstanceId"]: i["State"]["Name"] for i in await self._find(handle.id)}
        return [f"instance {i} ({state})" for i, state in sorted(found.items())]

    async def list(self) -> list[DesktopHandle]:
        if self._fleet is not None:
            return await self._fleet.list()
        instances = await self.api.instances(filters=self._filters())
        return sorted((self._handle(i) for i in instances), key=lambda h: h.id)

    async def sweep(self, run_id: str | None = None, *, dry_run: bool = False) -> list[Any]:
        """Terminate instances of run `run_id` (all of them), or with no run, every
        cua-rl instance past its expiry; see `aws.sweep.sweep`."""
        from cua_rl.desktop.providers.aws.sweep import sweep

        return await sweep(self.api, run_id, now=self._clock(), dry_run=dry_run)

    async def close(self) -> None:
        await super().close()
        await self.api.close()

    # internals ----------------------------------------------------------------

    async def _run_states(self) -> dict[str, str]:
        """instance id -> state of the run's instances, at most `poll_interval_s` old."""
        now = time.monotonic()
        if self._states is not None and now - self._states[0] < self.config.poll_interval_s:
            return self._states[1]
        if self._states_refresh is None:
            self._states_refresh = asyncio.ensure_future(
                self.api.instances(
                    filters=[{"Name": f"tag:{TAG_RUN}", "Values": [self.config.run_id]}]
                )
            )
        refresh = self._states_refresh
        try:
            instances = await asyncio.shield(refresh)
        finally:
            if self._states_refresh is refresh and refresh.done():
                self._states_refresh = None
        states = {i["InstanceId"]: i["State"]["Name"] for i in instances}
        self._states = (now, states)
        return states

    def _filters(self, desktop_id: str | None = None) -> list[dict[str, Any]]:
        filters = [
            {"Name": f"tag:{TAG_RUN}", "Values": [self.config.run_id]},
            {"Name": "instance-state-name", "Values": LIVE_STATES},
        ]
        if desktop_id is not None:
            filters.append({"Name": f"tag:{TAG_DESKTOP}", "Values": [desktop_id]})
        return filters

    async def _find(self, desktop_id: str) -> builtins.list[dict[str, Any]]:
        return await self.api.instances(filters=self._filters(desktop_id))

    def _ami(self) -> str:
        ami = self.config.ami_id or OSWORLD_AMIS.get(self.config.region)
        if ami is None:
            raise DesktopError(
                f"aws provider: no OSWorld AMI known for region {self.config.region!r} "
                f"(known: {', '.join(OSWORLD_AMIS)}); copy it there with `aws ec2 "
                "copy-image` and set `ami_id`"
            )
        return ami

    async def _root_device_name(self, ami: str) -> str | None:
        if self.config.root_volume_gb and self._root_device is None:
            images = (await self.api.call("describe_images", ImageIds=[ami])).get("Images", [])
            self._root_device = images[0].get("RootDeviceName") if images else None
        return self._root_device

    async def _run_instance(self, desktop_id: str, fleet: FleetLaunch | None = None) -> str:
        """RunInstances for one desktop (or fleet host); its instance id."""
        ami = self._ami()
        pair = None
        if self.config.image_kind == "cua":
            pair = make_pair(f"cua-rl {self.config.run_id} {desktop_id}", self._clock())
        params = launch_params(
            self.config,
            desktop_id,
            ami,
            self._clock(),
            await self._root_device_name(ami),
            pair,
            fleet,
        )
        reservation = await self.api.call("run_instances", **params)
        return str(reservation["Instances"][0]["InstanceId"])

    async def _launch(self, desktop_id: str) -> DesktopHandle:
        """RunInstances, wait for `running` and the guest; terminate on any failure."""
        instance_id = await self._run_instance(desktop_id)
        try:
            return await self._until_ready(
                instance_id, time.monotonic() + self.config.ready_timeout_s
            )
        except BaseException:
            await asyncio.shield(self.api.terminate([instance_id]))
            raise

    async def _until_ready(self, instance_id: str, deadline: float) -> DesktopHandle:
        instance = await self._wait_running(instance_id, deadline)
        handle = self._handle(instance)
        if self.config.wait_ready:  # watching the instance: one that dies fails now
            await wait_watching(
                self._probe(handle, max(1.0, deadline - time.monotonic())),
                lambda: self._wait_running(instance_id, deadline),
                self.config.poll_interval_s,
            )
        return handle

    async def _wait_running(self, instance_id: str, deadline: float) -> dict[str, Any]:
        """Poll DescribeInstances until `running` with an address; an instance that
        stops or terminates on its own is an error naming EC2's reason."""
        running: dict[str, dict[str, Any]] = {}

        async def step() -> bool:
            try:
                found = await self.api.instances(ids=[instance_id])
            except Ec2Error as exc:  # a new id may not be visible yet (eventual consistency)
                if exc.code != "InvalidInstanceID.NotFound":
                    raise
                found = []
            state = found[0]["State"]["Name"] if found else None
            if state in ("shutting-down", "terminated", "stopping", "stopped"):
                reason = found[0].get("StateReason", {}).get("Message", "no reason given")
                raise DesktopError(f"aws provider: instance {instance_id} is {state}: {reason}")
            if state == "running" and self._address(found[0]):
                running["instance"] = found[0]
            return bool(running)

        await poll_until(
            f"aws provider: instance {instance_id} running",
            step,
            deadline=deadline,
            interval_s=self.config.poll_interval_s,
            limit_s=self.config.ready_timeout_s,
        )
        return running["instance"]

    async def _replace_root_volume(self, handle: DesktopHandle) -> DesktopHandle:
        """Restore the root volume to its launch state in place; refresh the expiry."""
        instance_id = str(handle.info["instance_id"])
        deadline = time.monotonic() + self.config.ready_timeout_s
        task = (
            await self.api.call(
                "create_replace_root_volume_task",
                InstanceId=instance_id,
                DeleteReplacedRootVolume=True,
            )
        )["ReplaceRootVolumeTask"]
        task_id = task["ReplaceRootVolumeTaskId"]
        first = [task]

        async def step() -> bool:
            current = (
                first.pop()
                if first
                else (
                    await self.api.call(
                        "describe_replace_root_volume_tasks", ReplaceRootVolumeTaskIds=[task_id]
                    )
                )["ReplaceRootVolumeTasks"][0]
            )
            if current.get("TaskState") in ("failed", "failed-detached", "failing"):
                raise DesktopError(
                    f"aws provider: replacing the root volume of {instance_id} "
                    f"failed ({task_id}: {current.get('TaskState')})"
                )
            return current.get("TaskState") == "succeeded"

        await poll_until(
            f"aws provider: root volume task {task_id}",
            step,
            deadline=deadline,
            interval_s=self.config.poll_interval_s,
            limit_s=self.config.ready_timeout_s,
        )
        await self.api.call(
            "create_tags",
            Resources=[instance_id],
            Tags=[{"Key": TAG_EXPIRES, "Value": expires_at(self._clock(), self.config.ttl_s)}],
        )
        return await self._until_ready(instance_id, deadline)

    def _address(self, instance: dict[str, Any]) -> str | None:
        return address(self.config, instance)

    def _handle(self, instance: dict[str, Any]) -> DesktopHandle:
        return instance_handle(self.config, instance, self._guest_url, self.type)
