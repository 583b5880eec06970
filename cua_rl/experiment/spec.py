"""An experiment file: arms x seeds, the versions evaluated and the sets they are
evaluated on, as one typed model (`cua-rl experiment FILE`, docs/experiments.md).

An arm is a run config (a preset or a config file) plus dotted overrides; the
seeds are fixed in the file, so which runs make up a result is decided before any
of them runs. Every cell (one arm at one seed) is an ordinary train run directory.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
BEFORE = "before"
"""The table's first row: the initial policy (and reward model), evaluated once per seed."""


def _name(value: str, what: str) -> str:
    if not NAME.match(value):
        raise ValueError(
            f"{what} {value!r} must be 1-40 of a-z, 0-9, '_' and '-' "
            "(it names folders), starting with a letter or digit"
        )
    return value


class ModelFrom(BaseModel):
    """An arm that starts from a model another arm trained (Figure 6a's reward-model-only
    arm: the reward model the integrated arm optimized). At the same seed, the other
    arm's final checkpoint of `role` is exported (`cua-rl export model`) and given to
    this arm's runs as `key=DIR`; that arm's cell therefore runs first."""

    model_config = ConfigDict(extra="forbid")

    arm: str
    """The arm whose model is taken (its cell at the same seed)."""
    role: Literal["policy", "prm"] = "prm"
    """Which of its learners' weights."""
    key: str = "prm.model"
    """The config key that receives the exported folder."""


class Arm(BaseModel):
    """One arm: a run config with its overrides."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Folder-safe name; the table's row."""
    preset: str | None = None
    """A preset shipped with cua-rl (`cua_rl/configs/`)."""
    config: str | None = None
    """A config file, relative to the experiment file (or absolute)."""
    overrides: list[str] = Field(default_factory=list)
    """Dotted `key=value` overrides after the experiment's `common` ones."""
    model_from: ModelFrom | None = None
    """Start from a model another arm trained (see ModelFrom)."""
    label: str = ""
    """How the table and the figure name the arm (default: its name)."""

    @field_validator("name")
    @classmethod
    def _folder_name(cls, value: str) -> str:
        if value == BEFORE:
            raise ValueError(f"arm name {BEFORE!r} is the table's row of the initial policy")
        return _name(value, "arm name")


class EvalSets(BaseModel):
    """Table 1's success columns: each set is the overrides that select its tasks
    (e.g. `tasks.ids=[...]` or `tasks.split=NAME`), rolled out with the policy of the
    evaluated version and no reward model."""

    model_config = ConfigDict(extra="forbid")

    in_domain: list[str]
    """Overrides selecting the tasks the arms train on (each task's original variant)."""
    out_of_domain: list[str] | None = None
    """Overrides selecting tasks with the same skills, never trained on (None: no column)."""


class EvalSettings(BaseModel):
    """When and how the policy is evaluated."""

    model_config = ConfigDict(extra="forbid")

    versions: list[int]
    """Policy versions (updates) at which every cell is evaluated, ascending; the last
    is the length of training. Version 0 (the initial policy) is the `before` row."""
    rollouts: int = Field(default=8, ge=1, le=256)
    """Rollouts of each task's original variant per evaluation (one group per task)."""
    sets: EvalSets
    overrides: list[str] = Field(default_factory=lambda: ["fleet.max_groups=null"])
    """Further overrides of every evaluation rollout (after the set's)."""

    @field_validator("versions")
    @classmethod
    def _ascending(cls, value: list[int]) -> list[int]:
        if not value or any(v < 1 for v in value) or sorted(set(value)) != value:
            raise ValueError(
                "versions must be distinct positive policy versions in "
                f"ascending order, got {value}"
            )
        return value


