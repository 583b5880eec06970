"""The run's one `seed` (cua_rl/seeds.py): derived seeds are the same in every process,
each request of a rollout carries its own, the rollouts of a group never share one, and
unset learner and engine seeds follow the run's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from cua_rl.config import RunConfig, load_config
from cua_rl.inference.base import ChatResult
from cua_rl.reward.config import JudgeConfig
from cua_rl.reward.judge import StreamingJudge
from cua_rl.rollout.config import EpisodeConfig, FleetConfig
from cua_rl.rollout.fleet import Fleet
from cua_rl.rollout.latency import Dist, LatencyModel
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.rollout.simulated import SimClock, SimulatedDesktops, SimulatedModelPool
from cua_rl.runtime.local import task_cycle
from cua_rl.seeds import SEED_MODULUS, derive_seed
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import TaskVariant

FAST = Dist(median_s=0.001, sigma=0.0)
VARIANTS = [
    TaskVariant(
        task_id=f"t{k}",
        domain="simulated",
        evaluator_name="default",
        instruction="do it",
        config=(),
        evaluator={"func": "simulated"},
    )
    for k in range(2)
]


class Recording:
    """A simulated pool that keeps the sampling keywords of every request it gets."""

    def __init__(self, pool: SimulatedModelPool) -> None:
        self.pool, self.requests = pool, []

    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.requests.append({k: v for k, v in kwargs.items() if k != "session_key"})
        return await self.pool.chat(messages, **kwargs)

    def end_session(self, session_key: str) -> None:
        self.pool.end_session(session_key)


async def _run(tmp: Path, seed: int | None) -> tuple[list[dict], list[dict]]:
    """Two groups of two rollouts on one actor; (policy requests, reward-model requests)."""
    clock = SimClock(1.0, seed=0)
    policy = Recording(
        SimulatedModelPool(
            1,
            2,
            FAST,
            clock,
            slowdown=0.0,
            tokens=2,
            version=lambda: 0,
            episode_length=lambda rng: 2,
        )
    )
    prm = Recording(
        SimulatedModelPool(1, 2, FAST, clock, slowdown=0.0, tokens=2, version=lambda: 0)
    )
    store = AsyncRunStore.open(tmp)
    judge = StreamingJudge(prm, store, JudgeConfig())  # type: ignore[arg-type]
    model = LatencyModel(reset_s=FAST, act_s=FAST, screenshot_s=FAST, evaluate_s=FAST)
    try:
        desktops = SimulatedDesktops(1, model, clock)
        fleet = Fleet(
            GroupScheduler(task_cycle(VARIANTS, 2), 2),
            desktops,
            policy,
            store,
            EpisodeConfig(max_steps=5),
            FleetConfig(actors=1),
            judge=judge,
            seed=seed,
        )  # type: ignore[arg-type]
        await fleet.run()
    finally:
        await judge.close()
        await store.close()
    return policy.requests, prm.requests


async def test_same_seed_same_requests_and_every_rollout_its_own(tmp_path: Path) -> None:
    first = await _run(tmp_path / "a", 7)
    again = await _run(tmp_path / "b", 7)
    other = await _run(tmp_path / "c", 8)
    assert first == again  # sampling parameters, seeds included, request for request
    policy_seeds = [r["seed"] for r in first[0]]
    prm_seeds = [r["seed"] for r in first[1]]
    assert len(policy_seeds) == 8 and len(prm_seeds) == 8  # 4 rollouts x 2 steps
    # no two requests share a seed: not the steps of a rollout, not a group's rollouts
    assert len(set(policy_seeds)) == 8 and len(set(prm_seeds)) == 8
    assert not set(policy_seeds) & set(prm_seeds)
    assert all(0 <= s < SEED_MODULUS for s in policy_seeds + prm_seeds)
    assert [r["seed"] for r in other[0]] != policy_seeds
    assert [r["seed"] for r in other[1]] != prm_seeds
    # rollout (group 0, slot 0, attempt 0) step 0, as cua_rl/seeds.py names it
    assert policy_seeds[0] == derive_seed(derive_seed(7, "rollout", 0, 0, 0), "policy", 0)


async def test_without_a_seed_requests_are_unseeded(tmp_path: Path) -> None:
    policy, prm = await _run(tmp_path, None)
    assert {r["seed"] for r in policy} == {None} and {r["seed"] for r in prm} == {None}


def test_a_derived_seed_is_the_same_in_another_process() -> None:
    code = "from cua_rl.seeds import derive_seed; print(derive_seed(5, 'rollout', 3, 1, 0))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
    )
    assert int(out.stdout) == derive_seed(5, "rollout", 3, 1, 0)
    assert derive_seed(None, "x") is None and derive_seed(5, "a") != derive_seed(5, "b")


def test_learner_and_engine_seeds_follow_the_run_seed_unless_set() -> None:
    cfg = load_config(RunConfig, preset="quickstart", overrides=["seed=11", "train.prm.seed=4"])
    assert cfg.train.policy.seed == derive_seed(11, "learner", "policy")
    assert cfg.train.prm.seed == 4  # set: kept
    assert cfg.policy.vllm.seed == derive_seed(11, "engine", "policy")
    assert cfg.adapt.rewriter.pool.vllm.seed == derive_seed(11, "engine", "rewriter")
    # resolved once: the saved config validates to the same seeds
    assert RunConfig.model_validate(cfg.model_dump(mode="json")) == cfg
    unseeded = load_config(RunConfig, preset="quickstart")
    assert unseeded.seed is None and unseeded.train.policy.seed == 0
    assert unseeded.policy.vllm.seed == 0
