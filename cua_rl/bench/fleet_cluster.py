"""The simulated cluster `cua-rl bench fleet --simulated` (bench/fleet.py) runs each of
its modes on: the plan that sizes the run and the world of one mode (desktops, policy
and PRM pools, learner nodes, run store and judge, from `rollout/simulated.py`).

It is apart from bench/fleet.py, which drives the modes (the async fleet with its
learner, the synchronous batch baseline) and compares them: this module builds what
both run on, the same capacities for each, so that the modes are measured alike.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path

from cua_rl.errors import ConfigError
from cua_rl.reward.config import JudgeConfig
from cua_rl.reward.judge import StreamingJudge
from cua_rl.rollout.config import EpisodeConfig, FleetConfig
from cua_rl.rollout.fleet import Fleet, GroupHandler
from cua_rl.rollout.latency import LatencyModel
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.rollout.simulated import CountingGate, SimClock, SimulatedDesktops, SimulatedModelPool
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import TaskVariant

VARIANTS = tuple(
    TaskVariant(
        task_id=f"sim-{i:02d}",
        domain="simulated",
        evaluator_name="default",
        instruction=f"Open the report of quarter {i % 4 + 1} and fill in the totals.",
        config=(),
        evaluator={"func": "simulated"},
    )
    for i in range(16)
)


@dataclass(frozen=True)
class Plan:
    """How long each mode runs, in simulated seconds, and the clock's scale."""

    actors: int
    group_size: int
    eta: int
    groups_per_update: int
    scale: float
    warmup_s: float
    window_s: float


def make_plan(
    model: LatencyModel, actors: int, group_size: int, eta: int, duration_s: float
) -> Plan:
    """Warm-up and window span several mean episodes and at least three updates:
    groups complete only when their slowest rollout does (~2 episodes for the first
    ones), so the window holds several updates and weight-sync pauses. The scale fits
    all modes into `duration_s` unless the host could not keep up, in which case the
    run takes longer."""
    if actors < group_size:
        raise ConfigError(f"{actors} actors < a group size of {group_size}: no group can run")
    groups = actors // group_size
    t_ep = model.episode_s(model.episode_steps.mean())
    cap = model.capacity
    # a small fleet with a slow learner updates less often than once per episode:
    # the window still holds three updates (a real machine's `bench loop` fleet)
    update_s = (
        groups * model.learner_s_per_group / cap.learner_nodes(actors) + model.weight_sync_s.mean_s
    )
    warmup, window = max(2.0 * t_ep, 2.0 * update_s), max(3.0 * t_ep, 3.0 * update_s)
    cycle = (
        model.episode_s(model.episode_steps.max)
        + actors
        * model.episode_steps.mean()
        * model.prm_s.mean_s
        / (cap.prm_replicas(actors) * cap.prm_batch)
        + groups * model.learner_s_per_group / cap.learner_nodes(actors)
        + model.weight_sync_s.mean_s
    )
    # two async runs, two sync ones
    fit = duration_s / (2 * (warmup + window) + 2 * max(window, cycle))
    cpu = model.expected_steps_per_s(actors) / model.max_sim_steps_per_s
    scale = model.time_scale or min(1.0, max(fit, cpu, 1e-3))
    return Plan(actors, group_size, eta, groups, scale, warmup, window)


class Cluster:
    """One mode's world: desktops, policy and PRM pools, learner, store, judge."""

    def __init__(
        self, model: LatencyModel, plan: Plan, run_dir: Path, seed: int, *, staggered: bool = True
    ) -> None:
        """`staggered`: a weight sync takes the policy replicas out of routing one at a
        time (`train.sync.staggered`, each for its share of the sync) instead of
        pausing the whole policy pool for all of it."""
        self.model = model
        self.staggered = staggered
        self.plan = plan
        self.clock = SimClock(plan.scale, seed)
        self.gate = CountingGate(plan.eta)
        cap, n = model.capacity, plan.actors
        self.policy = SimulatedModelPool(
            cap.policy_replicas(n),
            cap.policy_batch,
            model.policy_s,
            self.clock,
            slowdown=model.batch_slowdown,
            tokens=model.policy_tokens,
            version=lambda: self.gate.serving_version,
            episode_length=model.episode_steps.draw,
            name="policy",
        )
        self.prm = SimulatedModelPool(
            cap.prm_replicas(n),
            cap.prm_batch,
            model.prm_s,
            self.clock,
            slowdown=model.batch_slowdown,
            tokens=model.prm_tokens,
            version=lambda: 0,
            name="prm",
        )
        self.learner_nodes = cap.learner_nodes(n)
        self.store = AsyncRunStore.open(run_dir)
        self.judge = StreamingJudge(
            self.prm, self.store, JudgeConfig(max_in_flight=self.prm.capacity)
        )
        self.desktops = SimulatedDesktops(n, model, self.clock)
        self.episode = EpisodeConfig(max_steps=model.episode_steps.max)
        self.fleet_cfg = FleetConfig(actors=n, group_size=plan.group_size, eta=plan.eta)
        cycle = itertools.cycle(VARIANTS)

        async def next_variant() -> TaskVariant:
            return next(cycle)

        self.tasks = next_variant

    def fleet(self, scheduler: GroupScheduler, *, judged: bool, on_group: GroupHandler) -> Fleet:
        return Fleet(
            scheduler,
            self.desktops,
            self.policy,
            self.store,
            self.episode,
            self.fleet_cfg,
            judge=self.judge if judged else None,
            gate=self.gate,
            on_group=on_group,
        )

    async def train_and_sync(self, groups: int, *, pause_policy: bool) -> float:
        """One update on `groups` groups, then a weight sync; simulated seconds spent
        syncing (the policy pauses meanwhile when it is serving actors)."""
        await self.clock.sleep(groups * self.model.learner_s_per_group / self.learner_nodes)
        version = self.gate.learner_version + 1
        await self.gate.set_versions(learner=version)
        t0 = time.perf_counter()
        replicas = self.policy.replicas
        if pause_policy and self.staggered and replicas > 1:
            for index in range(replicas):  # one at a time; the others keep serving
                self.policy.withhold(index)
                try:
                    await self.clock.spend(self.model.weight_sync_s, 1.0 / replicas)
                finally:
                    self.policy.withhold(index, False)
        else:  # global pause (one replica: its requests wait, as they would staggered)
            if pause_policy:
                self.policy.pause()
            try:
                await self.clock.spend(self.model.weight_sync_s)
            finally:
                self.policy.resume()
        await self.gate.set_versions(serving=version)
        return (time.perf_counter() - t0) / self.plan.scale

    async def close(self) -> None:
        await self.judge.close()
        await self.store.close()
