"""Data-parallel training engine on DeepSpeed (ZeRO 0-3; gloo on CPU, NCCL on GPU).

One process per rank, started torchrun-style (MASTER_ADDR/PORT, RANK,
WORLD_SIZE, LOCAL_RANK in the environment). Each rank passes its own share of
the batch to `train_step`; step.py keeps the ranks' forwards and backwards in
lock step and makes the loss a global token mean. The optimizer is our AdamW
(optim.py), handed to DeepSpeed as a client optimizer so both engines step the
same way; DeepSpeed does the clipping (`gradient_clipping`) and the schedule.

The KL reference is a full, frozen copy on every rank (fine for models a rank
can hold; a ZeRO-3 inference engine would be the way for larger ones).
Every public method is collective: all ranks must call it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import torch

from cua_rl.inference.hf_engine import load_model
from cua_rl.learner.base import TrainEngine
from cua_rl.learner.checkpoint_ranks import check_ranks, write_ranks
from cua_rl.learner.collectives import dist_all_reduce
from cua_rl.learner.config import DeepSpeedEngineConfig, LearnerConfig
from cua_rl.learner.optim import build_optimizer, build_scheduler
from cua_rl.learner.reference import load_reference

CHECKPOINT_TAG = "train_state"
"""Sub-directory DeepSpeed writes into (its `latest` file names it too)."""


def deepspeed_config(cfg: LearnerConfig, world_size: int) -> dict[str, Any]:
    """The DeepSpeed JSON config. Micro-batching is ours (token budget), so DeepSpeed
    sees one micro-batch per step and is told accumulation boundaries explicitly."""
    assert isinstance(cfg.engine, DeepSpeedEngineConfig)
    zero: dict[str, Any] = {"stage": cfg.engine.zero_stage}
    if cfg.engine.zero_stage == 3:
        # Gather the full weights at save time so checkpoints and exports are plain HF.
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "train_batch_size": world_size,
        "gradient_clipping": cfg.grad_clip,
        "zero_optimization": zero,
        "bf16": {"enabled": cfg.engine.bf16},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }


class DeepSpeedTrainEngine(TrainEngine):
    """A DeepSpeed engine plus the reference model on one rank."""

    def __init__(self, cfg: LearnerConfig, model_dir: str | Path) -> None:
        if not isinstance(cfg.engine, DeepSpeedEngineConfig):
            raise ValueError(f"DeepSpeedTrainEngine got engine.type={cfg.engine.type!r}")
        if cfg.engine.dist_backend == "gloo":
            os.environ.setdefault("DS_ACCELERATOR", "cpu")
        import deepspeed
        import torch.distributed as dist
        from transformers import AutoProcessor

        deepspeed.init_distributed(dist_backend=cfg.engine.dist_backend)
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        torch.manual_seed(cfg.seed + self.rank)
        self.cfg = cfg
        self.processor = AutoProcessor.from_pretrained(str(model_dir))
        model = load_model(model_dir)
        optimizer = build_optimizer(model, cfg)
        scheduler = build_scheduler(optimizer, cfg)
        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=model,
            optimizer=optimizer,
            lr_scheduler=scheduler,
            config=deepspeed_config(cfg, self.world_size),
        )
        self.engine.eval()  # no dropout: deterministic proximal pass (see engine_torch.py)
        self.device = self.engine.device
        self.reference = load_reference(cfg, model_dir, self.device)
        self.version = 0
        self.optimizer_steps = 0

    @property
    def model(self) -> Any:
        return self.engine.module

    # StepOps -----------------------------------------------------------------
    def forward_model(self) -> Any:
        return self.engine

    def backward(self, loss: torch.Tensor, boundary: bool) -> None:
        self.engine.set_gradient_accumulation_boundary(boundary)
        self.engine.backward(loss)

    def optimizer_step(self) -> float:
        self.engine.step()
        self.optimizer_steps += 1
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    def all_reduce(self, values: list[float], op: Literal["sum", "max"]) -> list[float]:
        return dist_all_reduce(values, op)

    # TrainEngine -------------------------------------------------------------
    def save_checkpoint(self, path: str | Path) -> None:
        state = {
            "version": self.version,
            "optimizer_steps": self.optimizer_steps,
            "config": self.cfg.model_dump(),
        }
        self.engine.save_checkpoint(str(path), tag=CHECKPOINT_TAG, client_state=state)
        if self.rank == 0:
            write_ranks(path, self.world_size, "deepspeed", self.cfg.engine.zero_stage)  # type: ignore[union-attr]  # a DeepSpeed learner's config has an engine

    def load_checkpoint(self, path: str | Path) -> None:
        check_ranks(path, self.world_size)
        loaded, state = self.engine.load_checkpoint(str(path), tag=CHECKPOINT_TAG)
        if loaded is None:
            raise FileNotFoundError(f"no DeepSpeed checkpoint {CHECKPOINT_TAG!r} in {path}")
        self.version = int(state["version"])
        self.optimizer_steps = int(state["optimizer_steps"])

    def export_weights(self, path: str | Path) -> Path:
        """Rank 0 writes the HF directory (ZeRO-3 parameters gathered first)."""
        import torch.distributed as dist

        path = Path(path)
        state = {name: tensor.clone() for name, tensor in self.named_parameters()}
        if self.rank == 0:
            module = self.engine.module
            buffers = {n: b for n, b in module.state_dict().items() if n not in state}
            module.save_pretrained(str(path), state_dict={**buffers, **state})
            self.processor.save_pretrained(str(path))
        dist.barrier()
        return path

    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full tensors; under ZeRO-3 each is gathered in turn (collective)."""
        if self.cfg.engine.zero_stage != 3:  # type: ignore[union-attr]  # a DeepSpeed learner's config has an engine
            for name, param in self.engine.module.named_parameters():
                yield name, param.detach()
            return
        import deepspeed

        for name, param in self.engine.module.named_parameters():
            with deepspeed.zero.GatheredParameters([param], modifier_rank=None):
                yield name, param.detach().clone()
