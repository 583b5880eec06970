"""Desktops as slots of fleet hosts (`image_kind: fleet-host`), for the aws provider.

Each instance holds `desktops_per_instance` (K) slots. Who holds a slot is decided
by the host's agent alone (aws/fleet_agent.py: `POST /claim/<id>` leases the lowest
free slot, one request at a time), because the processes of a run live on different
machines and EC2 tags have no conditional write: two processes that both read a
slot as free from the tags would both take it. The tags are the record the run
lists from: `cua-rl:slot-<i>` names the desktop holding slot i (absent: free; `-`:
retired, never handed out again), written after the agent's lease and removed
only while they still name the releasing desktop (a conditional DeleteTags).
The process running the pool also keeps its own view, ahead of EC2's eventually
consistent tags. Starting a desktop asks the agent of each live host that the
tags show with a free slot (waiting for a host that is still booting), or
launches a new host with the desktop in slot 0 (leased in the agent's config).
A free slot always holds a fresh container: the host starts fresh ones at boot,
and `stop` releases the slot through the agent, which starts a new container
before freeing the lease (a slot whose container fails is retired). The release
that leaves no slot leased closes the agent to claims, and that process
terminates the host.

An instance that dies takes its K desktops with it: `health` (instance state from
the run-wide describe) turns false for all K at once, the pool stops each (no
agent to release through: the slot is retired) and starts replacements, which
land on a live host with free slots or on a new one; the dead host is terminated
with its last release (and by the sweep / its ttl shutdown in any case).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from typing import Any, Protocol

import aiohttp

from cua_rl.desktop.client import tls_settings
from cua_rl.desktop.providers.aws.api import Ec2Api
from cua_rl.desktop.providers.aws.config import TAG_RUN, AwsProviderConfig
from cua_rl.desktop.providers.aws.fleet import TAG_KIND, TAG_SLOT, TAG_TLS_SLOT, FleetLaunch
from cua_rl.desktop.providers.aws.instance_guest import pinned_fingerprint
from cua_rl.desktop.providers.aws.tls import instance_token, make_pair
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.errors import DesktopError, Ec2Error


class FleetProvider(Protocol):
    """What fleet hosts use of their `AwsProvider`: a protocol rather than an import,
    because aws.py imports this module (no import cycle)."""

    config: AwsProviderConfig
    api: Ec2Api
    type: str
    host_address: Any
    _address: Any
    _clock: Any
    _handle: Any
    _probe: Any
    _run_instance: Any
    _states: Any
    _wait_running: Any


log = logging.getLogger(__name__)
RETIRED = "-"
LIVE = ("pending", "running")
CONTROL_TIMEOUT_S = 150.0
"""Longer than the agent's own bound on one container replacement (120 s)."""