class PrmEval(BaseModel):
    """Reward-model accuracy (Table 1's process and outcome columns) on one fixed
    held-out set: rollouts of the initial policy made once per experiment, with the
    tasks' own step labels where the tasks write them (docs/experiments.md)."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[str]
    """Overrides selecting the held-out tasks (e.g. `tasks.ids=[...]`)."""
    rollouts: int = Field(default=16, ge=1, le=256)
    """Rollouts per held-out task (one group each)."""
    seed: int = 0
    """Seed of the held-out rollouts (the same set for every arm and seed)."""
    overrides: list[str] = Field(default_factory=lambda: ["fleet.max_groups=null"])
    """Further overrides of the held-out rollout."""
    label_url: str | None = None
    """A labelling judge for tasks that write no step labels (eval-prm's --label-url);
    None: the labels the tasks stored (the miniature's)."""
    label_model: str | None = None
    """With label_url: the model name it serves (eval-prm's --label-model)."""
    label_max_tokens: int | None = Field(default=None, ge=1)
    """With label_url: tokens per labelling vote (a thinking labeller needs thousands)."""


class ExperimentSpec(BaseModel):
    """One experiment: every arm at every seed, evaluated at the same versions."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Folder-safe name of the experiment."""
    description: str = ""
    """What it reproduces (shown by --list and in table.md)."""
    seeds: list[int]
    """Run seeds (`seed=`), fixed before anything runs; one cell per arm and seed."""
    baseline: str
    """The arm every other arm is compared with, paired by seed."""
    common: list[str] = Field(default_factory=list)
    """Overrides every arm, every evaluation and the held-out set get first."""
    arms: list[Arm]
    eval: EvalSettings
    prm_eval: PrmEval | None = None
    """Reward-model accuracy on a held-out set (None: no accuracy columns)."""
    step_timeout_s: float = Field(default=6 * 3600.0, gt=0)
    """A single command of a cell (a training segment, an evaluation) taking longer
    than this is stopped and the grid stops (the cell resumes on the next run)."""

    @field_validator("name")
    @classmethod
    def _folder_name(cls, value: str) -> str:
        return _name(value, "experiment name")

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, value: list[int]) -> list[int]:
        if not value or len(set(value)) != len(value):
            raise ValueError(f"seeds must be a non-empty list of distinct integers, got {value}")
        return value

    @model_validator(mode="after")
    def _arms(self) -> ExperimentSpec:
        names = [a.name for a in self.arms]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"arms need distinct names, got {names}")
        if self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not an arm ({', '.join(names)})")
        for arm in self.arms:
            if (arm.preset is None) == (arm.config is None):
                raise ValueError(f"arm {arm.name!r}: give a preset or a config (one of them)")
            source = arm.model_from.arm if arm.model_from else None
            if source is not None and (source not in names or source == arm.name):
                raise ValueError(f"arm {arm.name!r}: model_from.arm {source!r} is not another arm")
        arm_order(self)  # refuses a cycle of model_from
        return self


def arm_order(spec: ExperimentSpec) -> list[Arm]:
    """The arms in file order, except that an arm whose model comes from another runs
    after it."""
    by_name = {a.name: a for a in spec.arms}
    done: list[Arm] = []
    seen: set[str] = set()

    def visit(arm: Arm, path: tuple[str, ...]) -> None:
        if arm.name in seen:
            return
        if arm.name in path:
            raise ValueError(f"model_from forms a cycle: {' -> '.join((*path, arm.name))}")
        if arm.model_from is not None:
            visit(by_name[arm.model_from.arm], (*path, arm.name))
        seen.add(arm.name)
        done.append(arm)

    for arm in spec.arms:
        visit(arm, ())
    return done


def load_experiment(path: Path) -> ExperimentSpec:
    """The experiment in `path`; ConfigError naming the file and field otherwise."""
    from cua_rl.config import load_config

    return load_config(ExperimentSpec, path)


def arm_config_path(spec_file: Path, arm: Arm) -> Path | None:
    """The arm's config file, resolved against the experiment file's folder."""
    if arm.config is None:
        return None
    path = Path(arm.config).expanduser()
    return path if path.is_absolute() else (spec_file.parent / path).resolve()
