"""The aws provider with fleet hosts (`image_kind: fleet-host`: K container desktops
per instance) against moto's EC2, with each host's agent served on loopback from the
user data the provider rendered, each on its own loopback address (fixtures:
conftest.py). Slots are leased by each host's agent, so processes of a run racing
for the last free slots never share one."""

from __future__ import annotations

import pytest

pytest.importorskip("moto.server")

import asyncio  # noqa: E402
import json  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import aiohttp  # noqa: E402
from tests_support.moto_ec2 import FLEET_TOKEN, FleetAgents, describe, make_config, tags_of  # noqa: E402
from tests_support.servers import free_port_run  # noqa: E402

from cua_rl.desktop.providers.aws.provider import AwsProvider  # noqa: E402
from cua_rl.desktop.providers.aws.tls import instance_token  # noqa: E402
from cua_rl.errors import DesktopError  # noqa: E402


def fleet_provider(
    network: dict[str, Any], agents: FleetAgents, k: int, guest_port: int, **kwargs: Any
) -> AwsProvider:
    """A process of the run: its own provider (own EC2 client, own view of the slots)."""
    return AwsProvider(
        make_config(
            network,
            image_kind="fleet-host",
            desktops_per_instance=k,
            guest_token=FLEET_TOKEN,
            fleet_image_pull="registry.example/desk:1",
            guest_port=guest_port,
            control_port=guest_port + k,
            wait_ready=False,
            poll_interval_s=0.05,
            **kwargs,
        ),
        host_address=agents.address,
    )


async def test_fleet_hosts_hold_k_desktops_each_over_pinned_tls_and_are_reset_and_released(
    network: dict[str, Any], tmp_path: Path
) -> None:
    ec2 = network["ec2"]
    k = 3
    guest_port = free_port_run(k + 1)
    control_port = guest_port + k
    async with FleetAgents(ec2, tmp_path, guest_port, control_port, k) as agents:
        provider = fleet_provider(network, agents, k, guest_port)
        try:
            await _k_desktops_per_host(provider, agents, ec2, k, guest_port)
        finally:
            await provider.close()


async def _k_desktops_per_host(
    provider: AwsProvider, agents: FleetAgents, ec2: Any, k: int, guest_port: int
) -> None:
    first = [await provider.start(f"d-{i}") for i in range(k + 1)]
    hosts = {h.info["instance_id"] for h in first}
    assert len(hosts) == 2, "K desktops share one instance, the K+1st gets a new one"
    host = first[0].info["instance_id"]
    assert [(h.info["instance_id"], h.info["slot"]) for h in first] == [
        (host, 0),
        (host, 1),
        (host, 2),
        ((hosts - {host}).pop(), 0),
    ]
    address = agents.addresses[host]
    assert [h.url for h in first[:k]] == [f"https://{address}:{guest_port + s}" for s in range(k)]
    tags = tags_of(describe(ec2, host))
    assert tags["cua-rl:kind"] == "fleet-host" and tags["cua-rl:run"] == "run-1"
    assert [tags[f"cua-rl:slot-{s}"] for s in range(k)] == ["d-0", "d-1", "d-2"]
    assert [h.tls_fingerprint for h in first[:k]] == [tags[f"cua-rl:tls-{s}"] for s in range(k)]
    assert len(set(tags[f"cua-rl:tls-{s}"] for s in range(k))) == k  # a pair per desktop
    with pytest.raises(DesktopError, match="already running"):
        await provider.start("d-1")

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
        async with session.post(
            f"{control}/slots/1/reset",
            ssl=pinned,
            headers={"Authorization": f"Bearer {FLEET_TOKEN}"},
        ) as r:
            assert r.status == 401  # the run's token is not the host's
        async with session.post(f"{control}/slots/1/reset", ssl=pinned) as r:
            assert r.status == 401
        host_token = {
            "Authorization": "Bearer " + instance_token(FLEET_TOKEN, first[0].info["control_pin"])
        }
        async with session.post(f"{control}/slots/{k}/reset", ssl=pinned, headers=host_token) as r:
            assert r.status == 404  # slots 0..K-1 only
        async with session.get(f"{control}/slots/0/reset", ssl=pinned, headers=host_token) as r:
            assert r.status == 404
        async with session.post(f"{control}/claim/d-9", ssl=pinned, headers=host_token) as r:
            assert r.status == 409  # every slot leased
        async with session.post(
            f"{control}/slots/1/release/d-0", ssl=pinned, headers=host_token
        ) as r:
            assert r.status == 409  # d-1's lease: nobody else frees it
    assert agents.resets(host) == []

    reset = await provider.reset(first[1])
    assert (reset.id, reset.url, reset.info["slot"]) == ("d-1", first[1].url, 1)
    assert agents.resets(host) == ["1"]
    assert await provider.health(reset)

    await provider.stop(first[1])  # the slot is replaced (fresh) and freed
    assert agents.resets(host) == ["1", "1"]
    assert "cua-rl:slot-1" not in tags_of(describe(ec2, host))
    assert [h.id for h in await provider.list()] == ["d-0", "d-2", "d-3"]
    again = await provider.start("d-4")  # lands in the freed slot, no new instance
    assert (again.info["instance_id"], again.info["slot"]) == (host, 1)
    for handle in (first[0], first[2]):
        await provider.stop(handle)
    assert describe(ec2, host)["State"]["Name"] == "running"  # d-4 still on it
    await provider.stop(again)  # the last lease: the agent closes, the host ends
    assert describe(ec2, host)["State"]["Name"] in ("shutting-down", "terminated")

    # the other host dies: its desktop is unhealthy, stopping it retires its slot
    # (no agent to release through) and the replacement gets a new host
    other = first[k].info["instance_id"]
    ec2.terminate_instances(InstanceIds=[other])
    assert not await provider.health(first[k])
    await provider.stop(first[k])
    replacement = await provider.start("d-3")
    assert replacement.info["instance_id"] not in (host, other)
    assert [h.id for h in await provider.list()] == ["d-3"]
    await provider.stop(replacement)


