import asyncio

import pytest

from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.staleness_gate import VersionGate
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


def _source(n: int):
    it = iter(range(n))

    async def source():
        i = next(it, None)
        return None if i is None else _variant(i)

    return source


def _traj(tid: str, score: float) -> Trajectory:
    return Trajectory(
        id=tid, variant_id="v", steps=(), status=TrajectoryStatus.FINISHED, score=score
    )


async def test_groups_complete_once_and_aborts_requeue_first() -> None:
    sched = GroupScheduler(_source(2), group_size=2)
    a = await sched.next_ticket()
    b = await sched.next_ticket()
    assert (a.group_id, a.slot, b.slot) == (b.group_id, 0, 1)
    await sched.abort(a)
    retry = await sched.next_ticket()
    assert (retry.group_id, retry.slot, retry.attempt) == (a.group_id, 0, 1)
    assert await sched.complete(b, _traj("b", 1.0)) is None
    group = await sched.complete(retry, _traj("r", 0.0))
    assert group is not None and group.accuracy == 0.5
    with pytest.raises(KeyError):
        await sched.complete(b, _traj("b2", 1.0))  # the group is gone: never emitted twice
    c, d = await sched.next_ticket(), await sched.next_ticket()
    assert c.variant.task_id == "t1"
    await sched.complete(c, _traj("c", 1.0))
    await sched.complete(d, _traj("d", 1.0))
    assert await sched.next_ticket() is None and sched.drained


async def test_waiting_worker_gets_requeued_ticket() -> None:
    sched = GroupScheduler(_source(1), group_size=1)
    only = await sched.next_ticket()
    waiter = asyncio.create_task(sched.next_ticket())
    await asyncio.sleep(0)
    assert not waiter.done()  # source exhausted but a rollout is in flight
    await sched.abort(only)
    again = await asyncio.wait_for(waiter, 1.0)
    assert again.attempt == 1
    await sched.complete(again, _traj("x", 1.0))
    assert await asyncio.wait_for(sched.next_ticket(), 1.0) is None


async def test_max_groups_and_version_gate() -> None:
    sched = GroupScheduler(_source(10), group_size=1, max_groups=1)
    t = await sched.next_ticket()
    await sched.complete(t, _traj("x", 1.0))
    assert await sched.next_ticket() is None

    gate = VersionGate(eta=2)
    await gate.set_versions(learner=3, serving=0)
    blocked = asyncio.create_task(gate.wait_fresh())
    await asyncio.sleep(0)
    assert not blocked.done() and not gate.fresh(0) and gate.fresh(1)
    await gate.set_versions(serving=1)
    assert await asyncio.wait_for(blocked, 1.0) == 1


async def test_give_up_shrinks_group() -> None:
    sched = GroupScheduler(_source(2), group_size=2)
    a, b = await sched.next_ticket(), await sched.next_ticket()
    assert await sched.complete(a, _traj("a", 1.0)) is None
    group = await sched.give_up(b)
    assert group is not None and len(group.trajectories) == 1
    assert group.gave_up == 1 and group.accuracy == 1.0
    c, d = await sched.next_ticket(), await sched.next_ticket()
    assert await sched.give_up(c, "setup failed: no such file") is None
    # a group whose every rollout was given up is still emitted, empty, with the
    # reasons: a candidate task's group must be decided even then (Algorithm 2)
    empty = await sched.give_up(d, "variant set aside: 3 aborts in a row")
    assert empty is not None and empty.empty and empty.gave_up == 2
    assert empty.gave_up_reasons == (
        "setup failed: no such file",
        "variant set aside: 3 aborts in a row",
    )
    assert await sched.next_ticket() is None


async def test_groups_of_a_budgeted_task_have_the_budgeted_size_and_step_limit() -> None:
    """`train.budgets`: a solved task's next group has `min_rollouts` tickets, each with
    the task's step limit (kept by a re-queued attempt); another task keeps G."""
    from cua_rl.config.train import TaskBudgetConfig
    from cua_rl.runtime.task_budgets import TaskBudgets
    from cua_rl.types import GroupRecord, Step

    budgets = TaskBudgets(TaskBudgetConfig(enabled=True, min_scored=1), group_size=4, max_steps=20)
    steps = tuple(Step(i, "", "Action: click.", (), None, "", "") for i in range(6))
    wins = tuple(
        Trajectory(f"w{k}", "v", steps, TrajectoryStatus.FINISHED, score=1.0) for k in range(4)
    )
    budgets.observe(GroupRecord("g-before", _variant(0), wins, {}))  # t0: 4 of 4, 6 steps
    sched = GroupScheduler(_source(2), group_size=4, budget=budgets.budget)
    solved = [await sched.next_ticket() for _ in range(2)]
    assert [(t.variant.task_id, t.slot, t.max_steps) for t in solved] == [
        ("t0", 0, 9),
        ("t0", 1, 9),
    ]  # 2 rollouts, 1.5 x 6 steps
    await sched.abort(solved[0])
    retry = await sched.next_ticket()
    assert (retry.slot, retry.attempt, retry.max_steps) == (0, 1, 9)
    other = [await sched.next_ticket() for _ in range(4)]
    assert {(t.variant.task_id, t.max_steps) for t in other} == {("t1", None)}
    assert await sched.complete(solved[1], _traj("a", 1.0)) is None
    group = await sched.complete(retry, _traj("b", 0.0))
    assert group is not None and len(group.trajectories) == 2  # the group is complete
