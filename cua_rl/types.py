"""The data contracts that cross module and process boundaries (docs/architecture.md).

Everything here is a frozen dataclass of plain values so it pickles across Ray
and serializes to the run store without custom code. Modules talk to each other
through these types, never through one another's internals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

ActionKind = Literal[
    "key",
    "type",
    "mouse_move",
    "left_click",
    "left_click_drag",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "scroll",
    "hscroll",
    "wait",
    "terminate",
]
"""The computer_use actions of Qwen3-VL agents."""


@dataclass(frozen=True, slots=True)
class Action:
    """One parsed tool call, with coordinates already in screen pixels."""

    kind: ActionKind
    keys: tuple[str, ...] = ()
    text: str | None = None
    coordinate: tuple[int, int] | None = None
    """Target point in screen pixels (end point for left_click_drag)."""
    start: tuple[int, int] | None = None
    """Start point of a left_click_drag in screen pixels (None: current cursor)."""
    pixels: int | None = None
    """Scroll amount; positive scrolls up (pyautogui's convention)."""
    time: float | None = None
    """Seconds to wait for `wait`."""
    status: Literal["success", "failure"] | None = None
    """Outcome the agent declares with `terminate`."""


@dataclass(frozen=True, slots=True)
class ParseError:
    """Why a model response could not be turned into actions.

    A parse error is data, not an exception: the actor records a no-op step
    with it and the reward model still judges that step (docs/architecture.md, failure rules).
    """

    code: str
    """Short machine-readable reason, e.g. `no_tool_call`, `bad_json`, `bad_argument`."""
    message: str


@dataclass(frozen=True, slots=True)
class StepTimings:
    """Wall-clock seconds spent in each phase of one step."""

    policy_s: float = 0.0
    act_s: float = 0.0
    screenshot_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Step:
    """One screenshot -> response -> action transition of an episode."""

    index: int
    screenshot_before: str
    """Content hash of the screenshot the policy saw."""
    response: str
    actions: tuple[Action, ...]
    parse_error: ParseError | None
    code: str
    """The pyautogui code sent to the desktop ("" for a no-op)."""
    screenshot_after: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    """Behavior logprob of each sampled response token."""
    policy_version: int = 0
    timings: StepTimings = field(default_factory=StepTimings)


@dataclass(frozen=True, slots=True)
class Vote:
    """One of the m reward-model judgements of a step."""

    score: Literal[-1, 0, 1]
    """1 good step, -1 bad step, 0 the answer could not be parsed."""
    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class StepVerdict:
    """The reward model's m votes on one step."""

    trajectory_id: str
    step_index: int
    votes: tuple[Vote, ...]
    prm_version: int = 0

    @property
    def mean_score(self) -> float:
        return sum(v.score for v in self.votes) / len(self.votes) if self.votes else 0.0


class TrajectoryStatus(StrEnum):
    FINISHED = "finished"
    STEP_LIMIT = "step_limit"
    ABORTED = "aborted"
    """The desktop or a server died: never scored as a failure, never trained on."""
    SETUP_FAILED = "setup_failed"
    """The task's setup failed (its reason is stored): never scored, never trained
    on, not retried (it would fail again)."""


@dataclass(frozen=True, slots=True)
class TaskVariant:
    """A runnable task: an OSWorld task JSON plus the evaluator variant in use."""

    task_id: str
    domain: str
    evaluator_name: str
    instruction: str
    config: tuple[dict[str, Any], ...]
    """Setup steps run before the episode (OSWorld `config`)."""
    evaluator: dict[str, Any]
    """OSWorld evaluator spec (func, result, expected, options, postconfig, ...)."""
    related_apps: tuple[str, ...] = ()
    snapshot: str = ""
    source_path: str = ""
    """File the task was loaded from, for error messages."""
    revision: int = 0
    """Bumped by task adaptation when it rewrites the instruction of the same
    evaluator (hints added or removed), so every distinct variant has its own id."""
    step_progress: dict[str, Any] | None = None
    """A task's own progress probe (its JSON's `step_progress`, not OSWorld's): a
    command whose output is the number of sub-goals done so far, read after setup
    and after each step; the steps that raised it are labelled good, the others bad,
    as `step_labels` of the trajectory (rollout/step_progress.py). None: no labels."""

    @property
    def variant_id(self) -> str:
        base = f"{self.task_id}:{self.evaluator_name}"
        return f"{base}@{self.revision}" if self.revision else base


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One finished (or aborted) episode of a task variant."""

    id: str
    variant_id: str
    steps: tuple[Step, ...]
    status: TrajectoryStatus
    score: float | None = None
    """Raw evaluator score; None when the episode was aborted."""
    policy_version_at_start: int = 0
    screen: tuple[int, int] = (1920, 1080)
    """Screen size of the desktop, needed to rebuild the policy's prompts."""

    @property
    def outcome(self) -> int | None:
        """O in {-1, 1}: evaluator score > 0 is a success."""
        if self.score is None:
            return None
        return 1 if self.score > 0 else -1


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A completed task group: the G rollouts of one variant with their verdicts.

    The one contract for a finished group, wherever its rollouts ran (it crosses
    Ray): the selector, the sample builder and the metrics read it; nobody
    mutates it. Rollouts given up after repeated aborts are absent (`gave_up`
    counts them, `gave_up_reasons` says why), so `trajectories` holds scored
    episodes only. A group whose every rollout was given up is still emitted,
    empty: a candidate task's group must be decided even then (Algorithm 2).
    """

    group_id: str
    variant: TaskVariant
    trajectories: tuple[Trajectory, ...]
    """In slot order."""
    verdicts: Mapping[str, tuple[StepVerdict, ...]]
    """Reward-model verdicts per trajectory id, in step order."""
    gave_up: int = 0
    gave_up_reasons: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """No scored rollout: every one was given up (no accuracy, no samples)."""
        return not self.trajectories

    @property
    def accuracy(self) -> float:
        wins = sum(1 for t in self.trajectories if t.outcome == 1)
        return wins / len(self.trajectories) if self.trajectories else 0.0


@dataclass(frozen=True, slots=True)
class StepSample:
    """What a learner consumes; the same shape for policy and reward-model samples."""

    messages: tuple[dict[str, Any], ...]
    """Chat messages of the prompt (OpenAI format, images as data URLs or hashes)."""
    response_token_ids: tuple[int, ...]
    behavior_logprobs: tuple[float, ...]
    version: int
    advantage: float
    trajectory_id: str = ""
    """The episode the sample comes from (per-trajectory loss aggregation)."""
    step_index: int = -1
    """Its step in that episode (coverage reports); -1 when not from an episode."""
    replayed: bool = False
    """From a stored trajectory put back into a later group (success replay): it
    carries its own behaviour logprobs and is left out of the group's freshness
    decision."""
