"""Typed settings of a training run beyond rollouts: learners, sync, metrics (adaptation:
`cua_rl/adapt/config.py`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.learner.config import LearnerConfig, LearnerLoopConfig, WeightSyncConfig
from cua_rl.reward.config import RewardConfig, reward_from_train_section
from cua_rl.rollout.config import HorizonSchedule


class RewardModelLearnerConfig(LearnerConfig):
    """The reward model's learner: a learner that may also be switched off."""

    enabled: bool = True
    """Train the reward model (Eq. 2). False: the judge keeps voting from its starting
    checkpoint (`prm.model`) for the whole run; no reward-model learner is built, no
    reward-model weight sync happens (the paper's "Policy" row of Table 1, and its
    section 3.2.6 with a reward model optimized beforehand)."""


class PrmSampleBand(AdaptBand):
    """The group-accuracy band of the tasks whose verdicts train the reward model
    (the paper's filter: a task always failed or always solved says little about
    single steps). Unset by default: then `adapt.band` is used; when set, a key
    left out takes the default below."""

    alpha_low: float = Field(0.2, ge=0.0, le=1.0)
    """Tasks with a group accuracy below this give the reward model no samples."""
    alpha_high: float = Field(0.8, ge=0.0, le=1.0)
    """Tasks with a group accuracy above this give the reward model no samples."""


