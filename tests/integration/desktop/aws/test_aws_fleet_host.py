"""The aws provider with fleet hosts (`image_kind: fleet-host`: K container desktops
per instance) against moto's EC2, with each host's agent served on loopback from the
user data the provider rendered (fixtures: conftest.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("moto.server")

import asyncio  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import aiohttp  # noqa: E402
from tests_support.moto_ec2 import (  # noqa: E402
    FLEET_TOKEN,
    describe,
    fleet_user_data,
    make_config,
    serve_fleet_host,
    tags_of,
)
from tests_support.servers import free_port_run  # noqa: E402

from cua_rl.desktop.providers.aws import AwsProvider  # noqa: E402
from cua_rl.desktop.providers.aws_tls import instance_token  # noqa: E402
from cua_rl.errors import DesktopError  # noqa: E402


async def test_fleet_hosts_hold_k_desktops_each_over_pinned_tls_and_are_reset_and_released(
        network: dict[str, Any], tmp_path: Path) -> None:
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
