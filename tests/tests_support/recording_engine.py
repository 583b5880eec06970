"""A learner engine that records the batches it is given instead of training a model
(the learner service's contract with an engine is `version`, `train_step` and
`save_checkpoint`; the model behind it is the torch boundary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cua_rl.types import StepSample


class RecordingEngine:
    """Records every batch it is given; one `train_step` is one version."""

    def __init__(self) -> None:
        self.version = 0
        self.batches: list[list[StepSample]] = []

    def train_step(self, batch: list[StepSample]) -> dict[str, float]:
        self.batches.append(list(batch))
        self.version += 1
        return {"loss": 0.0}

    def save_checkpoint(self, path: Any) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
