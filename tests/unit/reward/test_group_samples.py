"""The sample builder on a paper-sized group: 8 trajectories x 15 steps x 3 votes
become 120 policy and 360 reward-model samples, hand-checked advantages, and every
step that is not a sample is counted by reason."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.reward.samples import group_samples
from cua_rl.rollout.config import EpisodeConfig
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

VARIANT = TaskVariant(
    task_id="t",
    domain="os",
    evaluator_name="default",
    instruction="Do the task.",
    config=(),
    evaluator={"func": "infeasible"},
)


async def _screen(store: AsyncRunStore) -> str:
    png = io.BytesIO()
    Image.new("RGB", (64, 48), "white").save(png, "PNG")
    return await store.put_screenshot(png.getvalue())


def _trajectory(k: int, steps: int, screen: str, win: bool) -> Trajectory:
    return Trajectory(
        f"tr{k}",
        VARIANT.variant_id,
        tuple(
            Step(
                i,
                screen,
                f"Action: step {i}.",
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
        score=1.0 if win else 0.0,
    )


def _verdicts(traj: Trajectory, votes: tuple[int, ...]) -> tuple[StepVerdict, ...]:
    return tuple(
        StepVerdict(traj.id, s.index, tuple(Vote(v, "why", (9,), (-0.3,)) for v in votes))
        for s in traj.steps
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncRunStore:
    store = AsyncRunStore.open(tmp_path / "run")
    yield store
    await store.close()


async def test_a_paper_sized_group_loses_no_step(store: AsyncRunStore) -> None:
    screen = await _screen(store)
    trajs = tuple(_trajectory(k, 15, screen, win=k < 4) for k in range(8))
    group = GroupRecord("g", VARIANT, trajs, {t.id: _verdicts(t, (1, 1, -1)) for t in trajs})
    out = await group_samples(group, store, EpisodeConfig(), band=AdaptBand())
    assert len(out.policy) == 120 and len(out.prm) == 360 and not out.skipped
    # every step index of every trajectory is trained
    assert {(s.trajectory_id, s.step_index) for s in out.policy} == {
        (t.id, i) for t in trajs for i in range(15)
    }
    # hand-computed: R = O + mean(1, 1, -1) = O + 1/3; wins and losses split 4/4, so
    # every step index standardizes to +1 (wins) and -1 (losses)
    assert {round(s.advantage, 6) for s in out.policy if s.trajectory_id < "tr4"} == {1.0}
    assert {round(s.advantage, 6) for s in out.policy if s.trajectory_id >= "tr4"} == {-1.0}
    # PRM: per vote R * S over (1, 1, -1): R(+1, +1, -1) standardized = (+a, +a, -2a)
    a = 1 / 2**0.5
    votes = [round(s.advantage, 6) for s in out.prm[:3]]
    assert votes == [round(a, 6), round(a, 6), round(-2 * a, 6)]


async def test_lone_tail_steps_and_flat_votes_are_counted_not_lost(store: AsyncRunStore) -> None:
    screen = await _screen(store)
    long, short = _trajectory(0, 3, screen, win=False), _trajectory(1, 1, screen, win=True)
    group = GroupRecord(
        "g", VARIANT, (long, short), {t.id: _verdicts(t, (1, 1, 1)) for t in (long, short)}
    )
    out = await group_samples(
        group, store, EpisodeConfig(), band=AdaptBand(alpha_low=0.0, alpha_high=1.0)
    )
    # step 0 is shared (advantages +-1); steps 1 and 2 are the long trajectory's alone: 0
    assert sorted((s.trajectory_id, s.step_index, round(s.advantage, 6)) for s in out.policy) == [
        ("tr0", 0, -1.0),
        ("tr1", 0, 1.0),
    ]
    assert out.skipped["policy/zero_advantage"] == 2
    # unanimous votes have no spread: 4 steps x 3 votes counted as zero advantage
    assert not out.prm and out.skipped["prm/zero_advantage"] == 12
    kept = await group_samples(
        group,
        store,
        EpisodeConfig(),
        band=AdaptBand(alpha_low=0.0, alpha_high=1.0),
        keep_zero_advantage=True,
    )
    assert len(kept.policy) == 4 and len(kept.prm) == 12


async def test_a_deleted_screenshot_costs_its_steps_not_the_group(store: AsyncRunStore) -> None:
    """Screenshot retention may delete a file an episode still running had taken
    (store/retention.py): the steps that need it are counted, the rest train."""
    screen = await _screen(store)
    png = io.BytesIO()
    Image.new("RGB", (64, 48), "black").save(png, "PNG")
    gone = await store.put_screenshot(png.getvalue())
    trajs = tuple(_trajectory(k, 2, screen, win=k == 0) for k in range(2))
    lost = Trajectory(
        "tr2",
        VARIANT.variant_id,
        tuple(
            Step(i, gone, "Action.", (), None, "", gone, token_ids=(5,), logprobs=(-0.1,))
            for i in range(2)
        ),
        TrajectoryStatus.FINISHED,
        score=0.0,
    )
    trajs = (*trajs, lost)
    store.screenshot_path(gone).unlink()
    group = GroupRecord("g", VARIANT, trajs, {t.id: _verdicts(t, (1, 1, -1)) for t in trajs})
    out = await group_samples(
        group, store, EpisodeConfig(), band=AdaptBand(), keep_zero_advantage=True
    )
    assert out.skipped["policy/missing_screenshot"] == 2
    assert out.skipped["prm/missing_screenshot"] == 6
    assert len(out.policy) == 4 and {s.trajectory_id for s in out.prm} == {"tr0", "tr1"}
