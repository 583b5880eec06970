"""One rank of a learner's rank group: a plain class around a `DeepSpeedTrainEngine`.

It lives in a rank process (rank_process.py, `runtime: local`) or a Ray actor
(runtime/ray/ranks.py); the driver's `RankGroupEngine` calls the same method on
every rank at once, since every DeepSpeed call is collective. The class is built
cheaply and `start` joins the torch.distributed group, so that a Ray actor can be
asked for its node's address before the group's rendezvous address is known.

What a call returns is small (metrics, versions) except `parameters`: rank 0
returns the full weights, gathered under ZeRO-3; the other ranks take part in
the gather and return at once (they never hold a full copy). `prepare_weights` and
`send_weights` are the way that does not bring them to the driver: rank 0 keeps the
gathered weights and broadcasts them itself to a replica (`train.sync.from_rank0`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cua_rl.learner.config import LearnerConfig
from cua_rl.learner.rank_split import RankShare


class RankWorker:
    """Rank `rank` of `world_size`; `local_rank` is its GPU index on its node."""

    def __init__(
        self, cfg: LearnerConfig, model_dir: str, rank: int, world_size: int, local_rank: int
    ) -> None:
        self.cfg = cfg
        self.model_dir = model_dir
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.engine: Any = None

    def start(self, master_addr: str, master_port: int) -> int:
        """Join the group (torchrun's environment, then DeepSpeed); returns version 0."""
        os.environ.update(
            {
                "MASTER_ADDR": master_addr,
                "MASTER_PORT": str(master_port),
                "RANK": str(self.rank),
                "WORLD_SIZE": str(self.world_size),
                "LOCAL_RANK": str(self.local_rank),
                "TOKENIZERS_PARALLELISM": "false",
            }
        )
        import torch

        torch.set_num_threads(max(1, int(self.cfg.rank_cpus)))
        from transformers.utils import logging as hf_logging

        from cua_rl.learner.engine_deepspeed import DeepSpeedTrainEngine

        hf_logging.disable_progress_bar()
        self.engine = DeepSpeedTrainEngine(self.cfg, self.model_dir)
        if (self.engine.rank, self.engine.world_size) != (self.rank, self.world_size):
            raise RuntimeError(
                f"rank {self.rank}/{self.world_size} joined as "
                f"{self.engine.rank}/{self.engine.world_size}"
            )
        return int(self.engine.version)

    def train(self, share: RankShare) -> dict[str, float]:
        return self.engine.train_share(share)

    def save(self, path: str) -> None:
        self.engine.save_checkpoint(path)

    def load(self, path: str) -> tuple[int, int]:
        """Restore a checkpoint; returns (version, optimizer_steps)."""
        self.engine.load_checkpoint(path)
        return int(self.engine.version), int(self.engine.optimizer_steps)

    def export(self, path: str) -> str:
        return str(self.engine.export_weights(Path(path)))

    def parameters(self) -> list[tuple[str, Any]] | None:
        """Rank 0: every parameter, full and on the CPU, in model order; other ranks:
        None, once their part of the ZeRO-3 gather is done (at once below ZeRO-3)."""
        if self.rank != 0 and self.cfg.engine.zero_stage != 3:  # type: ignore[union-attr]  # learner configs always carry an engine
            return None
        named = [(n, t.detach().cpu().clone()) for n, t in self.engine.named_parameters()]
        return named if self.rank == 0 else None

    def prepare_weights(self) -> list[dict[str, Any]] | None:
        """Rank 0: gather the full weights and keep them for `send_weights`; returns their
        manifest (names, shapes, dtypes: all the driver needs). Other ranks: their part of
        the ZeRO-3 gather, then None."""
        named = self.parameters()
        if named is None:
            return None
        from cua_rl.inference.weight_transfer import manifest

        self._outgoing = named
        return manifest(named)

    def send_weights(
        self, host: str, port: int, bucket_bytes: int, timeout_s: float
    ) -> dict[str, Any] | None:
        """Rank 0: join the link the driver hosts on host:port as its sender and broadcast
        the prepared weights to the replica; the weights are dropped either way. A link
        that fails (abandoned by the driver, the replica gone) is reported, not raised: it
        costs this sync, not the rank group. Other ranks: None at once."""
        if self.rank != 0:
            return None
        from cua_rl.inference import weight_transfer as wt

        named, self._outgoing = getattr(self, "_outgoing", None), None
        if named is None:
            return {"ok": False, "error": "no prepared weights"}
        try:
            group = wt.join_as_sender(host, port, timeout_s)
            seconds = wt.send(group, (t for _, t in named), bucket_bytes)
        except (RuntimeError, TimeoutError) as exc:  # LinkAbandoned is a RuntimeError
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            named.clear()
        return {"ok": True, "buckets": len(seconds), "seconds": sum(seconds)}

    def weights_digest(self) -> str:
        """SHA-256 of this rank's view of the full weights (gathered under ZeRO-3, so
        collective there): equal on every rank of a healthy group."""
        import hashlib

        digest = hashlib.sha256()
        for name, tensor in self.engine.named_parameters():
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().float().numpy().tobytes())  # exact for bf16
        return digest.hexdigest()

    def stop(self) -> None:
        """Leave the process group (the process or actor ends after this)."""
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
