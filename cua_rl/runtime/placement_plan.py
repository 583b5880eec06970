"""Where a run's processes go and what each learner rank needs: `config show --plan`.

Built from the resolved config alone (no model weights, no hub, no cluster), so a
user can size a cluster before starting it: per role the processes or Ray
bundles (model replicas, learner ranks, fleet workers, desktops) and the GPUs
they take, and for each learner an estimate of one rank's memory
(learner/memory_estimate.py says how). When a learner on GPUs does not fit the
GPU memory given, the plan names the settings that make it fit.

Learner ranks are read as `train.<role>.ranks` when the config has that key (a
learner as a group of DeepSpeed ranks), else 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from cua_rl.config import RunConfig
from cua_rl.config.roles import run_roles
from cua_rl.inference.config import TINY, ModelServersConfig
from cua_rl.learner.config import DeepSpeedEngineConfig, LearnerConfig
from cua_rl.learner.memory_estimate import (
    GIB,
    RankMemory,
    estimate_rank_memory,
    ranks_to_fit,
    zero_stage,
)
from cua_rl.learner.model_shapes import ModelShape, model_shape
from cua_rl.runtime.desktop_needs import DesktopNeeds, desktop_needs
from cua_rl.runtime.devices import learner_on_gpu, replica_gpus
from cua_rl.runtime.sync_estimate import SyncPath, sync_paths


@dataclass(frozen=True)
class Placement:
    """One role's share of the machines."""

    role: str
    units: int
    """Processes, Ray actors or asyncio actors of this role."""
    what: str
    """What one unit is and what it holds."""
    gpus_each: float
    where: str


@dataclass(frozen=True)
class LearnerMemory:
    role: str
    model: str
    ranks: int
    shape: ModelShape | None
    memory: RankMemory | None
    on_gpu: bool
    advice: str = ""
    """Empty when it fits (or runs on CPU); else the settings that make it fit."""


@dataclass(frozen=True)
class Plan:
    placements: list[Placement]
    learners: list[LearnerMemory]
    gpu_gib: float
    notes: list[str] = field(default_factory=list)
    desktops: DesktopNeeds | None = None
    sync: list[SyncPath] = field(default_factory=list)

    @property
    def gpus(self) -> float:
        return sum(p.units * p.gpus_each for p in self.placements)

    def as_dict(self) -> dict[str, Any]:
        """The plan as `config show --plan --json` prints it."""
        return {
            "gpu_gib": self.gpu_gib,
            "gpus": self.gpus,
            "placements": [{**asdict(p), "gpus": p.units * p.gpus_each} for p in self.placements],
            "learners": [_memory_dict(lm) for lm in self.learners],
            "desktops": self.desktops.as_dict() if self.desktops else None,
            "sync": [s.as_dict() for s in self.sync],
            "notes": self.notes,
        }


def learner_ranks(learner: LearnerConfig) -> int:
    return learner.ranks


def build_plan(cfg: RunConfig, gpu_gib: float = 80.0) -> Plan:
    """The plan of `cfg` for GPUs of `gpu_gib` GiB: the roles the run starts
    (`config.roles.run_roles`: no reward-model learner when it is frozen, no reward-model
    replicas either when the judge is off)."""
    roles = run_roles(cfg)
    pools = [("policy replicas", cfg.policy)]
    if roles.prm_replicas:
        pools.append(("prm replicas", cfg.prm))
    if roles.rewriter_replicas:
        pools.append(("rewriter replicas", cfg.adapt.rewriter.pool))
    placements = [_replicas(cfg, name, servers) for name, servers in pools]
    learners = []
    for role in roles.learners:
        learner, servers = getattr(cfg.train, role), getattr(cfg, role)
        placements.append(_learner_placement(cfg, role, learner))
        learners.append(_learner_memory(cfg, role, learner, servers, gpu_gib))
    placements.append(_fleet(cfg))
    shapes = {lm.role: lm.shape for lm in learners}
    notes = []
    if not roles.prm_learner and roles.prm_replicas:
        notes.append(
            "the reward model is frozen (train.prm.enabled=false): it judges from "
            f"{cfg.prm.model} and never trains"
        )
    if cfg.runtime == "ray" and any(
        learner_ranks(getattr(cfg.train, r)) == 1
        for r in roles.learners
        if not learner_on_gpu(getattr(cfg.train, r))
    ):
        notes.append(
            "a CPU learner of one rank runs in the driver (a GPU learner, or one "
            "of several ranks, is Ray rank actors)"
        )
    return Plan(placements, learners, gpu_gib, notes, desktop_needs(cfg), sync_paths(cfg, shapes))


