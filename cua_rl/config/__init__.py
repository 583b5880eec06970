"""Typed configuration: pydantic models loaded from YAML plus dotted overrides.

A run is described by one YAML file (or a preset shipped in `cua_rl/configs/`)
and `a.b.c=value` overrides from the command line, applied in that order.
Validation errors name the source (file or override) and the dotted field.

Each package keeps the model of its own settings (`*/config.py`); this package
composes them into `RunConfig` and holds the run-level models no single package
owns (`train`, `ray_cluster`, `demo`), so it sits below the runtime that reads
them and above every package it composes (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cua_rl.adapt.config import AdaptConfig
from cua_rl.config.demo import DemoConfig
from cua_rl.config.node_resources import ResourcesConfig
from cua_rl.config.ray_cluster import RayConfig
from cua_rl.config.train import MetricsConfig, TrainConfig
from cua_rl.desktop.providers.config import ProviderConfig
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.errors import ConfigError
from cua_rl.inference.config import ModelServersConfig
from cua_rl.reward.config import JudgeConfig
from cua_rl.rollout.config import EpisodeConfig, FleetConfig
from cua_rl.store.config import StoreConfig

M = TypeVar("M", bound=BaseModel)


def preset_names() -> list[str]:
    """Presets shipped with the package (file stems of cua_rl/configs/*.yaml)."""
    root = resources.files("cua_rl") / "configs"
    if not root.is_dir():
        return []
    return sorted(p.name[: -len(".yaml")] for p in root.iterdir() if p.name.endswith(".yaml"))


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping from a file, with errors that name the file."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def read_preset(name: str) -> dict[str, Any]:
    resource = resources.files("cua_rl") / "configs" / f"{name}.yaml"
    if not resource.is_file():
        known = ", ".join(preset_names()) or "none"
        raise ConfigError(f"unknown preset {name!r} (known presets: {known})")
    with resources.as_file(resource) as path:
        return read_yaml(path)


def apply_override(data: dict[str, Any], override: str) -> None:
    """Set `a.b.c=value` in a nested dict; the value is parsed as YAML."""
    key, sep, raw = override.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {override!r}: expected the form dotted.key=value")
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {override!r}: value is not valid YAML: {exc}") from exc
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {override!r}: {part!r} is not a section")
        node = child
    node[parts[-1]] = value


def load_config(
    model: type[M],
    path: str | Path | None = None,
    *,
    preset: str | Sequence[str] | None = None,
    overrides: tuple[str, ...] | list[str] = (),
    fixed: Sequence[str] = (),
) -> M:
    """Build `model` from presets, then a file, then `fixed` settings (a command's
    own, e.g. the evaluation protocol), then overrides (later wins)."""
    data = merged_layers(preset, path)
    sources = [f"preset {p}" for p in _presets(preset)] + ([str(path)] if path else [])
    for override in (*fixed, *overrides):
        apply_override(data, override)
    if overrides:
        sources.append("overrides")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where = " + ".join(sources) or "defaults"
        raise ConfigError(f"{where}: {describe_validation_error(exc, model)}") from None


def merged_layers(preset: str | Sequence[str] | None, path: str | Path | None) -> dict[str, Any]:
    """The raw mapping of presets (in order) and then a file, before overrides."""
    data: dict[str, Any] = {}
    for name in _presets(preset):
        data = _merge(data, read_preset(name))
    if path is not None:
        data = _merge(data, read_yaml(Path(path)))
    return data


def _presets(preset: str | Sequence[str] | None) -> list[str]:
    if not preset:
        return []
    return [preset] if isinstance(preset, str) else [p for p in preset if p]


def describe_validation_error(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line per problem: `field.path: message (got value)`; an unknown key of
    `model` gets the key it was probably meant to be, a discriminated union (a
    provider, an engine) the `type` values it accepts."""
    from cua_rl.config.unknown_keys import union_tags, unknown_key_message

    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        if err["type"] == "extra_forbidden" and model is not None:
            lines.append(f"{loc}: {unknown_key_message(model, err['loc'])}")
            continue
        got = err.get("input")
        shown = f" (got {got!r})" if not isinstance(got, dict | list) else ""
        tags = union_tags(model, err["loc"]) if model is not None else []
        if tags and err["type"] in (
            "union_tag_not_found",
            "union_tag_invalid",
            "model_attributes_type",
            "dict_type",
        ):
            allowed = ", ".join(repr(t) for t in tags)
            if err["type"] == "union_tag_invalid":
                shown = f" (got {err.get('ctx', {}).get('tag')!r})"
            lines.append(f"{loc}: expected a mapping whose `type` is one of {allowed}{shown}")
            continue
        lines.append(f"{loc}: {err['msg']}{shown}")
    return "; ".join(lines)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


# --- the run ----------------------------------------------------------------


class TasksConfig(BaseModel):
    """Which tasks a run samples."""

    model_config = ConfigDict(extra="forbid")

    source: str = "local"
    """`local` (the project's suite), `osworld:PATH` (a user's OSWorld checkout) or
    `pairs:DIR` (a pair folder from `cua-rl templates new`: its templates, evaluators,
    tasks and difficulty.json)."""
    split: str | None = None
    """A shipped split name or file; None: every task of the source."""
    ids: list[str] = Field(default_factory=list)
    """Restrict to these task ids (in this order)."""
    templates_root: Path | None = None
    """Folder with templates/ + evaluators/ (and the difficulty.json that orders
    them) for the source's tasks (None: the project's own; ignored for `pairs:DIR`,
    which is its own)."""


class DesktopsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: ProviderConfig = Field(default_factory=LocalProviderConfig)
    """Where desktops come from (`type: local` by default)."""
    count: int = Field(2, ge=1)
    """Desktops started for the run (usually equal to fleet.actors)."""

    @field_validator("provider", mode="before")
    @classmethod
    def _local_by_default(cls, value: object) -> object:
        return local_by_default(value)


class RunConfig(BaseModel):
    """Everything one `cua-rl rollout|train|eval` run is made of."""

    model_config = ConfigDict(extra="forbid")

    tasks: TasksConfig = Field(default_factory=TasksConfig)
    desktops: DesktopsConfig = Field(default_factory=DesktopsConfig)
    policy: ModelServersConfig = Field(default_factory=ModelServersConfig)
    prm: ModelServersConfig = Field(default_factory=ModelServersConfig)
    episode: EpisodeConfig = Field(default_factory=EpisodeConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    fleet: FleetConfig = Field(default_factory=FleetConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    adapt: AdaptConfig = Field(default_factory=AdaptConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    """What the run directory keeps over a long run (screenshot retention, WAL size)."""
    tiny_model_dir: Path | None = None
    """Where the tiny model is built/reused (None: $CUA_RL_TINY_MODEL or ~/.cache)."""
    runtime: Literal["local", "ray"] = "local"
    """`local`: every component on this machine; `ray`: fleet workers, services and
    (optionally) model replicas as Ray actors, the learners on the driver."""
    ray: RayConfig = Field(default_factory=RayConfig)
    """Cluster placement (used only when `runtime: ray`)."""
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    """The node's GPUs and how the run hands them out (`runtime: local`)."""
    demo: DemoConfig = Field(default_factory=DemoConfig)
    """Evaluation passes before and after training (the learn-demo preset)."""
    seed: int | None = Field(None, ge=0)
    """The run's seed: every sampling request (policy steps, reward-model votes,
    critiques, rewrites), each learner's torch seed and each vLLM engine's seed derive
    from it (`cua_rl/seeds.py`), unless that key is set itself. Two runs with the same
    seed and one actor send the same requests. None: requests are unseeded and the
    learner and engine seeds keep their defaults (0)."""

    @model_validator(mode="after")
    def _learner_temperatures(self) -> RunConfig:
        """Each learner recomputes logprobs at the temperature its samples were drawn
        at: the policy's at `episode.temperature`, the reward model's at
        `judge.temperature`. Resolved here, so `config show` and the saved config say
        what the run uses; a different value set on purpose is refused."""
        for role, source, value in (
            ("policy", "episode.temperature", self.episode.temperature),
            ("prm", "judge.temperature", self.judge.temperature),
        ):
            learner = getattr(self.train, role)
            if "temperature" in learner.model_fields_set and learner.temperature != value:
                raise ValueError(
                    f"train.{role}.temperature {learner.temperature} differs from {source} "
                    f"{value}: the learner scores samples at the temperature they were drawn "
                    f"at; set {source} (train.{role}.temperature follows it)"
                )
            learner.temperature = value
        return self

    @model_validator(mode="after")
    def _derived_seeds(self) -> RunConfig:
        """Learner and engine seeds left unset follow the run's `seed`; resolved here,
        so `config show` and the saved config say what the run uses."""
        if self.seed is None:
            return self
        from cua_rl.seeds import derive_seed

        for role in ("policy", "prm"):
            learner = getattr(self.train, role)
            if "seed" not in learner.model_fields_set:
                learner.seed = derive_seed(self.seed, "learner", role)
        pools = (("policy", self.policy), ("prm", self.prm), ("rewriter", self.adapt.rewriter.pool))
        for role, servers in pools:
            if "seed" not in servers.vllm.model_fields_set:
                servers.vllm.seed = derive_seed(self.seed, "engine", role)
        return self

    @model_validator(mode="after")
    def _reward_has_a_source(self) -> RunConfig:
        """Reward-model-only supervision needs the reward model's votes."""
        if self.train.reward.outcome_weight == 0 and not self.judge.enabled:
            raise ValueError(
                "train.reward.outcome_weight=0 trains the policy on the reward "
                "model's votes alone, but judge.enabled is false (no votes): "
                "enable the judge or give the outcome a weight"
            )
        return self

    @model_validator(mode="after")
    def _desktop_preparation_is_local(self) -> RunConfig:
        """Spare desktops and group forks live in one process's desktop pool; a Ray
        fleet worker does not prepare ahead yet (the Ray parity issue adds it)."""
        if self.runtime == "ray" and (self.fleet.spare_desktops or self.fleet.fork_groups):
            on = [
                k
                for k, v in (
                    ("fleet.spare_desktops", self.fleet.spare_desktops),
                    ("fleet.fork_groups", self.fleet.fork_groups),
                )
                if v
            ]
            raise ValueError(
                f"{' and '.join(on)}: not available under runtime: ray yet "
                "(a fleet worker's pool does not prepare desktops ahead); "
                "turn it off or use runtime: local"
            )
        return self

    @model_validator(mode="after")
    def _budgets_fit(self) -> RunConfig:
        """Per-task budgets never ask for fewer rollouts than their floor (under `ray` they
        are decided on the driver and sent with each variant, docs/algorithms.md)."""
        budgets = self.train.budgets
        if not budgets.enabled:
            return self
        largest = budgets.max_rollouts or self.fleet.group_size
        if largest < budgets.min_rollouts:
            raise ValueError(
                f"train.budgets.min_rollouts {budgets.min_rollouts} is above "
                f"the largest group ({largest}: train.budgets.max_rollouts, "
                "else fleet.group_size)"
            )
        return self


def local_by_default(value: object) -> object:
    """A provider mapping without `type` is the local provider's
    (`desktops.provider.state_dir=...` alone means local)."""
    if isinstance(value, dict) and "type" not in value:
        return {"type": "local", **value}
    return value