class FleetHosts:
    """The fleet-host part of an `AwsProvider`; see the module docstring."""

    def __init__(self, provider: FleetProvider) -> None:
        self.p = provider
        self.k = provider.config.desktops_per_instance
        self._lock = asyncio.Lock()
        self._claims: dict[str, dict[int, str | None]] = {}
        self._unreachable: set[str] = set()

    async def start(self, desktop_id: str) -> DesktopHandle:
        deadline = time.monotonic() + self.p.config.ready_timeout_s
        async with self._lock:
            hosts = await self._hosts()
            for instance in hosts:
                if desktop_id in self.slots(instance).values():
                    raise DesktopError(
                        f"desktop {desktop_id!r} of run {self.p.config.run_id!r} "
                        f"is already running ({instance['InstanceId']})"
                    )
            instance_id, slot = await self._claim(hosts, desktop_id, deadline)
        try:
            instance = await self.p._wait_running(instance_id, deadline)
            handle = self.handle(instance, slot)
            if self.p.config.wait_ready:
                await self.p._probe(handle, max(1.0, deadline - time.monotonic()))
            return handle
        except BaseException:
            await asyncio.shield(self._free(instance_id, slot, desktop_id))
            raise

    async def reset(self, handle: DesktopHandle) -> DesktopHandle:
        """A new container in the desktop's slot (through the host's control endpoint)."""
        deadline = time.monotonic() + self.p.config.ready_timeout_s
        instance_id, slot = str(handle.info["instance_id"]), int(handle.info["slot"])
        instance = await self.p._wait_running(instance_id, deadline)
        new = self.handle(instance, slot)
        await self.reset_slot(new)
        if self.p.config.wait_ready:
            await self.p._probe(new, max(1.0, deadline - time.monotonic()))
        return new

    async def stop(self, handle: DesktopHandle) -> None:
        """Release the desktop's slot through its host's agent (fresh again, or
        retired); terminate a host with no desktop left."""
        located = await self._locate(handle)
        if located is None:
            return
        instance, slot = located
        await self._free(instance["InstanceId"], slot, handle.id, instance)

    async def list(self) -> list[DesktopHandle]:
        handles = [
            self.handle(instance, slot)
            for instance in await self._hosts(live=False)
            for slot, holder in self.slots(instance).items()
            if holder != RETIRED
        ]
        return sorted(handles, key=lambda h: h.id)

    # slots and handles ----------------------------------------------------------

    def slots(self, instance: dict[str, Any]) -> dict[int, str]:
        """slot -> holder (a desktop id or RETIRED) of one host; free slots are absent."""
        held: dict[int, str | None] = {}
        for item in instance.get("Tags", []) or []:
            key = str(item.get("Key", ""))
            if key.startswith(TAG_SLOT) and key[len(TAG_SLOT) :].isdigit():
                held[int(key[len(TAG_SLOT) :])] = item.get("Value")
        held.update(self._claims.get(instance["InstanceId"], {}))
        return {slot: holder for slot, holder in held.items() if holder and slot < self.k}

    def handle(self, instance: dict[str, Any], slot: int) -> DesktopHandle:
        """Slot `slot` of a host: `https://IP:guest_port+slot`, pinned to the slot's tag."""
        base = self.p._handle(instance)
        holder = self.slots(instance).get(slot, "")
        address = self.p.host_address(instance) if self.p._address(instance) else None
        pin = pinned_fingerprint(instance, f"{TAG_TLS_SLOT}{slot}")
        control_pin = pinned_fingerprint(instance, f"{TAG_TLS_SLOT}control")
        run_token = self.p.config.guest_token or ""
        url = f"https://{address}:{self.p.config.guest_port + slot}" if address else ""
        return DesktopHandle(
            id=holder if holder and holder != RETIRED else f"{instance['InstanceId']}/{slot}",
            url=url,
            token=instance_token(run_token, pin) if pin else None,
            provider=self.p.type,
            tls_fingerprint=pin,
            info={
                **base.info,
                "slot": slot,
                "control_pin": control_pin,
                "control_url": f"https://{address}:{self.p.config.control_port}" if address else "",
            },
        )

    async def reset_slot(self, handle: DesktopHandle) -> None:
        """`POST /slots/<i>/reset` on the handle's host; a DesktopError naming the host,
        the slot and the answer when it is not a 200."""
        where = (
            f"aws provider: fleet host {handle.info.get('instance_id')} slot "
            f"{handle.info.get('slot')}"
        )
        status, body = await self._control(handle, f"/slots/{handle.info['slot']}/reset")
        if status != 200:
            raise DesktopError(f"{where}: reset answered {status}: {body}")

    async def _control(self, handle: DesktopHandle, path: str) -> tuple[int, dict[str, Any]]:
        """POST `path` on the control endpoint of the handle's host (pinned, with the
        host's token): the status and the JSON answer; DesktopError when the agent
        cannot be reached or does not answer JSON."""
        url, pin = str(handle.info.get("control_url") or ""), handle.info.get("control_pin")
        where = f"aws provider: fleet host {handle.info.get('instance_id')} {path}"
        if not url or not pin:
            raise DesktopError(f"{where}: no control address or no pinned control certificate")
        token = instance_token(self.p.config.guest_token or "", str(pin))
        timeout = aiohttp.ClientTimeout(total=CONTROL_TIMEOUT_S, connect=10.0)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(
                    f"{url}{path}",
                    ssl=tls_settings(url, pin, None),
                    headers={"Authorization": f"Bearer {token}"},
                ) as answer,
            ):
                text = await answer.text()
                status = answer.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DesktopError(f"{where}: failed: {exc!r}") from exc
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise DesktopError(f"{where}: answered {status} with no JSON object: {text[:300]!r}")
        return status, body

    # internals ------------------------------------------------------------------

    async def _hosts(self, live: bool = True) -> list[dict[str, Any]]:
        """The run's fleet hosts, with the ones this process launched or claimed on that
        EC2's describe does not list yet (eventual consistency): a start right after a
        launch must see the new host's free slots, not launch another host."""
        states = list(LIVE) if live else ["pending", "running", "stopping", "stopped"]
        hosts = await self._described(states)
        missing = [i for i in self._claims if i not in {h["InstanceId"] for h in hosts}]
        if missing:
            try:
                extra = await self.p.api.instances(ids=missing)
            except Ec2Error as exc:
                if exc.code != "InvalidInstanceID.NotFound":
                    raise
                extra = []
            hosts += [h for h in extra if h["State"]["Name"] in states]
        return hosts

    async def _described(self, states: list[str]) -> list[dict[str, Any]]:
        return await self.p.api.instances(
            filters=[
                {"Name": f"tag:{TAG_RUN}", "Values": [self.p.config.run_id]},
                {"Name": f"tag:{TAG_KIND}", "Values": ["fleet-host"]},
                {"Name": "instance-state-name", "Values": states},
            ]
        )

    async def _claim(
        self, hosts: list[dict[str, Any]], desktop_id: str, deadline: float
    ) -> tuple[str, int]:
        """A slot leased by the agent of a live host with a free slot (tagged to
        `desktop_id`), or slot 0 of a new host."""
        for instance in hosts:
            instance_id = instance["InstanceId"]
            if instance_id in self._unreachable or len(self.slots(instance)) >= self.k:
                continue
            slot = await self._lease(instance, desktop_id, deadline)
            if slot is None:
                continue
            self._claims.setdefault(instance_id, {})[slot] = desktop_id
            try:
                await self.p.api.call(
                    "create_tags",
                    Resources=[instance_id],
                    Tags=[{"Key": f"{TAG_SLOT}{slot}", "Value": desktop_id}],
                )
            except BaseException:  # a lease nobody would ever release: give it back
                await asyncio.shield(self._free(instance_id, slot, desktop_id, locked=True))
                raise
            return instance_id, slot
        name = f"cua-rl {self.p.config.run_id}"
        now = self.p._clock()
        # K+1 key pairs take ~3 ms each (about 50 ms for K = 16, measured): off the loop
        fleet = await asyncio.to_thread(
            lambda: FleetLaunch(
                [make_pair(f"{name} slot {i}", now) for i in range(self.k)],
                make_pair(f"{name} control", now),
                desktop_id,
            )
        )
        instance_id = await self.p._run_instance(f"host-{secrets.token_hex(6)}", fleet=fleet)
        self._claims[instance_id] = {0: desktop_id}
        return instance_id, 0

    async def _lease(
        self, instance: dict[str, Any], desktop_id: str, deadline: float
    ) -> int | None:
        """`POST /claim/<id>` on the host's agent: the slot it leased, or None when the
        host is full or closed. A host still booting is waited for (its desktops could
        not answer earlier anyway); one whose agent never answers by the deadline is
        skipped from then on."""
        instance_id = instance["InstanceId"]
        while True:
            try:
                if instance["State"]["Name"] != "running":
                    instance = await self.p._wait_running(instance_id, deadline)
                status, body = await self._control(self.handle(instance, 0), f"/claim/{desktop_id}")
                break
            except DesktopError as exc:
                if time.monotonic() >= deadline or instance["State"]["Name"] != "running":
                    log.warning("%s; no desktops placed on %s any more", exc, instance_id)
                    self._unreachable.add(instance_id)
                    return None
                await asyncio.sleep(self.p.config.poll_interval_s)
        if status == 409:
            return None
        slot = body.get("slot")
        if status != 200 or not isinstance(slot, int) or not 0 <= slot < self.k:
            raise DesktopError(
                f"aws provider: fleet host {instance_id} answered a claim "
                f"with {status} {body}; expected 200 and a slot 0..{self.k - 1}"
            )
        return slot

    async def _locate(self, handle: DesktopHandle) -> tuple[dict[str, Any], int] | None:
        """The host and slot holding `handle.id` (by tags: a handle may come from
        another process), or None when no live host holds it."""
        for instance in await self._hosts(live=False):
            for slot, holder in self.slots(instance).items():
                if holder == handle.id:
                    return instance, slot
        return None

    async def _free(
        self,
        instance_id: str,
        slot: int,
        holder: str,
        instance: dict[str, Any] | None = None,
        locked: bool = False,
    ) -> None:
        """Give the slot back through the host's agent (a fresh container, then the
        lease freed); a host that cannot (not running, agent unreachable) keeps the
        slot retired. Terminates the host once no desktop holds a slot."""
        if instance is None:
            found = await self._described_ids([instance_id])
            instance = found[0] if found else None
        answer: tuple[int, dict[str, Any]] | None = None
        if instance is not None and instance["State"]["Name"] == "running":
            try:
                answer = await self._control(
                    self.handle(instance, slot), f"/slots/{slot}/release/{holder}"
                )
            except DesktopError as exc:
                log.warning("%s; retiring slot %d of %s", exc, slot, instance_id)
        if locked:
            await self._release(instance_id, slot, holder, answer)
        else:
            async with self._lock:
                await self._release(instance_id, slot, holder, answer)

    async def _release(
        self, instance_id: str, slot: int, holder: str, answer: tuple[int, dict[str, Any]] | None
    ) -> None:
        """Record the agent's answer to a release in the tags (slot free, retired, or
        not ours: left alone) and terminate the host when it closed, or, with no
        answer, when the tags show no desktop left."""
        key = f"{TAG_SLOT}{slot}"
        status = answer[0] if answer else None
        try:
            if status in (200, 409):  # freed, or the agent says it was never ours
                await self.p.api.call(
                    "delete_tags", Resources=[instance_id], Tags=[{"Key": key, "Value": holder}]
                )  # only our own
            else:
                await self.p.api.call(
                    "create_tags", Resources=[instance_id], Tags=[{"Key": key, "Value": RETIRED}]
                )
        except Ec2Error as exc:  # a host already gone has nothing left to free
            if exc.code != "InvalidInstanceID.NotFound":
                raise
        self._claims.setdefault(instance_id, {})[slot] = None if status in (200, 409) else RETIRED
        if answer is not None:
            closed = bool(answer[1].get("closed"))
        else:
            found = await self._described_ids([instance_id])
            held = self.slots(found[0]) if found else {}
            closed = all(holder == RETIRED for holder in held.values())
        if closed:
            self.p._states = None
            await self.p.api.terminate([instance_id])
            self._claims.pop(instance_id, None)

    async def _described_ids(self, ids: list[str]) -> list[dict[str, Any]]:
        try:
            return await self.p.api.instances(ids=ids)
        except Ec2Error as exc:
            if exc.code != "InvalidInstanceID.NotFound":
                raise
            return []
