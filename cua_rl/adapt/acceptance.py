"""When to adapt a task and when to keep the candidate (Algorithm 2 of RLAnything).

A task q whose group accuracy is above alpha_high is too easy (goal: harder);
below alpha_low it is too hard (goal: easier). A candidate q' is accepted only
if it moved accuracy the intended way without overshooting out of the band:
harder iff alpha_low < acc(q') < acc(q); easier iff acc(q) < acc(q') < alpha_high.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Direction = Literal["harder", "easier"]


class AdaptBand(BaseModel):
    """The accuracy band where a task teaches the policy something."""

    model_config = ConfigDict(extra="forbid")

    alpha_low: float = Field(0.2, ge=0.0, le=1.0)
    """Below this group accuracy a task is too hard: propose an easier variant."""
    alpha_high: float = Field(0.8, ge=0.0, le=1.0)
    """Above this group accuracy a task is too easy: propose a harder variant."""

    @model_validator(mode="after")
    def _ordered(self) -> AdaptBand:
        if self.alpha_low >= self.alpha_high:
            raise ValueError(
                f"alpha_low ({self.alpha_low}) must be < alpha_high ({self.alpha_high})"
            )
        return self

    def goal(self, accuracy: float) -> Direction | None:
        if accuracy > self.alpha_high:
            return "harder"
        if accuracy < self.alpha_low:
            return "easier"
        return None

    def accept(self, direction: Direction, acc_parent: float, acc_candidate: float) -> bool:
        if direction == "harder":
            return self.alpha_low < acc_candidate < acc_parent
        return acc_parent < acc_candidate < self.alpha_high
