"""The Ray run's services and adapters, without Ray (handles are in-process)."""

from __future__ import annotations

import asyncio

from cua_rl.config import RunConfig
from cua_rl.config.ray_cluster import RayConfig
from cua_rl.inference.config import ModelServersConfig
from cua_rl.runtime.ray.placement import replica_bundles, service_options, worker_bundles
from cua_rl.runtime.ray.services import (
    GateService,
    GroupReport,
    RemoteGate,
    RemoteScheduler,
    SchedulerService,
    VariantFeed,
)
from cua_rl.staleness_gate import Gate, VersionGate
from cua_rl.types import TaskVariant, Trajectory, TrajectoryStatus


def _variant(i: int) -> TaskVariant:
    return TaskVariant(
        task_id=f"t{i}",
        domain="os",
        evaluator_name="default",
        instruction="do it",
        config=(),
        evaluator={"func": "infeasible"},
    )


def _traj(tid: str) -> Trajectory:
    return Trajectory(id=tid, variant_id="v", steps=(), status=TrajectoryStatus.FINISHED, score=1.0)


async def test_feed_draws_a_variant_only_when_the_scheduler_asks() -> None:
    feed = VariantFeed(2)
    asked = asyncio.create_task(feed.wait_demand())
    await asyncio.sleep(0)
    assert not asked.done()  # nobody asked: the driver's selector is not consulted
    request = asyncio.create_task(feed.request())
    await asked
    await feed.supply(_variant(1))
    assert (await request).task_id == "t1"


async def test_remote_scheduler_runs_groups_and_the_driver_feeds_and_drains(handle) -> None:
    service = SchedulerService(2, max_groups=None, backlog=4)
    remote = RemoteScheduler(handle(service), "w0")
    driver = handle(service)

    async def feed() -> None:
        for variant in [_variant(0), None]:
            await driver.wait_demand.remote()
            await driver.supply.remote(variant)

    feeding = asyncio.create_task(feed())
    a, b = await remote.next_ticket(), await remote.next_ticket()
    assert (a.group_id, a.slot, b.slot) == (b.group_id, 0, 1)
    await remote.abort(a)
    retry = await remote.next_ticket()
    assert (retry.slot, retry.attempt) == (0, 1)
    assert await remote.complete(b, _traj("b"), []) is None
    group = await remote.complete(retry, _traj("r"), [])
    assert group is not None and len(group.trajectories) == 2 and set(group.verdicts) == {"b", "r"}
    await remote.put_group(GroupReport("w0", group, {"episodes": 2}, 1.5))
    assert await remote.next_ticket() is None  # the driver answered None: drained
    await feeding
    await driver.close_outbox.remote()
    report = await driver.next_group.remote()
    assert report.worker_id == "w0" and report.group.group_id == a.group_id
    assert await driver.next_group.remote() is None
    assert (await driver.stats.remote())["requeued"] == 1


async def test_remote_gate_blocks_stale_starts_and_mirrors_versions(handle) -> None:
    seen: list[int] = []
    service = GateService(eta=1)
    learner_side = RemoteGate(handle(service), eta=1)
    worker_side = RemoteGate(handle(service), eta=1, on_versions=seen.append)
    assert isinstance(learner_side, Gate) and isinstance(VersionGate(), Gate)  # train() takes both
    await learner_side.set_versions(learner=3, serving=1)
    assert learner_side.learner_version == 3 and not learner_side.fresh(1)
    waiting = asyncio.create_task(worker_side.wait_fresh())
    await asyncio.sleep(0.01)
    assert not waiting.done()  # serving 1 < learner 3 - eta 1
    await learner_side.set_versions(serving=3)
    assert await waiting == 3
    assert worker_side.learner_version == 3 and seen == [3]


def test_worker_shares_and_bundles() -> None:
    cfg = RayConfig(fleet_workers=3)
    assert (cfg.worker_actors(8), cfg.worker_desktops(2)) == (3, 1)
    assert RayConfig(actors_per_worker=5).worker_actors(8) == 5
    assert worker_bundles(cfg) == [{"CPU": 1.0}] * 3
    assert replica_bundles(cfg, ModelServersConfig(replicas=2)) == [{"CPU": 1.0}] * 2
    assert replica_bundles(cfg, ModelServersConfig(engine="vllm")) == [{"CPU": 1.0, "GPU": 1.0}]
    assert service_options(500)["max_concurrency"] == 2000


def test_run_config_selects_the_ray_runtime() -> None:
    cfg = RunConfig.model_validate({"runtime": "ray", "ray": {"fleet_workers": 4}})
    assert cfg.runtime == "ray" and cfg.ray.fleet_workers == 4
    assert RunConfig().runtime == "local"


async def test_a_released_worker_gives_back_its_rollouts_and_owed_groups_once(handle) -> None:
    """Worker w1 dies holding one rollout of an open group and owing the outbox a
    group it completed: the rollout is re-queued (the completed slot stays), the
    group is delivered by the service, and w1's late calls change nothing."""
    service = SchedulerService(2, max_groups=None, backlog=4)
    w0, w1 = RemoteScheduler(handle(service), "w0"), RemoteScheduler(handle(service), "w1")
    driver = handle(service)

    async def feed() -> None:
        for variant in [_variant(0), _variant(1), None]:
            await driver.wait_demand.remote()
            await driver.supply.remote(variant)

    feeding = asyncio.create_task(feed())
    a0, a1 = await w1.next_ticket(), await w1.next_ticket()  # group A, both slots on w1
    owed = await w1.complete(a0, _traj("a0"), [])
    assert owed is None
    owed = await w1.complete(a1, _traj("a1"), [])
    assert owed is not None  # completed; w1 dies before its put_group
    b0, b1 = await w0.next_ticket(), await w1.next_ticket()  # group B split over both
    assert await w0.complete(b0, _traj("b0"), []) is None

    release = await driver.release_worker.remote("w1")
    assert release.requeued == [(b1.group_id, 1)]
    assert release.groups_delivered == [a0.group_id]
    assert await w1.complete(b1, _traj("late"), []) is None  # refused: on the wire too late
    await w1.put_group(GroupReport("w1", owed))  # refused: delivered already
    assert await w1.next_ticket() is None

    retry = await w0.next_ticket()
    assert (retry.group_id, retry.slot, retry.attempt) == (b1.group_id, 1, 1)
    group_b = await w0.complete(retry, _traj("b1"), [])
    assert group_b is not None and {t.id for t in group_b.trajectories} == {"b0", "b1"}
    await w0.put_group(GroupReport("w0", group_b, {"episodes": 2}))
    assert await w0.next_ticket() is None
    await feeding
    await driver.close_outbox.remote()
    reports = []
    while (report := await driver.next_group.remote()) is not None:
        reports.append(report)
    assert [(r.group.group_id, r.lost_worker) for r in reports] == [
        (a0.group_id, True),
        (b0.group_id, False),
    ]
    assert (await driver.stats.remote())["workers_released"] == 1
