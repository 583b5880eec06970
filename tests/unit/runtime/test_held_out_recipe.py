"""The held-out set recipe of docs/reward-model-accuracy.md: `cua-rl rollout --model M
--split S fleet.group_size=16 judge.enabled=false` rolls the policy out 16 times on
each task of the split, once, with no reward model and nothing trained."""

from __future__ import annotations

from collections import Counter

from tests_support.viewer_runs import variant

from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.runtime.local import task_cycle
from cua_rl.runtime.run_config import flag_overrides, resolve_run_config
from cua_rl.types import Trajectory, TrajectoryStatus

RECIPE = ("fleet.group_size=16", "judge.enabled=false")


def test_the_recipe_resolves_to_a_policy_only_run_of_16_per_task() -> None:
    flags = flag_overrides(split="held-out.txt", model="/models/policy")
    cfg = resolve_run_config(None, None, (*flags, *RECIPE))
    assert cfg.policy.model == "/models/policy" and cfg.tasks.split == "held-out.txt"
    assert cfg.fleet.group_size == 16 and cfg.fleet.max_groups is None
    assert cfg.judge.enabled is False  # no reward-model pool, no votes


async def test_a_rollout_scheduler_gives_each_task_one_group_of_16() -> None:
    """What `runtime/rollout_run.py` composes: each task's first variant once
    (`task_cycle` with no max_groups), a group of `group_size` rollouts each."""
    starts = [variant("t1"), variant("t2"), variant("t3")]
    scheduler = GroupScheduler(task_cycle(starts, None), 16, max_groups=None)
    per_task: Counter[str] = Counter()
    for _ in range(16 * 3 + 1):  # bounded: one more than the work there is
        ticket = await scheduler.next_ticket()
        if ticket is None:
            break
        per_task[ticket.variant.task_id] += 1
        await scheduler.complete(
            ticket,
            Trajectory(
                f"{ticket.group_id}-{ticket.slot}",
                ticket.variant.variant_id,
                (),
                TrajectoryStatus.FINISHED,
                score=0.0,
            ),
        )
    else:
        raise AssertionError("the scheduler never ran out of work")
    assert per_task == {"t1": 16, "t2": 16, "t3": 16}
