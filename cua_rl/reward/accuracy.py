"""How well a reward model's votes agree with outcomes and with step labels.

The reward columns of the paper's Table 1, as pure functions (no I/O), so that the
numbers `cua-rl eval-prm` reports can be checked by hand
(docs/reward-model-accuracy.md):

- a step's verdict is the sign of the mean of its m votes, `sign(mean_j s_j)`
  with `s_j` in {+1, -1, 0} (0: a vote with no readable score); a mean of exactly
  0 (a tie, or only unreadable votes) is no verdict and counts as wrong;
- outcome accuracy: the fraction of steps whose verdict equals their trajectory's
  verified outcome O (+1 success, -1 failure), over every judged step;
- process accuracy: the fraction of labelled steps whose verdict equals the step's
  label (+1 good, -1 bad), over labelled steps only;
- a labelling judge's label is the majority of its parseable votes, which is the
  sign of their sum; a tie (or no parseable vote) gives no label.

The sign of a mean is the sign of the sum, so both reduce to `vote_sign`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


def vote_sign(votes: Sequence[int]) -> int:
    """sign(mean of `votes`): +1, -1, or 0 for a tie, only-unparseable or no votes."""
    total = sum(votes)
    return (total > 0) - (total < 0)


def majority_label(votes: Sequence[int]) -> int | None:
    """The majority of the parseable votes (+1 or -1); None on a tie or when no vote
    parsed (an unparseable vote is 0 and adds nothing to the sum)."""
    return vote_sign(votes) or None


@dataclass(frozen=True, slots=True)
class JudgedStep:
    """One step of a scored trajectory and what is known about it."""

    trajectory_id: str
    step_index: int
    variant_id: str
    outcome: int
    """The trajectory's verified outcome: +1 success, -1 failure."""
    votes: tuple[int, ...] | None
    """The judged reward model's m votes; None when its request failed (the step is
    lost: counted, never judged right or wrong)."""
    label: int | None = None
    """The step's label (+1, -1), None when it has none."""
    label_failed: bool = False
    """The labelling judge's request for this step failed (hence no label)."""
    label_tie: bool = False
    """The labelling judge answered but its parseable votes tied (hence no label)."""


@dataclass
class AccuracyTally:
    """Counts over a set of steps, and the two accuracies they give."""

    steps: int = 0
    """Steps with the judged model's votes (the outcome accuracy's denominator)."""
    outcome_correct: int = 0
    labelled: int = 0
    """Judged steps with a label (the process accuracy's denominator)."""
    process_correct: int = 0
    ties: int = 0
    """Judged steps whose vote mean is 0 (wrong against any target)."""
    votes: int = 0
    unparseable_votes: int = 0
    failed_requests: int = 0
    """Steps lost because the judged model's request failed."""
    label_failed_requests: int = 0
    label_ties: int = 0
    trajectory_ids: set[str] = field(default_factory=set)

    def add(self, step: JudgedStep) -> None:
        self.trajectory_ids.add(step.trajectory_id)
        self.label_failed_requests += step.label_failed
        self.label_ties += step.label_tie
        if step.votes is None:
            self.failed_requests += 1
            return
        verdict = vote_sign(step.votes)
        self.steps += 1
        self.votes += len(step.votes)
        self.unparseable_votes += sum(1 for v in step.votes if v == 0)
        self.ties += verdict == 0
        self.outcome_correct += verdict != 0 and verdict == step.outcome
        if step.label is not None:
            self.labelled += 1
            self.process_correct += verdict != 0 and verdict == step.label

    @property
    def outcome_accuracy(self) -> float | None:
        """None when no step was judged."""
        return self.outcome_correct / self.steps if self.steps else None

    @property
    def process_accuracy(self) -> float | None:
        """None when no judged step is labelled."""
        return self.process_correct / self.labelled if self.labelled else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome_accuracy": self.outcome_accuracy,
            "process_accuracy": self.process_accuracy,
            "steps": self.steps,
            "trajectories": len(self.trajectory_ids),
            "outcome_correct": self.outcome_correct,
            "labelled": self.labelled,
            "unlabelled": self.steps - self.labelled,
            "process_correct": self.process_correct,
            "ties": self.ties,
            "votes": self.votes,
            "unparseable_votes": self.unparseable_votes,
            "failed_requests": self.failed_requests,
            "label_failed_requests": self.label_failed_requests,
            "label_ties": self.label_ties,
        }


def tally(steps: Iterable[JudgedStep]) -> AccuracyTally:
    """All of `steps` in one tally."""
    out = AccuracyTally()
    for step in steps:
        out.add(step)
    return out


def tally_by(
    steps: Iterable[JudgedStep], key: Callable[[JudgedStep], str] = lambda s: s.variant_id
) -> dict[str, AccuracyTally]:
    """One tally per `key` (default: the task variant), keys sorted."""
    out: dict[str, AccuracyTally] = {}
    for step in steps:
        out.setdefault(key(step), AccuracyTally()).add(step)
    return dict(sorted(out.items()))
