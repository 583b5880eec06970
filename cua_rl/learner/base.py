"""The contract of a training engine, and the factory that picks one.

A `TrainEngine` owns a policy (or reward-model) copy, its optimizer and
scheduler, and a frozen reference model. `train_step` consumes one batch of
`StepSample`s and advances `version` by exactly one, whatever the number of
optimizer steps inside, so the version a weight sync publishes counts batches.

For weight sync: `export_weights(dir)` writes an HF checkpoint directory that
`from_pretrained` and the hf server's `/update_weights {path}` load, and
`named_parameters()` yields full, HF-named tensors (gathered under ZeRO-3) in a
fixed order, ready for `weight_transfer.manifest`/`send`. Under DeepSpeed these
calls are collective: every rank must make them.

With `ranks` > 1 the engine in the driver is a `RankGroupEngine`
(engine_group.py): the same interface, each call fanned out to the rank
processes or actors that hold one DeepSpeed engine each.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl.learner.config import LearnerConfig
from cua_rl.learner.rank_split import RankShare
from cua_rl.types import StepSample

if TYPE_CHECKING:
    import torch


class TrainEngine(ABC):
    """One learner's model, optimizer and reference; engines differ in parallelism only."""

    cfg: LearnerConfig
    version: int
    """Completed `train_step` calls, restored by `load_checkpoint`."""
    optimizer_steps: int
    """Completed optimizer steps (drives the learning-rate schedule)."""
    processor: Any
    reference: Any
    """The frozen reference model of the KL term (None when beta is 0)."""
    scheduler: Any
    device: torch.device

    def train_step(self, batch: Sequence[StepSample]) -> dict[str, float]:
        """Train on one batch (this rank's share of it, under DeepSpeed); return metrics.
        The loop is the same for every engine; they differ in backward/step hooks."""
        from cua_rl.learner.rank_split import single_share

        return self.train_share(
            single_share(batch, self.cfg.mini_batches, self.cfg.loss.aggregation)
        )

    def train_share(self, share: RankShare) -> dict[str, float]:
        """Train on this rank's share of an update split by `rank_split.split_update`."""
        from cua_rl.learner.step import run_share_step

        if not share.samples and share.filler is None:
            raise ValueError("train_step needs at least one sample on every rank")
        metrics = run_share_step(
            self,  # type: ignore[arg-type]  # its subclasses provide the StepOps methods
            share,
            processor=self.processor,
            reference=self.reference,
            cfg=self.cfg,
            device=self.device,
        )
        self.version += 1
        metrics.update(
            version=float(self.version),
            lr=self.scheduler.get_last_lr()[0],
            optimizer_steps=float(self.optimizer_steps),
        )
        return metrics

    def close(self) -> None:
        """Release what the engine started (rank processes, actors); idempotent.
        An in-process engine holds nothing that outlives it."""
        return None

    @abstractmethod
    def save_checkpoint(self, path: str | Path) -> None:
        """Everything needed to resume exactly: weights, optimizer, scheduler, counters."""

    @abstractmethod
    def load_checkpoint(self, path: str | Path) -> None:
        """Restore a `save_checkpoint` directory into this engine."""

    @abstractmethod
    def export_weights(self, path: str | Path) -> Path:
        """Write the current weights as an HF checkpoint directory (model + processor)."""

    @abstractmethod
    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full tensors under their HF names, in `model.named_parameters()` order."""

    @property
    @abstractmethod
    def model(self) -> Any:
        """The HF model being trained (under DeepSpeed, the engine's module)."""
