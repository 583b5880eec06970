"""The learner service's batching by task group, stale accounting, backpressure and
update order, with a recording engine in place of a model."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests_support.recording_engine import RecordingEngine

from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.service import LearnerService
from cua_rl.staleness_gate import VersionGate
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import StepSample


def _group(gid: str, trajectories: int, steps: int, version: int = 0) -> list[StepSample]:
    return [
        StepSample((), (1,), (-0.1,), version, 1.0, trajectory_id=f"{gid}-t{t}", step_index=i)
        for t in range(trajectories)
        for i in range(steps)
    ]


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    store = AsyncRunStore.open(tmp_path / "run")
    yield store
    await store.close()


def _service(
    store: Any,
    tmp_path: Path,
    *,
    tasks: int,
    eta: int = 2,
    queue_updates: int = 2,
    gate: VersionGate | None = None,
) -> tuple[LearnerService, RecordingEngine]:
    engine = RecordingEngine()
    service = LearnerService(
        "policy",
        engine,
        store,  # type: ignore[arg-type]
        LearnerLoopConfig(queue_updates=queue_updates),
        checkpoint_dir=tmp_path / "ckpt",
        tasks_per_update=tasks,
        eta=eta,
        gate=gate,
    )
    return service, engine


async def test_a_group_of_8_by_15_steps_loses_no_sample(store: Any, tmp_path: Path) -> None:
    # The old learner updated every 16 samples and dropped 72 of these 120 as stale,
    # always the late steps. Now one group is one update, every step included.
    service, engine = _service(store, tmp_path, tasks=1)
    group = _group("g", 8, 15)
    run = asyncio.create_task(service.run())
    assert await service.submit(group, "g") == 120
    await service.finish()
    await run
    assert engine.batches == [group]
    assert sorted({s.step_index for s in engine.batches[0]}) == list(range(15))
    counters = await store.counters()
    counters = {k: counters.get(k) for k in ("policy_samples_collected", "policy_samples_used")}
    assert counters == {"policy_samples_collected": 120, "policy_samples_used": 120}
    assert service.stale_dropped == 0


async def test_an_update_is_made_of_the_sampled_groups_in_order(store: Any, tmp_path: Path) -> None:
    # tasks_per_update counts sampled groups, zero-signal ones included (the paper's
    # step is 12 sampled tasks); a step with no sample makes no update; a step cut
    # short by the end of the run is not trained, its samples counted as unused
    service, engine = _service(store, tmp_path, tasks=2, queue_updates=2)
    groups = [
        _group("g0", 2, 1),
        [],
        _group("g2", 2, 2),
        _group("g3", 1, 1),
        [],
        [],
        _group("g6", 2, 3),
    ]
    run = asyncio.create_task(service.run())
    for k, group in enumerate(groups):
        assert await service.submit(group, f"g{k}") == len(group)
    await service.finish()
    await run
    assert engine.batches == [groups[0], groups[2] + groups[3]]
    assert (service.steps, service.steps_empty, engine.version) == (3, 1, 2)
    assert service.unused_at_end == len(groups[6])
    assert service.samples_collected == service.samples_used + service.unused_at_end
    counters = await store.counters()
    assert (counters["policy_steps"], counters["policy_steps_empty"]) == (3, 1)


async def test_stale_samples_are_dropped_and_counted_with_eta_0(store: Any, tmp_path: Path) -> None:
    gate = VersionGate(eta=0)
    service, engine = _service(store, tmp_path, tasks=1, eta=0, gate=gate)
    run = asyncio.create_task(service.run(max_updates=3))
    await service.submit(_group("a", 2, 3, version=0), "a")
    await _until(lambda: engine.version == 1)
    # sampled at version 0, completed after update 1: stale under eta = 0
    assert await service.submit(_group("b", 2, 3, version=0), "b") == 0
    # a group with step versions on both sides of the floor is judged once, by its
    # oldest step: all of it is stale (no group is ever trained in part)
    mixed = _group("c", 1, 2, version=0) + _group("c", 1, 2, version=1)
    assert await service.submit(mixed, "c") == 0
    # replayed trajectories carry their own logprobs: left out of the decision
    replayed = [replace(s, replayed=True) for s in _group("d", 1, 2, version=0)]
    assert await service.submit(_group("d", 1, 2, version=1) + replayed, "d") == 4
    await service.finish()
    await run
    assert service.stale_dropped == 10
    assert [len(b) for b in engine.batches] == [6, 4]
    counters = await store.counters()
    assert counters.get("policy_stale_dropped") == 10
    assert gate.learner_version == 2


async def test_producers_wait_while_the_queue_is_full_and_are_released_at_the_budget(
    store: Any, tmp_path: Path
) -> None:
    service, engine = _service(store, tmp_path, tasks=1, queue_updates=1)
    await service.submit(_group("a", 1, 1), "a")  # fills the queue (1 update of 1 group)
    blocked = asyncio.create_task(service.submit(_group("b", 1, 1), "b"))
    await asyncio.sleep(0)
    assert not blocked.done()
    run = asyncio.create_task(service.run(max_updates=1))
    await asyncio.wait_for(run, 10)
    # the learner reached its budget: the waiting producer is released, its samples
    # counted as unused rather than lost silently
    await asyncio.wait_for(blocked, 10)
    assert (service.samples_used, service.unused_at_end) == (1, 1)
    assert service.samples_collected == (
        service.samples_used + service.stale_dropped + service.unused_at_end
    )
    assert len(engine.batches) == 1


async def _until(predicate: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():  # noqa: ASYNC110 - the engine runs on a thread
            await asyncio.sleep(0.01)


async def test_a_follower_trains_the_leaders_steps_and_stops_where_it_stopped(
    store: Any, tmp_path: Path
) -> None:
    # The reward model updates once per policy step on the same groups' in-band
    # subset: steps without any reward-model sample make no update (counted).
    leader, policy = _service(store, tmp_path, tasks=2, queue_updates=4)
    prm = RecordingEngine()
    follower = LearnerService(
        "prm",
        prm,
        store,  # type: ignore[arg-type]
        LearnerLoopConfig(queue_updates=4),
        checkpoint_dir=tmp_path / "ckpt",
        tasks_per_update=2,
        leader=leader,
    )
    runs = [asyncio.create_task(follower.run()), asyncio.create_task(leader.run(max_updates=2))]
    prm_groups = [_group("a", 1, 1), [], [], [], _group("e", 2, 1), [], _group("g", 1, 1), []]
    for k, votes in enumerate(prm_groups):
        await leader.submit(_group(f"p{k}", 1, 1), f"g{k}")
        await follower.submit(votes, f"g{k}")
    await leader.finish()
    await follower.finish()
    await asyncio.wait_for(asyncio.gather(*runs), 10)
    # the policy stopped after 2 steps (its budget): the follower took those two only
    assert (leader.steps, follower.steps, follower.steps_empty) == (2, 2, 1)
    assert prm.batches == [prm_groups[0]]
    assert follower.unused_at_end == 3 and follower.samples_used == 1
    assert (await store.counters())["prm_steps_empty"] == 1
