"""Per-task budgets (`train.budgets`, off by default; not part of RLAnything): the
rollouts of a task's next group and their step limit follow that task's recent
training groups, after DART-GUI's dynamic rollout frequency and dynamic trajectory
length (arXiv 2509.23866). The rules are ours, stated here and in
docs/algorithms.md ("Per-task budgets").

Rules, per task id, over its latest `window` observed groups:
- evidence: until the window holds `min_scored` scored rollouts, the task has the
  global budget: `fleet.group_size` rollouts and no task step limit;
- accuracy: successes / scored rollouts pooled over the window (a group of 2 weighs
  less than a group of 8); success is `outcome == 1`, as `GroupRecord.accuracy`;
- rollouts: accuracy above `solved_above` -> `min_rollouts` (a solved task teaches
  little); below `unsolved_below` -> `max_rollouts` (more tries to find a success);
  otherwise `fleet.group_size`; always within [`min_rollouts`, `max_rollouts` or G];
- step limit: with a success in the window, `ceil(length_margin x the longest
  successful episode in it)`, within [`min_steps`, the run's global limit]; with
  none, no task limit (a task that fails keeps the whole horizon to explore).

Why per task id, not per variant (success replay keys by variant): a budget is
about how hard the task is for the policy; adaptation rewrites a task's variant, and
a new variant's history would start empty. The window bounds how long an old
variant's groups count.

What is observed: the training groups (`original`, `accepted`) as sampled, after the
selector and before success replay (a replayed success is not a rollout). A rejected
candidate's group is not: its variant is never served again.

The budget is decided once per group, when it opens (`GroupScheduler(budget=...)`),
so all rollouts of a group share a size and a step limit; the limit travels with the
tickets and the fleet lowers the horizon's limit to it (`Fleet._episode`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from cua_rl.config import RunConfig
from cua_rl.config.train import TaskBudgetConfig
from cua_rl.rollout.scheduler import GroupBudget
from cua_rl.types import GroupRecord, TaskVariant


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """What a budget remembers of one group: no trajectories, a few ints."""

    wins: int
    scored: int
    success_lengths: tuple[int, ...]
    """Steps of each successful rollout."""


class TaskBudgets:
    """The per-task windows and the rules above; `budget` is the scheduler's hook."""

    def __init__(self, cfg: TaskBudgetConfig, *, group_size: int, max_steps: int) -> None:
        """`group_size`: the global G (`fleet.group_size`); `max_steps`: the run's
        global step limit (the horizon's last step when a horizon is set, else
        `episode.max_steps`), which no task limit exceeds."""
        self.cfg = cfg
        self.global_size = group_size
        self.ceiling = max_steps
        self._windows: dict[str, deque[GroupOutcome]] = {}

    @classmethod
    def for_run(cls, cfg: RunConfig) -> TaskBudgets:
        """A run's budgets: its `fleet.group_size`, and its global step limit."""
        horizon = cfg.train.horizon
        ceiling = horizon.steps[-1] if horizon is not None else cfg.episode.max_steps
        return cls(cfg.train.budgets, group_size=cfg.fleet.group_size, max_steps=ceiling)

    # observing -----------------------------------------------------------------
    def observe(self, group: GroupRecord) -> None:
        """Add a training group (as sampled) to its task's window; an empty group says
        nothing and is skipped. Disabled: nothing is kept."""
        if not self.cfg.enabled or group.empty:
            return
        wins = [t for t in group.trajectories if t.outcome == 1]
        window = self._windows.setdefault(group.variant.task_id, deque(maxlen=self.cfg.window))
        window.append(
            GroupOutcome(len(wins), len(group.trajectories), tuple(len(t.steps) for t in wins))
        )

    def accuracy(self, task_id: str) -> float | None:
        """Pooled window accuracy; None until the window holds `min_scored` rollouts."""
        window = self._windows.get(task_id, ())
        scored = sum(g.scored for g in window)
        if scored < self.cfg.min_scored or scored == 0:
            return None
        return sum(g.wins for g in window) / scored

    # deciding ------------------------------------------------------------------
    def group_size(self, variant: TaskVariant) -> int:
        """Rollouts of the next group of the variant's task."""
        cfg, g = self.cfg, self.global_size
        accuracy = self.accuracy(variant.task_id) if cfg.enabled else None
        if accuracy is None:
            return g
        high = cfg.max_rollouts or g
        if accuracy > cfg.solved_above:
            size = cfg.min_rollouts
        elif accuracy < cfg.unsolved_below:
            size = high
        else:
            size = g
        return max(cfg.min_rollouts, min(size, high))

    def max_steps(self, variant: TaskVariant) -> int | None:
        """Step limit of the next group of the variant's task; None: no task limit."""
        if not self.cfg.enabled or self.accuracy(variant.task_id) is None:
            return None
        lengths = [n for g in self._windows[variant.task_id] for n in g.success_lengths]
        if not lengths:
            return None
        steps = math.ceil(self.cfg.length_margin * max(lengths))
        return min(self.ceiling, max(self.cfg.min_steps, steps))

    def budget(self, variant: TaskVariant) -> GroupBudget:
        """Both decisions at once, as `GroupScheduler` asks when a group opens."""
        return GroupBudget(self.group_size(variant), self.max_steps(variant))

    # reporting and resuming ----------------------------------------------------
    def metrics(self, group: GroupRecord) -> dict[str, float]:
        """The group's task after this group, for metrics.jsonl (none when disabled):
        the group's own size (its rollouts, given-up ones included), the task's window
        accuracy (-1 before `min_scored`), its next group's rollouts and step limit
        (0: no task limit), and how many tasks have a window."""
        if not self.cfg.enabled:
            return {}
        accuracy = self.accuracy(group.variant.task_id)
        return {
            "budget_rollouts": float(len(group.trajectories) + group.gave_up),
            "budget_task_accuracy": -1.0 if accuracy is None else accuracy,
            "budget_next_rollouts": float(self.group_size(group.variant)),
            "budget_next_max_steps": float(self.max_steps(group.variant) or 0),
            "budget_tasks": float(len(self._windows)),
        }

    def state_dict(self) -> dict[str, Any]:
        """{task id: [[wins, scored, [success lengths]], ...] oldest first}."""
        return {
            task: [[g.wins, g.scored, list(g.success_lengths)] for g in window]
            for task, window in self._windows.items()
            if window
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore saved windows; a window saved longer than `window` keeps its latest."""
        self._windows = {
            task: deque(
                (
                    GroupOutcome(int(w), int(n), tuple(int(x) for x in lengths))
                    for w, n, lengths in rows
                ),
                maxlen=self.cfg.window,
            )
            for task, rows in state.items()
        }
