"""Per-task budgets (`train.budgets`): a task's rollouts and step limit follow its
recent accuracy and successful lengths, within the global bounds; off, nothing
changes; the windows survive `--resume`; under Ray the switch is refused; the router
observes training groups only, as sampled, and saves the windows."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from PIL import Image
from tests_support.recording_engine import RecordingEngine

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.adapt.config import AdaptConfig
from cua_rl.adapt.rewriter import RuleRewriter, TaskTemplate
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.config import RunConfig, load_config
from cua_rl.config.train import TaskBudgetConfig, TrainConfig
from cua_rl.errors import ConfigError
from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.service import LearnerService
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.runtime.group_router import GroupRouter
from cua_rl.runtime.task_budgets import TaskBudgets
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import (
    GroupRecord,
    Step,
    StepVerdict,
    TaskVariant,
    Trajectory,
    TrajectoryStatus,
    Vote,
)


def _variant(
    task_id: str = "t", name: str = "full", instruction: str = "Sort all rows."
) -> TaskVariant:
    return TaskVariant(
        task_id=task_id,
        domain="os",
        evaluator_name=name,
        instruction=instruction,
        config=(),
        evaluator={"func": "infeasible"},
    )


VARIANT = _variant()


def _group(
    wins: int,
    size: int,
    *,
    steps: int = 4,
    variant: TaskVariant = VARIANT,
    gid: str = "g",
    screen: str = "",
) -> GroupRecord:
    """`size` rollouts of `steps` steps each, the first `wins` successful."""
    trajs, verdicts = [], {}
    for k in range(size):
        tid = f"{gid}-{k}"
        trajs.append(
            Trajectory(
                tid,
                variant.variant_id,
                tuple(
                    Step(
                        i,
                        screen,
                        "Action: click.",
                        (),
                        None,
                        "",
                        screen,
                        token_ids=(5, 6),
                        logprobs=(-0.1, -0.2),
                    )
                    for i in range(steps)
                ),
                TrajectoryStatus.FINISHED,
                score=1.0 if k < wins else 0.0,
            )
        )
        verdicts[tid] = tuple(
            StepVerdict(tid, i, tuple(Vote(v, "ok", (8,), (-0.5,)) for v in (1, -1, 1)))
            for i in range(steps)
        )
    return GroupRecord(gid, variant, tuple(trajs), verdicts)


def _budgets(**cfg: object) -> TaskBudgets:
    config = TaskBudgetConfig(
        **{"enabled": True, "window": 2, "min_scored": 4, "max_rollouts": 8, **cfg}
    )  # type: ignore[arg-type]
    return TaskBudgets(config, group_size=4, max_steps=30)


def test_a_tasks_rollouts_and_step_limit_follow_its_accuracy_and_successful_lengths() -> None:
    budgets = _budgets()
    other = _variant("other")

    def budget() -> tuple[int, int | None]:
        b = budgets.budget(VARIANT)
        return b.size, b.max_steps

    assert budget() == (4, None)  # no evidence yet: the global budget
    budgets.observe(_group(wins=2, size=2, steps=6))
    assert budget() == (4, None)  # 2 scored rollouts < min_scored 4: still global
    budgets.observe(_group(wins=2, size=2, steps=6))
    # solved (accuracy 1.0 > 0.8): the fewest rollouts; steps 1.5 x 6 = 9
    assert budget() == (2, 9) and budgets.accuracy("t") == 1.0
    # the accuracy drops: 2 of 6 in the window of the last 2 groups -> the middle band
    budgets.observe(_group(wins=0, size=4, steps=20))
    assert budget() == (4, 9) and budgets.accuracy("t") == pytest.approx(2 / 6)
    # unsolved (0 of 8): the most rollouts; no recent success, so no task limit
    budgets.observe(_group(wins=0, size=4, steps=20))
    assert budget() == (8, None) and budgets.accuracy("t") == 0.0
    # a long success: 1.5 x 25 = 38 is capped by the global limit 30
    budgets.observe(_group(wins=1, size=8, steps=25))
    assert budget() == (8, 30)
    # a very short success: the limit never drops below min_steps
    budgets.observe(_group(wins=4, size=4, steps=1))
    budgets.observe(_group(wins=4, size=4, steps=1))
    assert budget() == (2, 5)
    # budgets are per task: another task has its own (empty) window
    assert (budgets.group_size(other), budgets.max_steps(other)) == (4, None)
    # an empty group (every rollout given up) says nothing
    budgets.observe(GroupRecord("g-empty", VARIANT, (), {}, gave_up=2))
    assert budget() == (2, 5)


def test_group_sizes_stay_within_the_bounds_whatever_the_global_size() -> None:
    # max_rollouts unset: an unsolved task keeps G, a solved one gets min_rollouts
    budgets = TaskBudgets(TaskBudgetConfig(enabled=True, min_scored=1), group_size=6, max_steps=15)
    budgets.observe(_group(wins=0, size=6))
    assert budgets.group_size(VARIANT) == 6
    budgets = TaskBudgets(TaskBudgetConfig(enabled=True, min_scored=1), group_size=6, max_steps=15)
    budgets.observe(_group(wins=6, size=6))
    assert budgets.group_size(VARIANT) == 2
    # G above max_rollouts: the middle band is clamped to it
    budgets = _budgets(max_rollouts=3, min_scored=1)
    budgets.observe(_group(wins=1, size=2))
    assert budgets.group_size(VARIANT) == 3


def test_with_budgets_off_groups_keep_the_global_size_and_no_task_limit() -> None:
    budgets = TaskBudgets(TaskBudgetConfig(), group_size=4, max_steps=30)
    for wins in (4, 4, 4, 0, 0):
        budgets.observe(_group(wins=wins, size=4, steps=3))
    assert budgets.budget(VARIANT).size == 4 and budgets.budget(VARIANT).max_steps is None
    assert budgets.state_dict() == {} and budgets.metrics(_group(1, 4)) == {}


def test_the_windows_round_trip_for_resume() -> None:
    budgets = _budgets()
    budgets.observe(_group(wins=2, size=2, steps=6))
    budgets.observe(_group(wins=1, size=4, steps=7, variant=_variant("u")))
    budgets.observe(_group(wins=2, size=2, steps=3))
    state = json.loads(json.dumps(budgets.state_dict()))
    assert state == {"t": [[2, 2, [6, 6]], [2, 2, [3, 3]]], "u": [[1, 4, [7]]]}
    resumed = _budgets()
    resumed.load_state_dict(state)
    assert resumed.state_dict() == state
    assert resumed.budget(VARIANT) == budgets.budget(VARIANT)
    # a run resumed with a shorter window keeps each task's latest groups
    shorter = _budgets(window=1)
    shorter.load_state_dict(state)
    assert shorter.state_dict()["t"] == [[2, 2, [3, 3]]]


def test_budgets_run_under_either_runtime_within_fitting_bounds() -> None:
    load_config(RunConfig, overrides=["runtime=ray", "train.budgets.enabled=true"])
    with pytest.raises(ConfigError, match=r"min_rollouts 3 is above the largest group"):
        load_config(
            RunConfig,
            overrides=[
                "train.budgets.enabled=true",
                "fleet.group_size=2",
                "train.budgets.min_rollouts=3",
            ],
        )
    with pytest.raises(ConfigError, match=r"max_rollouts 2 is below min_rollouts 3"):
        load_config(
            RunConfig, overrides=["train.budgets.min_rollouts=3", "train.budgets.max_rollouts=2"]
        )
    cfg = load_config(
        RunConfig,
        overrides=[
            "train.budgets.enabled=true",
            "train.horizon.steps=[5,10,40]",
            "train.horizon.every=2",
        ],
    )
    assert TaskBudgets.for_run(cfg).ceiling == 40  # the horizon's last step, not 15


async def test_the_router_observes_training_groups_as_sampled_and_saves_them(
    tmp_path: Path,
) -> None:
    """Algorithm 2 on a hinted template (as in test_group_router): the original's,
    the accepted candidate's and later training groups are observed; the rejected
    candidate's group is not; budgets.json holds the windows."""
    store = AsyncRunStore.open(tmp_path / "run")
    png = io.BytesIO()
    Image.new("RGB", (64, 48), "white").save(png, "PNG")
    screen = await store.put_screenshot(png.getvalue())
    full, narrow = _variant(), _variant(name="narrow", instruction="Sort rows 1-5.")
    extra = _variant(name="extra", instruction="Sort all rows and bold the header.")
    template = TaskTemplate.from_variants(
        [full, narrow, extra],
        {"order": ["narrow", "full", "extra"], "hints": {"full": ["Hint: use Data > Sort."]}},
    )
    selector = TemplateSelector(
        {"t": template}, {"t": full}, band=AdaptBand(), rewriter=RuleRewriter(), store=store
    )
    policy = LearnerService(
        "policy",
        RecordingEngine(),
        store,  # type: ignore[arg-type]
        LearnerLoopConfig(queue_updates=8),
        checkpoint_dir=tmp_path / "ckpt",
        eta=10,
    )
    budgets = _budgets(window=10)
    router = GroupRouter(
        selector=selector,
        store=store,
        policy=policy,
        prm=None,
        train=TrainConfig(),
        adapt=AdaptConfig(enabled=True),
        episode=EpisodeConfig(),
        selector_file=tmp_path / "selector.json",
        budgets=budgets,
        budgets_file=tmp_path / "budgets.json",
    )
    learning = asyncio.create_task(policy.run())

    def group(gid: str, variant: TaskVariant, wins: int) -> GroupRecord:
        return _group(wins, 2, steps=2, variant=variant, gid=gid, screen=screen)

    await router(group("g-orig", full, 0))  # acc 0: an easier candidate (the hint)
    hinted = await selector.next_variant()
    await router(group("g-hint", hinted, 1))  # accepted
    await router(group("g-easy", hinted, 2))  # acc 1: a harder candidate
    harder = selector.pending["t"].candidate
    await router(group("g-hard", harder, 0))  # rejected: not observed
    await router(GroupRecord("g-empty", hinted, (), {}, gave_up=2))  # nothing scored
    await policy.finish()
    await asyncio.wait_for(learning, 30)
    await store.close()

    expected = {"t": [[0, 2, []], [1, 2, [2]], [2, 2, [2, 2]]]}
    assert budgets.state_dict() == expected
    assert json.loads((tmp_path / "budgets.json").read_text()) == expected
    # 3 of 6 pooled: the middle band, and a limit from the longest recent success
    assert budgets.budget(hinted).size == 4 and budgets.budget(hinted).max_steps == 5
    metrics = budgets.metrics(group("g-next", hinted, 1))
    assert metrics["budget_task_accuracy"] == 0.5 and metrics["budget_next_max_steps"] == 5


