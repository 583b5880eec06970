"""Which model pools and learners a run starts, decided once from its config.

The launchers (`runtime/local.py`, `runtime/train.py`, `runtime/ray/train.py`) and the
placement plan (`runtime/placement_plan.py`) all ask `run_roles`, so a switch that takes
a role out (`judge.enabled`, `train.prm.enabled`, adaptation with a model rewriter)
takes it out of the run and of the plan alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cua_rl.config import RunConfig


@dataclass(frozen=True, slots=True)
class RunRoles:
    prm_replicas: bool
    """The reward model's pool runs: the judge votes on every step (`judge.enabled`);
    the critic of adaptation uses the same pool."""
    prm_learner: bool
    """The reward model trains (`train.prm.enabled` with the judge on): its learner,
    checkpoints and weight sync exist."""
    rewriter_replicas: bool
    """The rewriter's own frozen pool runs (`adapt.enabled` with `rewriter.type: model`)."""

    @property
    def learners(self) -> tuple[str, ...]:
        """The learners a training run builds, in start order."""
        return ("policy", "prm") if self.prm_learner else ("policy",)

    @property
    def pools(self) -> tuple[str, ...]:
        """The model pools a run starts (the rewriter's is started by training alone)."""
        return (("policy", "prm") if self.prm_replicas else ("policy",)) + (
            ("rewriter",) if self.rewriter_replicas else ()
        )


def run_roles(cfg: RunConfig) -> RunRoles:
    """The roles `cfg` runs: a frozen reward model still votes (pool, no learner); with
    the judge off there is neither."""
    judge = cfg.judge.enabled
    return RunRoles(
        prm_replicas=judge,
        prm_learner=judge and cfg.train.prm.enabled,
        rewriter_replicas=cfg.adapt.enabled and cfg.adapt.rewriter.type == "model",
    )