def _replicas(cfg: RunConfig, name: str, servers: ModelServersConfig) -> Placement:
    if servers.urls:
        return Placement(
            name, 0, f"none started: {len(servers.urls)} server(s) at urls", 0, "elsewhere"
        )
    if cfg.runtime == "ray" and cfg.ray.inference == "ray":
        gpus = cfg.ray.replica_gpu_count(servers.engine)  # the bundle Ray is asked for
        return Placement(
            name,
            servers.replicas,
            f"Ray actor + `cua-rl serve` ({servers.engine}) in a bundle "
            f"{{CPU: {cfg.ray.replica_cpus:g}, GPU: {gpus:g}}}",
            gpus,
            "Ray cluster (one placement group per role)",
        )
    gpus = replica_gpus(servers, node_has_gpus=True)  # a GPU node: `auto` is cuda there
    return Placement(
        name,
        servers.replicas,
        f"`cua-rl serve` process ({servers.engine}, {_model_name(servers)})",
        gpus,
        "driver's machine",
    )


def _learner_placement(cfg: RunConfig, role: str, learner: LearnerConfig) -> Placement:
    ranks = learner_ranks(learner)
    engine = learner.engine
    gpus = 1 if learner_on_gpu(learner) else 0
    if isinstance(engine, DeepSpeedEngineConfig):
        what = (
            f"DeepSpeed rank (ZeRO-{engine.zero_stage}, "
            f"{'bf16' if engine.bf16 else 'fp32'}, {engine.dist_backend})"
        )
    else:
        what = f"torch engine on {engine.device}"
        ranks = 1
    if cfg.runtime == "ray" and (ranks > 1 or gpus):
        bundle = f"{{CPU: {learner.rank_cpus:g}, GPU: {learner.rank_gpus:g}}}"
        if gpus and not learner.rank_gpus:
            what += f"; nccl needs a GPU per rank: set train.{role}.rank_gpus=1"
        return Placement(
            f"{role} learner",
            ranks,
            f"{what}, a Ray actor in a bundle {bundle}",
            learner.rank_gpus or gpus,
            "Ray cluster (one placement group per learner)",
        )
    return Placement(f"{role} learner", ranks, what, gpus, "driver's machine")


def _fleet(cfg: RunConfig) -> Placement:
    provider = cfg.desktops.provider.type
    if cfg.runtime == "ray":
        r = cfg.ray
        return Placement(
            "fleet workers",
            r.fleet_workers,
            f"Ray actor in a bundle {{CPU: {r.num_cpus:g}}} (SPREAD), "
            f"{r.worker_actors(cfg.fleet.actors)} episode actors and "
            f"{r.worker_desktops(cfg.desktops.count)} {provider} desktops each",
            0,
            "Ray cluster",
        )
    return Placement(
        "fleet",
        1,
        f"{cfg.fleet.actors} episode actors (asyncio) and {cfg.desktops.count} {provider} desktops",
        0,
        "driver process",
    )


def _model_name(servers: ModelServersConfig) -> str:
    return servers.model


def _base_model(cfg: RunConfig, servers: ModelServersConfig) -> str:
    if servers.model != TINY:
        return servers.model
    from cua_rl.inference.launcher import default_tiny_dir

    return str(cfg.tiny_model_dir or default_tiny_dir())


def _learner_memory(
    cfg: RunConfig, role: str, learner: LearnerConfig, servers: ModelServersConfig, gpu_gib: float
) -> LearnerMemory:
    model = _base_model(cfg, servers)
    ranks = learner_ranks(learner) if isinstance(learner.engine, DeepSpeedEngineConfig) else 1
    on_gpu = _learner_placement(cfg, role, learner).gpus_each > 0
    shape = model_shape(model)
    if shape is None:
        return LearnerMemory(
            role,
            model,
            ranks,
            None,
            None,
            on_gpu,
            "unknown model: give a local checkpoint directory to estimate",
        )
    memory = estimate_rank_memory(shape, learner, ranks)
    advice = ""
    if on_gpu and memory.total > gpu_gib * GIB:
        advice = _advice(role, shape, learner, int(gpu_gib * GIB))
    return LearnerMemory(role, model, ranks, shape, memory, on_gpu, advice)


