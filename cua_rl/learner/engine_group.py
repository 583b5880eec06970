"""A learner of N DeepSpeed ranks, behind the one `TrainEngine` interface.

The learner service in the driver stays the one place that decides updates; it
calls this engine as it calls an in-process one. Each call is fanned out to the
ranks (processes here, Ray actors under `runtime: ray`, through a `RankTransport`)
and returns when every rank has answered:
- `train_step`: the driver measures each sample's tokens (the processor, as the
  ranks will encode it) and splits the update by tokens (`rank_split`); every rank
  trains its share, the step keeps them in lock step and reduces the metrics, so
  rank 0's metrics are the update's; the engine adds the ranks and each rank's
  tokens (they reach metrics.jsonl through the service's metrics hook);
- `save_checkpoint` / `load_checkpoint`: every rank writes / reads its ZeRO shard
  in the same directory (shared storage on a cluster), rank 0 adds `ranks.json`;
  a checkpoint of another rank count is refused before any rank loads it;
- `export_weights`: rank 0 writes the HF directory after the ZeRO-3 gather;
- `named_parameters`: rank 0 gathers the full weights and returns them; the other
  ranks are free as soon as the gather is done (weight sync sends from here).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cua_rl.learner.base import TrainEngine
from cua_rl.learner.checkpoint_ranks import check_ranks
from cua_rl.learner.config import LearnerConfig
from cua_rl.learner.rank_split import RankShare, split_update
from cua_rl.types import StepSample

if TYPE_CHECKING:
    import torch


class RankTransport(Protocol):
    """Calls the same `RankWorker` method on every rank of a group at once."""

    world_size: int

    def start(self) -> None:
        """Start the ranks and form their DeepSpeed group."""

    def call(
        self, calls: Sequence[tuple[str, tuple[Any, ...]]], timeout_s: float, what: str
    ) -> list[Any]:
        """`calls[r]` = (method, args) for rank r; the results in rank order. Raises
        `LearnerRankError` when a rank fails, dies or misses the deadline."""

    def close(self) -> None:
        """Stop every rank; idempotent."""


class RankGroupEngine(TrainEngine):
    """The driver's handle on a learner's rank group."""

    reference = None
    scheduler = None

    def __init__(self, cfg: LearnerConfig, model_dir: str | Path, ranks: RankTransport) -> None:
        import torch
        from transformers import AutoProcessor

        self.cfg = cfg
        self.world_size = ranks.world_size
        self.processor = AutoProcessor.from_pretrained(str(model_dir))
        self.device = torch.device("cpu")
        self.version = 0
        self.optimizer_steps = 0
        self._ranks = ranks
        self._lock = threading.Lock()
        """One call at a time: the learner thread, a catch-up export and a sync's
        gather never interleave their collectives."""
        try:
            ranks.start()
        except BaseException:
            ranks.close()
            raise

    @property
    def model(self) -> Any:
        """None: the model lives in the ranks."""
        return None

    def _all(self, method: str, *args: Any, what: str | None = None) -> list[Any]:
        with self._lock:
            return self._ranks.call(
                [(method, args)] * self.world_size, self.cfg.rank_timeout_s, what or method
            )

    def shares(self, batch: Sequence[StepSample]) -> list[RankShare]:
        """The update split over the ranks (deterministic for a batch)."""
        from cua_rl.learner.batching import encode_sample

        lengths = [encode_sample(self.processor, s).length for s in batch]
        return split_update(
            batch, lengths, self.world_size, self.cfg.mini_batches, self.cfg.loss.aggregation
        )

    def train_step(self, batch: Sequence[StepSample]) -> dict[str, float]:
        shares = self.shares(batch)
        with self._lock:
            results = self._ranks.call(
                [("train", (share,)) for share in shares], self.cfg.rank_timeout_s, "train_step"
            )
        metrics = dict(results[0])
        self.version = int(metrics["version"])
        self.optimizer_steps = int(metrics.get("optimizer_steps", self.optimizer_steps))
        tokens = [float(share.tokens) for share in shares]
        metrics.update(
            ranks=float(self.world_size),
            rank_tokens_max=max(tokens),
            rank_tokens_min=min(tokens),
            **{f"rank{r}_tokens": t for r, t in enumerate(tokens)},
            **{f"rank{r}_samples": float(s.samples) for r, s in enumerate(shares)},
        )
        return metrics

    def save_checkpoint(self, path: str | Path) -> None:
        self._all("save", str(path), what="save_checkpoint")

    def load_checkpoint(self, path: str | Path) -> None:
        check_ranks(path, self.world_size)
        versions = self._all("load", str(path), what="load_checkpoint")
        if len(set(versions)) != 1:
            raise RuntimeError(f"ranks restored different versions from {path}: {versions}")
        self.version, self.optimizer_steps = versions[0]

    def export_weights(self, path: str | Path) -> Path:
        self._all("export", str(path), what="export_weights")
        return Path(path)

    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Rank 0's gathered weights (every rank takes part in a ZeRO-3 gather)."""
        named = self._all("parameters", what="weight gather")[0]
        yield from named

    def prepare_weights(self) -> list[dict[str, Any]]:
        """Rank 0 gathers and keeps the weights for `send_weights`; their manifest."""
        return self._all("prepare_weights", what="weight gather")[0]

    def send_weights(
        self, host: str, port: int, bucket_bytes: int, timeout_s: float
    ) -> dict[str, Any]:
        """Rank 0 broadcasts the prepared weights to the replica joining host:port (the
        driver hosts that link's store); `{"ok": False, "error"}` when the link failed."""
        return self._all("send_weights", host, port, bucket_bytes, timeout_s, what="weight send")[0]

    def close(self) -> None:
        self._ranks.close()
