"""What one finished task group says about training: rewards, success, advantages,
staleness, PRM agreement, throughput and desktop utilization."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from typing import Protocol

from cua_rl.config import RunConfig
from cua_rl.reward.samples import GroupSamples
from cua_rl.types import GroupRecord


class FleetTotals(Protocol):
    """What the metrics read of a fleet, wherever its actors run."""

    counts: Counter[str]
    busy_s: float


class LearnerVersion(Protocol):
    """A version gate, local or remote: only the learner's version is read."""

    learner_version: int


def group_metrics(
    group: GroupRecord,
    samples: GroupSamples,
    gate: LearnerVersion,
    fleet: FleetTotals,
    cfg: RunConfig,
    started: float,
) -> dict[str, float]:
    """`started`: `time.monotonic()` when the run started (rates are since then).

    `trajectories` (the group's scored episodes) is what the run reports as finished:
    `bench faults` compares the sum over metrics.jsonl with the store to count lost
    trajectories of a training run."""
    trajs = list(group.trajectories)
    # the group's own rollouts: a member put in by success replay is not a rollout
    # of this group (its samples still count in policy_samples and advantages)
    own = {t.id for t in trajs}
    rewards = [r for tid, rs in samples.rewards.items() if tid in own for r in rs]
    votes = [
        (t.outcome, v.score)
        for t in trajs
        for verdict in group.verdicts.get(t.id, ())
        for v in verdict.votes
        if v.score != 0
    ]
    advantages = [s.advantage for s in samples.policy]
    elapsed = max(time.monotonic() - started, 1e-6)
    out = {
        "trajectories": float(len(trajs)),
        "success_rate": group.accuracy,
        f"success/{group.variant.domain}": group.accuracy,
        "step_reward_mean": statistics.fmean(rewards) if rewards else 0.0,
        "policy_samples": float(len(samples.policy)),
        "prm_samples": float(len(samples.prm)),
        "advantage_abs_mean": statistics.fmean(abs(a) for a in advantages) if advantages else 0.0,
        "staleness": float(
            gate.learner_version
            - min((t.policy_version_at_start for t in trajs), default=gate.learner_version)
        ),
        "steps_per_s": fleet.counts["steps"] / elapsed,
        "desktop_utilization": fleet.busy_s / (elapsed * max(cfg.desktops.count, 1)),
        "episode_len_mean": statistics.fmean(len(t.steps) for t in trajs) if trajs else 0.0,
    }
    for key in ("workers_lost", "workers_replaced"):  # a Ray fleet's (ray/fleet.py)
        if key in fleet.counts:
            out[key] = float(fleet.counts[key])
    if votes:
        out["prm_agreement"] = sum(1 for o, s in votes if o == s) / len(votes)
    return out
