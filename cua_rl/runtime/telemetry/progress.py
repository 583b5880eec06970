"""How far a training run has got: one snapshot for the live table and the status line.

A run on a terminal shows the rich live table (live.py); a run whose stderr is
not a terminal (a batch job, `nohup`, a test) logs one status line every
`metrics.status_interval_s` seconds instead, so that its log says what it is
doing long before the final summary. Both read the same `ProgressSnapshot`.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol


class FleetCounts(Protocol):
    """What the snapshot reads of a fleet, local or under Ray."""

    counts: Counter[str]


class LearnerProgress(Protocol):
    """What the snapshot reads of a learner service."""

    role: str
    version: int


@dataclass(frozen=True, slots=True)
class ProgressSnapshot:
    phase: str
    elapsed_s: float
    groups: int
    episodes: int
    steps: int
    aborted: int
    successes: int
    updates: dict[str, int]
    """Learner role -> updates made (its version)."""
    max_updates: int
    step_reward_mean: float | None
    """Mean step reward (from the reward model's votes) over the groups so far."""
    eta_s: float | None
    """Estimated seconds to the end (None until something finished to measure)."""

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.episodes if self.episodes else None

    @property
    def episodes_per_min(self) -> float:
        return 60.0 * self.episodes / max(self.elapsed_s, 1e-6)

    @property
    def steps_per_s(self) -> float:
        return self.steps / max(self.elapsed_s, 1e-6)

    def line(self) -> str:
        """The one-line status: phase, work done, rates, rewards, ETA."""
        updates = " ".join(
            f"{role}_updates={v}" + (f"/{self.max_updates}" if role == "policy" else "")
            for role, v in self.updates.items()
        )
        success = "-" if self.success_rate is None else f"{self.success_rate:.2f}"
        reward = "-" if self.step_reward_mean is None else f"{self.step_reward_mean:+.2f}"
        return (
            f"[{self.phase}] {duration(self.elapsed_s)} groups={self.groups} "
            f"episodes={self.episodes} steps={self.steps} aborted={self.aborted} "
            f"{updates + ' ' if updates else ''}{self.episodes_per_min:.1f} ep/min "
            f"{self.steps_per_s:.2f} steps/s success={success} step_reward={reward} "
            f"eta={duration(self.eta_s)}"
        )


@dataclass
class RunProgress:
    """Collects what the status needs while a run goes; `snapshot()` reads it."""

    fleet: FleetCounts
    """Its counters are read at each snapshot."""
    learners: list[LearnerProgress]
    max_updates: int
    max_groups: int | None = None
    phase: str = "training"
    started: float = field(default_factory=time.monotonic)
    _reward_sum: float = 0.0
    _reward_groups: int = 0

    def observe_group(self, metrics: dict[str, float]) -> None:
        """Take in the metrics of a finished group (group_metrics.py)."""
        if "step_reward_mean" in metrics:
            self._reward_sum += metrics["step_reward_mean"]
            self._reward_groups += 1

    def snapshot(self) -> ProgressSnapshot:
        elapsed = time.monotonic() - self.started
        updates = {learner.role: learner.version for learner in self.learners}
        counts = self.fleet.counts
        groups = int(counts.get("groups", 0))
        return ProgressSnapshot(
            phase=self.phase,
            elapsed_s=elapsed,
            groups=groups,
            episodes=int(counts.get("episodes", 0)),
            steps=int(counts.get("steps", 0)),
            aborted=int(counts.get("aborted", 0)),
            successes=int(counts.get("successes", 0)),
            updates=updates,
            max_updates=self.max_updates,
            step_reward_mean=(
                self._reward_sum / self._reward_groups if self._reward_groups else None
            ),
            eta_s=self._eta(elapsed, updates.get("policy", 0), groups),
        )

    def _eta(self, elapsed: float, updates: int, groups: int) -> float | None:
        """The sooner of the two ends: the update budget or fleet.max_groups, each
        extrapolated linearly from the rate so far."""
        estimates = []
        if updates > 0:
            estimates.append(elapsed / updates * max(self.max_updates - updates, 0))
        if self.max_groups and groups > 0:
            estimates.append(elapsed / groups * max(self.max_groups - groups, 0))
        return min(estimates) if estimates else None


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