class ReplayConfig(BaseModel):
    """Success replay (DART-GUI, ARPO; not part of RLAnything, so off in its preset):
    per task variant, a bounded buffer of successful trajectories; a training group
    in which no rollout succeeded has its last rollout (slot order) replaced by the
    freshest stored success, trained with its stored behaviour logprobs
    (docs/algorithms.md, "Success replay")."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    """Replace one rollout of a zero-success training group by a stored success of
    the same task variant (off: groups train as sampled, the paper's method)."""
    per_task: int = Field(2, ge=1)
    """Successes kept per task variant, first in first out: a new success pushes
    out the oldest."""
    max_lag: int = Field(8, ge=0)
    """A stored success whose behaviour version is more than this many policy
    updates behind the learner is evicted instead of replayed
    (`replay_evicted_stale`); the learner's eta does not judge replayed members."""


class TaskBudgetConfig(BaseModel):
    """Per-task budgets (DART-GUI's dynamic rollout frequency and trajectory length; not
    part of RLAnything, so off in its preset): the rollouts of a task's next group and
    their step limit follow its recent training groups (docs/algorithms.md, "Per-task
    budgets"). Needs `runtime: local` (the decision is made where groups open)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    """Size each task's groups and cap their steps from its recent groups (off: every
    group has `fleet.group_size` rollouts and the global step limit, the paper's method)."""
    window: int = Field(4, ge=1)
    """Latest training groups remembered per task (task id, all its variants)."""
    min_scored: int = Field(4, ge=1)
    """Scored rollouts a task needs in its window before its budget leaves the global
    one (fewer: `fleet.group_size` rollouts, no task step limit)."""
    solved_above: float = Field(0.8, ge=0.0, le=1.0)
    """Window accuracy above which a task counts as solved: `min_rollouts` per group."""
    unsolved_below: float = Field(0.2, ge=0.0, le=1.0)
    """Window accuracy below which a task counts as unsolved: `max_rollouts` per group
    (between the two: `fleet.group_size`)."""
    min_rollouts: int = Field(2, ge=2)
    """Rollouts per group of a solved task (at least 2: a group of one has nothing to
    be normalised against, its advantages are all 0)."""
    max_rollouts: int | None = Field(None, ge=2)
    """Rollouts per group of an unsolved task; None: `fleet.group_size` (budgets then
    only save rollouts, never add any)."""
    length_margin: float = Field(1.5, ge=1.0)
    """A task with a success in its window gets `ceil(length_margin x its longest
    recent successful episode)` steps, within [`min_steps`, the global limit]."""
    min_steps: int = Field(5, ge=1)
    """Smallest step limit a task budget sets (never above the global limit)."""

    @model_validator(mode="after")
    def _ordered(self) -> TaskBudgetConfig:
        if self.unsolved_below > self.solved_above:
            raise ValueError(
                f"budgets: unsolved_below {self.unsolved_below} is above "
                f"solved_above {self.solved_above}"
            )
        if self.max_rollouts is not None and self.max_rollouts < self.min_rollouts:
            raise ValueError(
                f"budgets: max_rollouts {self.max_rollouts} is below "
                f"min_rollouts {self.min_rollouts}"
            )
        return self


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_policy_updates: int = Field(3, ge=1)
    """The run ends after this many policy updates (the fleet drains first)."""
    mode: Literal["async", "sync"] = "async"
    """async: actors never wait for the learners (bounded by fleet.eta). sync: the
    synchronous baseline of the same loop; a batch of `tasks_per_update` groups runs,
    is judged, trained on and synced before the next batch starts
    (`runtime/sync_batches.py`; `cua-rl bench loop` compares the two)."""
    tasks_per_update: int = Field(1, ge=1)
    """Task groups per learner update (paper: 12, each of fleet.group_size = 8
    rollouts). An update takes whole groups, all their steps (policy) or votes
    (reward model), split into `mini_batches` optimizer steps; eta counts these
    updates. Groups with no learning signal (all advantages zero) are skipped."""
    keep_zero_advantage: bool = False
    """Also train on samples whose advantage is zero (they add only their KL term
    and cost a full forward/backward each)."""
    reward: RewardConfig = Field(default_factory=RewardConfig)
    """The outcome weight and the lambdas of the policy's and the reward model's rewards
    (Eq. 1, Eq. 2). The old key `train.lam` is still read as both lambdas."""
    policy: LearnerConfig = Field(default_factory=LearnerConfig)
    """Policy learner (its temperature is episode.temperature, resolved at load)."""
    prm: RewardModelLearnerConfig = Field(default_factory=RewardModelLearnerConfig)
    """Reward-model learner (its temperature is judge.temperature, resolved at load);
    `enabled: false` freezes the reward model."""
    policy_loop: LearnerLoopConfig = Field(default_factory=LearnerLoopConfig)
    prm_loop: LearnerLoopConfig = Field(default_factory=LearnerLoopConfig)
    sync: WeightSyncConfig = Field(default_factory=WeightSyncConfig)
    prm_sample_band: PrmSampleBand | None = None
    """Accuracy band of tasks that feed the reward-model learner; None: adapt.band
    (the paper's filter). A wider band trains the PRM on more tasks."""
    replay: ReplayConfig = Field(default_factory=ReplayConfig)
    """Success replay of stored successful trajectories into zero-success groups."""
    budgets: TaskBudgetConfig = Field(default_factory=TaskBudgetConfig)
    """Per-task rollouts and step limits from each task's recent groups."""
    horizon: HorizonSchedule | None = None
    """Optional step-limit schedule; None keeps episode.max_steps. The fleet applies it
    to each episode from the learner version when the episode starts; with
    `budgets` on, an episode's limit is the smaller of the two."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_lam(cls, data: Any) -> Any:
        """`train.lam` (one lambda for both rewards) reads as both new lambdas."""
        return reward_from_train_section(data) if isinstance(data, dict) else data


class MetricsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tensorboard: bool = True
    """Write TensorBoard event files under RUN_DIR/tensorboard (if installed)."""
    wandb_project: str | None = None
    """Also log to Weights & Biases under this project (needs the `wandb` extra,
    `pip install -e .[wandb]`, and a login)."""
    live: bool = True
    """A rich live summary in the terminal."""
    status_interval_s: float = Field(30.0, ge=0.0)
    """Seconds between one-line status messages (phase, episodes, updates, rates,
    rewards, ETA) when stderr is not a terminal or `live` is off; 0: none."""
    spans: bool = False
    """Record where the run's time goes: every process appends timed spans (policy and
    reward-model calls, desktop actions, screenshots, setup, evaluation, waits,
    learner steps, checkpoints, weight syncs) as JSON lines to
    RUN_DIR/spans/spans-<pid>.jsonl (about 8 spans per step, each ~10 us of CPU and
    ~150 bytes). `cua_rl.report.loop_profile` turns them into busy fractions and an
    episode time breakdown (docs/architecture.md, "Where the time goes")."""
    spans_max_mb: int = Field(64, ge=1)
    """Size at which a process's span file rotates (one older file kept, so at most
    twice this per process); the quickstart writes ~3.6 MB/h over all its processes.
    Fleet workers under Ray keep the default."""
