"""Per-task budgets end to end in the real fleet (`train.budgets`): the scheduler opens
each group of a task with the budget its recent groups earned, and the fleet runs its
episodes with that many rollouts and the smaller of the horizon's and the task's
step limit. Simulated desktops and policy (`rollout/simulated.py`); the group handler
feeds the budgets as the training router does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from cua_rl.config.train import TaskBudgetConfig
from cua_rl.rollout.config import EpisodeConfig, FleetConfig, HorizonSchedule
from cua_rl.rollout.fleet import Fleet
from cua_rl.rollout.latency import Dist, LatencyModel
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.rollout.simulated import SimClock, SimulatedDesktop, SimulatedDesktops
from cua_rl.rollout.simulated import SimulatedModelPool as Pool
from cua_rl.runtime.task_budgets import TaskBudgets
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import Action, GroupRecord, TaskVariant

FAST = Dist(median_s=0.001, sigma=0.0)
TASK = TaskVariant(
    task_id="t",
    domain="simulated",
    evaluator_name="default",
    instruction="do it",
    config=(),
    evaluator={"func": "simulated"},
)
HORIZON = HorizonSchedule(steps=[8, 20], every=1000)
"""8 steps while the learner is at version 0 (the whole test)."""


class ScriptedDesktop(SimulatedDesktop):
    async def evaluate(self, variant: TaskVariant, last_action: Action | None) -> float:
        await super().evaluate(variant, last_action)
        return self.source.score  # type: ignore[attr-defined]


class ScriptedDesktops(SimulatedDesktops):
    """Every episode scores `score` (the test moves the task's accuracy with it)."""

    score = 1.0

    @asynccontextmanager
    async def lease(self, ticket: object = None) -> AsyncIterator[SimulatedDesktop]:
        async with super().lease():
            yield ScriptedDesktop(self)


async def _groups(
    tmp_path: Path, budgets: TaskBudgets, enabled: bool
) -> list[tuple[int, list[int]]]:
    """Five groups of one task, each run by a real fleet: two in which every rollout
    succeeds in 4 steps, then three in which the policy wanders for 10 steps and
    fails. Returns (rollouts, steps of each episode) per group."""
    clock = SimClock(1.0, seed=0)
    model = LatencyModel(reset_s=FAST, act_s=FAST, screenshot_s=FAST, evaluate_s=FAST)
    length = {"steps": 4}
    policy = Pool(
        1,
        8,
        FAST,
        clock,
        slowdown=0.0,
        tokens=4,
        version=lambda: 0,
        episode_length=lambda rng: length["steps"],
    )
    desktops = ScriptedDesktops(2, model, clock)
    store = AsyncRunStore.open(tmp_path)
    seen: list[GroupRecord] = []

    async def on_group(group: GroupRecord) -> None:  # the router's part
        budgets.observe(group)
        seen.append(group)

    try:
        for k in range(5):
            if k == 2:
                length["steps"], desktops.score = 10, 0.0
            served = iter([TASK])

            async def source() -> TaskVariant | None:
                return next(served, None)  # noqa: B023 - used within this iteration

            scheduler = GroupScheduler(source, 4, budget=budgets.budget if enabled else None)
            fleet = Fleet(
                scheduler,
                desktops,
                policy,
                store,
                EpisodeConfig(max_steps=20),
                FleetConfig(actors=2, group_size=4),
                on_group=on_group,
                horizon=HORIZON,
            )
            await fleet.run()
    finally:
        await store.close()
    return [(len(g.trajectories), sorted(len(t.steps) for t in g.trajectories)) for g in seen]


def _budgets() -> TaskBudgets:
    cfg = TaskBudgetConfig(
        enabled=True,
        window=2,
        min_scored=4,
        min_rollouts=2,
        max_rollouts=6,
        length_margin=1.5,
        min_steps=2,
    )
    return TaskBudgets(cfg, group_size=4, max_steps=20)


async def test_the_fleet_runs_a_tasks_groups_with_the_budget_its_accuracy_earns(
    tmp_path: Path,
) -> None:
    """With the switch off this fails: every group has 4 rollouts and the horizon's 8
    steps (`test_with_budgets_off_the_fleet_runs_every_group_alike`)."""
    budgets = _budgets()
    groups = await _groups(tmp_path, budgets, enabled=True)
    assert groups == [
        (4, [4, 4, 4, 4]),  # no evidence yet: G = 4, the horizon's 8 steps (4 used)
        (2, [4, 4]),  # solved (4 of 4): 2 rollouts, 1.5 x 4 = 6 steps
        (2, [6, 6]),  # still solved: the wandering policy is cut at 6 steps
        (4, [6, 6, 6, 6]),  # 2 of 4 in the window: G again; the 4-step successes keep 6
        (6, [8] * 6),  # 0 of 6: the most rollouts; no success left, the horizon's 8
    ]
    assert budgets.accuracy("t") == 0.0 and budgets.budget(TASK).size == 6


async def test_with_budgets_off_the_fleet_runs_every_group_alike(tmp_path: Path) -> None:
    groups = await _groups(tmp_path, _budgets(), enabled=False)
    assert groups == [(4, [4] * 4)] * 2 + [(4, [8] * 4)] * 3
    # the same windows were kept, but no group was opened with them
    off = TaskBudgets(TaskBudgetConfig(), group_size=4, max_steps=20)
    groups = await _groups(tmp_path / "off", off, enabled=True)
    assert groups == [(4, [4] * 4)] * 2 + [(4, [8] * 4)] * 3 and off.state_dict() == {}