def _advice(role: str, shape: ModelShape, learner: LearnerConfig, budget: int) -> str:
    """The smallest change that fits: more ranks (ZeRO-3), then smaller micro-batches."""
    key = f"train.{role}"
    key_stage = ""
    if not isinstance(learner.engine, DeepSpeedEngineConfig):
        key_stage = f" {key}.engine.type=deepspeed {key}.engine.zero_stage=3"
        engine = DeepSpeedEngineConfig(zero_stage=3, bf16=True, dist_backend="nccl")
        learner = learner.model_copy(update={"engine": engine})
    elif zero_stage(learner) != 3:
        learner = learner.model_copy(
            update={"engine": learner.engine.model_copy(update={"zero_stage": 3})}
        )
        key_stage = f" {key}.engine.zero_stage=3"
    options, micro = [], learner.micro_batch_tokens
    while micro >= 512 and len(options) < 2:  # halving micro-batches until 2 options
        trial = learner.model_copy(update={"micro_batch_tokens": micro})
        ranks = ranks_to_fit(shape, trial, budget)
        if ranks is not None and (not options or ranks < options[-1][0]):
            total = estimate_rank_memory(shape, trial, ranks).total / GIB
            micro_key = (
                "" if micro == learner.micro_batch_tokens else f" {key}.micro_batch_tokens={micro}"
            )
            options.append(
                (ranks, f"{key}.ranks={ranks}{key_stage}{micro_key} ({total:.1f} GiB per rank)")
            )
        micro //= 2
    if not options:
        return (
            f"over {budget / GIB:g} GiB at any rank count: set {key}.loss.kl_beta=0 "
            "(no reference) or shorten samples"
        )
    return f"over {budget / GIB:g} GiB: set " + ", or ".join(o for _, o in options)


def render_plan(plan: Plan, runtime: str) -> str:
    """The plan as text: a table of placements, then each learner rank's memory."""
    rows = [("role", "units", "GPUs", "where", "each unit")]
    rows += [
        (p.role, str(p.units), f"{p.units * p.gpus_each:g}", p.where, p.what)
        for p in plan.placements
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"Placement plan (runtime: {runtime}; GPUs of {plan.gpu_gib:g} GiB)"]
    lines += [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
        for r in rows
    ]
    lines.append(f"  GPUs in total: {plan.gpus:g}")
    lines += [f"  note: {n}" for n in plan.notes]
    lines.append("")
    lines.append("Learner memory per rank (GiB; learner/memory_estimate.py has the formulas)")
    for lm in plan.learners:
        lines += _learner_lines(lm, plan.gpu_gib)
    if plan.desktops is not None:
        d = plan.desktops
        cpus = (
            "no CPU cap (a share of the host)"
            if d.vcpus is None
            else f"{d.vcpus:g} vCPUs ({d.total_vcpus:g} in all)"
        )
        disk = "" if d.disk_gib is None else f", {d.disk_gib:g} GiB disk"
        lines += [
            "",
            f"Desktops: {d.count} {d.provider}; each {cpus}, {d.memory_gib:g} GiB "
            f"({d.total_memory_gib:g} GiB in all){disk}",
            f"  reset: {d.reset}",
        ]
    if plan.sync:
        lines += ["", "Weight sync per update"]
        for sp in plan.sync:
            cost = (
                ""
                if sp.seconds_per_sync is None
                else (
                    f": {sp.gigabytes:g} GB {sp.dtype} per replica, ~{sp.seconds_per_replica:g} s "
                    f"each, ~{sp.seconds_per_sync:g} s for {sp.replicas}"
                )
            )
            lines += [
                f"  {sp.role} ({sp.mode}){cost}",
                f"    {sp.transport}",
                f"    basis: {sp.basis}",
            ]
    return "\n".join(lines) + "\n"


def _memory_dict(lm: LearnerMemory) -> dict[str, Any]:
    memory = (
        None
        if lm.memory is None
        else {
            k: round(v / GIB, 2)
            for k, v in (
                ("model_states", lm.memory.model_states),
                ("reference", lm.memory.reference),
                ("activations", lm.memory.activations),
                ("logits", lm.memory.logits),
                ("total", lm.memory.total),
            )
        }
    )
    return {
        "role": lm.role,
        "model": lm.model,
        "ranks": lm.ranks,
        "on_gpu": lm.on_gpu,
        "params": lm.shape.params if lm.shape else None,
        "memory_gib": memory,
        "advice": lm.advice,
    }


def _learner_lines(lm: LearnerMemory, gpu_gib: float) -> list[str]:
    head = f"  {lm.role}: {lm.model}, {lm.ranks} rank{'' if lm.ranks == 1 else 's'}"
    if lm.shape is None or lm.memory is None:
        return [f"{head}: {lm.advice}"]
    s, m = lm.shape, lm.memory
    verdict = lm.advice or (f"fits {gpu_gib:g} GiB" if lm.on_gpu else "on CPU (host memory)")
    return [
        f"{head}; {s.params / 1e9:.3g} B parameters ({s.source})",
        f"    model states  {m.model_states / GIB:8.2f}  DeepSpeed {m.estimator}",
        f"    reference     {m.reference / GIB:8.2f}  frozen float32 copy"
        + ("" if m.reference else " (none: loss.kl_beta is 0)"),
        f"    activations   {m.activations / GIB:8.2f}  one micro-batch, {s.layers} layers, "
        "no recomputation",
        f"    logits        {m.logits / GIB:8.2f}  micro-batch tokens x vocab {s.vocab}, fp32 x3",
        f"    total         {m.total / GIB:8.2f}  {verdict}",
    ]