def test_runs_show_names_the_switch_when_a_run_had_it_on(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cua_rl.cli import cli
    from cua_rl.store.run_store import RunStore

    for enabled in (True, False):
        run_dir = tmp_path / f"budgets-{enabled}"
        store = RunStore(run_dir)
        cfg = RunConfig.model_validate({"train": {"budgets": {"enabled": enabled}}})
        store.save_config(cfg.model_dump(mode="json"))
        store.close()
        text = CliRunner().invoke(cli, ["runs", "show", str(run_dir)]).output
        assert ("train.budgets.enabled=True" in text) is enabled, text


async def test_under_ray_the_driver_sends_each_groups_budget_with_its_variant() -> None:
    """The scheduler service opens a group with the budget the driver supplied beside
    the variant (runtime/ray/services.VariantFeed); without one, the global size."""
    from cua_rl.rollout.scheduler import GroupBudget
    from cua_rl.runtime.ray.services import SchedulerService

    service = SchedulerService(4, max_groups=2, backlog=4)
    first, second = _variant(), _variant(name="narrow", instruction="Sort rows 1-5.")

    async def driver() -> None:
        await service.wait_demand()
        await service.supply(first, GroupBudget(2, max_steps=6))
        await service.wait_demand()
        await service.supply(second)

    feeding = asyncio.create_task(driver())
    tickets = [await service.next_ticket("w0") for _ in range(6)]
    await feeding
    assert [(t.variant.variant_id, t.max_steps) for t in tickets if t is not None] == [
        (first.variant_id, 6)
    ] * 2 + [(second.variant_id, None)] * 4
