"""The paper's reward comparisons as switches (docs/algorithms.md, "Rewards and
advantages"): the outcome weight w of Eq. 1 (w = 0: reward-model-only supervision),
one lambda for Eq. 1 and another for Eq. 2, the old `train.lam` read as both, and a
frozen reward model whose votes train nothing. Hand-computed numbers throughout."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.config import RunConfig, load_config
from cua_rl.errors import ConfigError
from cua_rl.reward.advantages import step_rewards
from cua_rl.reward.config import RewardConfig, stored_reward
from cua_rl.reward.samples import group_samples
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import GroupRecord, Step, StepVerdict, TaskVariant, Trajectory, Vote
from cua_rl.types import TrajectoryStatus as Status

VARIANT = TaskVariant(
    task_id="t",
    domain="os",
    evaluator_name="default",
    instruction="Do the task.",
    config=(),
    evaluator={"func": "infeasible"},
)
EVERYONE = AdaptBand(alpha_low=0.0, alpha_high=1.0)
"""Every group feeds the reward model (the paper's band would drop some)."""


@pytest.fixture
async def store(tmp_path: Path) -> AsyncRunStore:
    store = AsyncRunStore.open(tmp_path / "run")
    yield store
    await store.close()


async def _group(store: AsyncRunStore, members: list[tuple[bool, tuple[int, ...]]]) -> GroupRecord:
    """One one-step trajectory per (won, votes of its step)."""
    from tests_support.scored_groups import white_screen

    screen = await white_screen(store)
    trajs, verdicts = [], {}
    for k, (won, votes) in enumerate(members):
        tid = f"tr{k}"
        trajs.append(
            Trajectory(
                tid,
                VARIANT.variant_id,
                (
                    Step(
                        0,
                        screen,
                        "Action: click.",
                        (),
                        None,
                        "",
                        screen,
                        token_ids=(5, 6),
                        logprobs=(-0.1, -0.2),
                    ),
                ),
                Status.FINISHED,
                score=1.0 if won else 0.0,
            )
        )
        verdicts[tid] = (StepVerdict(tid, 0, tuple(Vote(v, "why", (9,), (-0.3,)) for v in votes)),)
    return GroupRecord("g", VARIANT, tuple(trajs), verdicts)


def _policy(out) -> dict[str, float]:  # noqa: ANN001 - GroupSamples
    return {s.trajectory_id: s.advantage for s in out.policy}


def _prm(out, tid: str) -> list[float]:  # noqa: ANN001
    return [s.advantage for s in out.prm if s.trajectory_id == tid]


def test_eq1_with_an_outcome_weight_hand_computed() -> None:
    # w = 0: R = lambda * mean S; O = +1 with votes (1, 1, -1) and lambda 0.5 -> 1/6
    assert step_rewards(1, [(1, 1, -1), ()], lam=0.5, outcome_weight=0.0) == pytest.approx(
        [1 / 6, 0.0]
    )
    # w = 0.5, O = -1, votes (1, 1, -1), lambda 1 -> -0.5 + 1/3
    assert step_rewards(-1, [(1, 1, -1)], outcome_weight=0.5) == pytest.approx([-1 / 6])
    with pytest.raises(ValueError, match="no reward"):
        RewardConfig(outcome_weight=0.0, policy_lam=0.0)


async def test_with_w_0_flipping_the_outcomes_leaves_the_policy_advantages(
    store: AsyncRunStore,
) -> None:
    votes = [(1, 1, 1), (1, -1, -1), (-1, -1, -1), (1, 1, -1)]
    won = [True, True, False, False]
    flipped = await _group(store, [(not w, v) for w, v in zip(won, votes, strict=True)])
    group = await _group(store, list(zip(won, votes, strict=True)))
    votes_only = RewardConfig(outcome_weight=0.0)
    a = _policy(
        await group_samples(group, store, EpisodeConfig(), reward=votes_only, band=EVERYONE)
    )
    b = _policy(
        await group_samples(flipped, store, EpisodeConfig(), reward=votes_only, band=EVERYONE)
    )
    # R = mean S = (1, -1/3, -1, 1/3): mean 0, population std sqrt(5/9)
    std = math.sqrt(5 / 9)
    assert a == pytest.approx(
        {"tr0": 1 / std, "tr1": -1 / 3 / std, "tr2": -1 / std, "tr3": 1 / 3 / std}
    )
    assert b == pytest.approx(a)
    # the switch matters: with the outcome in (w = 1) the flip changes them
    with_outcome = [
        _policy(await group_samples(g, store, EpisodeConfig(), band=EVERYONE))
        for g in (group, flipped)
    ]
    assert with_outcome[0] != pytest.approx(with_outcome[1])


async def test_each_lambda_reaches_its_own_equation(store: AsyncRunStore) -> None:
    # tr0 won, votes (1, 1, 1); tr1 won, (-1, -1, -1); tr2 lost, (1, 1, -1)
    group = await _group(store, [(True, (1, 1, 1)), (True, (-1, -1, -1)), (False, (1, 1, -1))])
    out = await group_samples(
        group,
        store,
        EpisodeConfig(),
        band=EVERYONE,
        reward=RewardConfig(policy_lam=4.0, prm_lam=1.0),
    )
    # Eq. 1, lambda 4: R = (1 + 4, 1 - 4, -1 + 4/3) = (5, -3, 1/3); mean 7/9,
    # deviations (38/9, -34/9, -4/9), population variance 2616/243
    std = math.sqrt(2616 / 243)
    assert _policy(out) == pytest.approx(
        {"tr0": 38 / 9 / std, "tr1": -34 / 9 / std, "tr2": -4 / 9 / std}
    )
    # Eq. 2, lambda 1 on tr2: R' = -1 + 1/3 = -2/3; vote rewards R' * S = (-2/3, -2/3, 2/3)
    # standardize to (-1/sqrt 2, -1/sqrt 2, sqrt 2): the -1 vote agreed with the failure
    r2 = 1 / math.sqrt(2)
    assert _prm(out, "tr2") == pytest.approx([-r2, -r2, 2 * r2])
    # Eq. 2, lambda 4 on tr2: R' = -1 + 4/3 = 1/3 > 0, so the same votes swap sides,
    # while the policy's advantages (lambda of Eq. 1 unchanged) stay as they were
    swapped = await group_samples(
        group,
        store,
        EpisodeConfig(),
        band=EVERYONE,
        reward=RewardConfig(policy_lam=4.0, prm_lam=4.0),
    )
    assert _prm(swapped, "tr2") == pytest.approx([r2, r2, -2 * r2])
    assert _policy(swapped) == pytest.approx(_policy(out))


async def test_a_frozen_reward_model_gets_no_samples_and_every_vote_is_counted(
    store: AsyncRunStore,
) -> None:
    group = await _group(store, [(True, (1, 1, -1)), (False, (-1, 1, -1))])
    out = await group_samples(group, store, EpisodeConfig(), band=EVERYONE, prm_samples=False)
    assert out.prm == [] and out.skipped["prm/frozen"] == 6
    assert len(out.policy) == 2  # the policy trains as before


def test_the_old_lam_key_reads_as_both_lambdas_with_one_notice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="cua_rl.reward.config"):
        cfg = load_config(RunConfig, preset="quickstart", overrides=["train.lam=0.25"])
    assert (cfg.train.reward.policy_lam, cfg.train.reward.prm_lam) == (0.25, 0.25)
    notices = [r for r in caplog.records if "train.lam" in r.getMessage()]
    assert len(notices) == 1 and "\n" not in notices[0].getMessage()
    with pytest.raises(ConfigError, match="train.lam and train.reward.prm_lam"):
        load_config(
            RunConfig, preset="quickstart", overrides=["train.lam=0.25", "train.reward.prm_lam=1"]
        )
    # a stored run's config is read silently, with the old key's meaning
    caplog.clear()
    assert stored_reward({"train": {"lam": 0.5}}) == RewardConfig(policy_lam=0.5, prm_lam=0.5)
    assert stored_reward({}) == RewardConfig() and not caplog.records


def test_reward_model_only_needs_the_judge() -> None:
    with pytest.raises(ConfigError, match="judge.enabled is false"):
        load_config(
            RunConfig,
            preset="quickstart",
            overrides=["train.reward.outcome_weight=0", "judge.enabled=false"],
        )
