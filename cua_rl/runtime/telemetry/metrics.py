"""Training metrics: a JSON-lines file always, TensorBoard and W&B when enabled.

`metrics.jsonl` in the run directory is the source the `plot` command and
people read; TensorBoard and W&B are views of the same records. Writing never
fails a run: a sink that errors is disabled with one warning.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from cua_rl.config.train import MetricsConfig

log = logging.getLogger(__name__)


class MetricsLogger:
    def __init__(self, run_dir: Path, cfg: MetricsConfig, config: dict[str, Any]) -> None:
        self.path = run_dir / "metrics.jsonl"
        self._file = self.path.open("a")
        self._tb: Any = None
        self._wandb: Any = None
        if cfg.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(run_dir / "tensorboard"))
            except ImportError:
                log.warning("tensorboard is not installed: metrics go to metrics.jsonl only")
        if cfg.wandb_project:
            try:
                import wandb

                self._wandb = wandb.init(
                    project=cfg.wandb_project, config=config, dir=str(run_dir), resume="allow"
                )
            except Exception as exc:  # noqa: BLE001 - metrics must never stop a run
                log.warning("W&B disabled: %s", exc)

    def log(self, scope: str, values: dict[str, float], step: int) -> None:
        record = {"time": time.time(), "scope": scope, "step": step, **values}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        for key, value in values.items():
            tag = f"{scope}/{key}"
            if self._tb is not None:
                self._tb.add_scalar(tag, value, step)
        if self._wandb is not None:
            try:
                self._wandb.log({f"{scope}/{k}": v for k, v in values.items()}, step=step)
            except Exception as exc:  # noqa: BLE001
                log.warning("W&B disabled: %s", exc)
                self._wandb = None

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
