"""Single-process training engine on plain PyTorch (the tiny model, tests, one GPU).

The model is loaded exactly as the hf server loads it (`hf_engine.load_model`:
float32, sdpa) and stays in eval mode: Qwen3-VL has no dropout to lose, and a
deterministic forward is what makes the proximal ratio exactly 1 before the
first update. A checkpoint is one `train_state.pt` (model, optimizer,
scheduler, counters, RNG) plus `learner.json` with the counters for humans.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import torch

from cua_rl.inference.hf_engine import load_model
from cua_rl.learner.base import TrainEngine
from cua_rl.learner.checkpoint_ranks import check_ranks
from cua_rl.learner.config import LearnerConfig
from cua_rl.learner.optim import build_optimizer, build_scheduler
from cua_rl.learner.reference import load_reference

STATE_FILE = "train_state.pt"
INFO_FILE = "learner.json"


class TorchTrainEngine(TrainEngine):
    """Model, AdamW, schedule and reference in one process."""

    rank = 0
    world_size = 1

    def __init__(self, cfg: LearnerConfig, model_dir: str | Path) -> None:
        from transformers import AutoProcessor

        if cfg.engine.type != "torch":
            raise ValueError(f"TorchTrainEngine got engine.type={cfg.engine.type!r}")
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.model_dir = Path(model_dir)
        self.device = torch.device(cfg.engine.device)
        self.processor = AutoProcessor.from_pretrained(str(model_dir))
        self._model = load_model(model_dir).to(self.device)
        self.reference = load_reference(cfg, model_dir, self.device)
        self.optimizer = build_optimizer(self._model, cfg)
        self.scheduler = build_scheduler(self.optimizer, cfg)
        self.version = 0
        self.optimizer_steps = 0

    @property
    def model(self) -> Any:
        return self._model

    # StepOps -----------------------------------------------------------------
    def forward_model(self) -> Any:
        return self._model

    def backward(self, loss: torch.Tensor, boundary: bool) -> None:
        loss.backward()

    def optimizer_step(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self._model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.optimizer_steps += 1
        return float(norm)

    def all_reduce(self, values: list[float], op: Literal["sum", "max"]) -> list[float]:
        return list(values)

    # TrainEngine -------------------------------------------------------------
    def save_checkpoint(self, path: str | Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = {
            "model": self._model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "version": self.version,
            "optimizer_steps": self.optimizer_steps,
            "torch_rng": torch.get_rng_state(),
        }
        torch.save(state, path / STATE_FILE)
        info = {
            "engine": "torch",
            "version": self.version,
            "optimizer_steps": self.optimizer_steps,
            "config": self.cfg.model_dump(),
        }
        (path / INFO_FILE).write_text(json.dumps(info, indent=2))

    def load_checkpoint(self, path: str | Path) -> None:
        check_ranks(path, 1)
        file = Path(path) / STATE_FILE
        if not file.is_file():
            raise FileNotFoundError(f"no learner checkpoint at {file}")
        state = torch.load(file, map_location=self.device, weights_only=False)
        self._model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.version = int(state["version"])
        self.optimizer_steps = int(state["optimizer_steps"])
        torch.set_rng_state(state["torch_rng"])

    def export_weights(self, path: str | Path) -> Path:
        path = Path(path)
        self._model.save_pretrained(str(path))
        self.processor.save_pretrained(str(path))
        return path

    def named_parameters(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name, param in self._model.named_parameters():
            yield name, param.detach()