async def test_processes_racing_for_the_last_slots_never_share_one(
    network: dict[str, Any], tmp_path: Path
) -> None:
    """Four processes of a run (each its own provider: own EC2 client, own view) start a
    desktop at once while one host has two free slots. They all read the same tags;
    the host's agent leases each slot once, so two win a slot there and the other two
    go elsewhere: a host of their own each, or one new host that the later of them
    already sees (which of the two depends on the race)."""
    ec2 = network["ec2"]
    k = 3
    guest_port = free_port_run(k + 1)
    async with FleetAgents(ec2, tmp_path, guest_port, guest_port + k, k) as agents:
        launcher = fleet_provider(network, agents, k, guest_port)
        racers = [fleet_provider(network, agents, k, guest_port) for _ in range(4)]
        try:
            first = await launcher.start("d-0")
            host = first.info["instance_id"]
            deadline = asyncio.get_running_loop().time() + 10
            while host not in agents.served:  # the host's agent is up (as if booted)
                assert asyncio.get_running_loop().time() < deadline, "no agent"
                await asyncio.sleep(0.02)
            handles = await asyncio.gather(*(p.start(f"r-{i}") for i, p in enumerate(racers)))
            placed = [(h.info["instance_id"], h.info["slot"]) for h in handles]
            assert len(set(placed)) == len(placed), f"two desktops share a slot: {placed}"
            on_host = sorted(slot for instance, slot in placed if instance == host)
            assert on_host == [1, 2], placed
            # the two losers launch a host each, or one launches and the other, racing it,
            # finds the new host already tagged and leases its next slot: both are right
            # (no slot shared, checked above), and nothing launches more than that
            elsewhere = sorted(slot for instance, slot in placed if instance != host)
            assert elsewhere in ([0, 0], [0, 1]), placed
            tags = tags_of(describe(ec2, host))
            winners = {h.info["slot"]: h.id for h in handles if h.info["instance_id"] == host}
            assert {s: tags[f"cua-rl:slot-{s}"] for s in (1, 2)} == winners
            leases = agents.served[host][2].parent / "leases.json"
            assert json.loads(leases.read_text())["held"] == {
                "0": "d-0",
                **{str(s): d for s, d in winners.items()},
            }
            for provider, handle in [(launcher, first), *zip(racers, handles, strict=True)]:
                await provider.stop(handle)
            assert all(
                describe(ec2, i)["State"]["Name"] in ("shutting-down", "terminated")
                for i in {host, *(i for i, _ in placed)}
            )
        finally:
            for provider in (launcher, *racers):
                await provider.close()


async def test_pool_on_fleet_hosts_counts_k_per_instance_and_replaces_a_dead_host(
    network: dict[str, Any], tmp_path: Path
) -> None:
    """The real DesktopPool over fleet hosts (K=2, 4 desktops): two instances; one dies,
    its two desktops are replaced on one new instance; closing ends every instance.
    The dead host's agent goes with it, so its slots are retired; the live hosts'
    agents release theirs, and the last release of each ends it."""
    from cua_rl.desktop.pool import DesktopPool

    ec2 = network["ec2"]
    guest_port = free_port_run(3)

    def live() -> dict[str, list[str]]:
        found = ec2.describe_instances(
            Filters=[
                {"Name": "tag:cua-rl:run", "Values": ["run-1"]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        return {
            i["InstanceId"]: sorted(
                v for k, v in tags_of(i).items() if k.startswith("cua-rl:slot-")
            )
            for r in found["Reservations"]
            for i in r["Instances"]
        }

    async with FleetAgents(ec2, tmp_path, guest_port, guest_port + 2, 2) as agents:
        provider = fleet_provider(network, agents, 2, guest_port)
        pool = DesktopPool(
            provider,
            4,
            id_prefix="a",
            health_interval_s=0.05,
            failures_to_replace=1,
            retry_backoff_s=0.05,
        )
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
