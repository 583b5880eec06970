"""`cua-rl train --dry-run` under `runtime: ray`: the bundles the run asks Ray for, in the
order it asks, and the node and GPUs each would get on the nodes given (`--nodes`).

Ray decides placement itself; this predicts it with Ray's documented strategies (PACK:
as few nodes as fit, SPREAD: across nodes, both soft) and its device assignment (a
node's lowest free GPU ids first), so a layout that cannot be placed is refused before
any cluster exists. The bundles come from `ray.placement` (the functions the run uses)
and a replica actor's command from `launcher.replica_launch`. Nothing here imports Ray.

Order, as `ray.train.run_training_ray` asks: learner rank groups (one PACK group per
learner that runs as rank actors), then the policy's and the reward model's replicas
(one SPREAD group each, `ray.inference: ray`), the fleet workers (SPREAD), and the
rewriter's replicas when training starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from cua_rl.config import RunConfig
from cua_rl.config.roles import run_roles
from cua_rl.errors import ConfigError
from cua_rl.inference.config import TINY, ModelServersConfig
from cua_rl.inference.launcher import default_tiny_dir, replica_launch, resolve_model
from cua_rl.inference.owner_watch import OWNER_ENV
from cua_rl.runtime.devices import learner_on_gpu, replica_gpus
from cua_rl.runtime.launch_records import desktops_summary, normalized, vllm_python
from cua_rl.runtime.node_spec import NodeSpec
from cua_rl.runtime.ray import placement

Bundle = dict[str, float]


@dataclass
class _Node:
    spec: NodeSpec
    free_gpus: list[str]
    free_cpus: float | None
    free_custom: dict[str, float] = field(default_factory=dict)
    bundles: int = 0

    def fits(self, bundle: Bundle) -> bool:
        gpus = math.ceil(bundle.get("GPU", 0))
        cpus = bundle.get("CPU", 0)
        custom = all(
            self.free_custom.get(k, 0) >= v for k, v in bundle.items() if k not in ("CPU", "GPU")
        )
        return (
            custom
            and gpus <= len(self.free_gpus)
            and (self.free_cpus is None or cpus <= self.free_cpus)
        )

    def take(self, bundle: Bundle) -> tuple[str, ...]:
        gpus = math.ceil(bundle.get("GPU", 0))
        taken, self.free_gpus = self.free_gpus[:gpus], self.free_gpus[gpus:]
        if self.free_cpus is not None:
            self.free_cpus -= bundle.get("CPU", 0)
        for key, amount in bundle.items():
            if key not in ("CPU", "GPU"):
                self.free_custom[key] -= amount
        self.bundles += 1
        return tuple(taken)

    def copy(self) -> _Node:
        return _Node(
            self.spec, list(self.free_gpus), self.free_cpus, dict(self.free_custom), self.bundles
        )


@dataclass
class Cluster:
    """The nodes as the run's placement groups fill them."""

    nodes: list[_Node]
    placed: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, specs: list[NodeSpec]) -> Cluster:
        return cls([_Node(s, list(s.gpu_ids), s.cpus, dict(s.resources)) for s in specs])

    def reserve(self, what: str, bundles: list[Bundle], strategy: str) -> list[tuple[str, ...]]:
        """Place one group, refusing in one line when the nodes cannot hold it."""
        chosen = self._pack(bundles) if strategy == "PACK" else self._spread(bundles)
        if chosen is None:
            free = ", ".join(
                f"{n.spec.name}: {len(n.free_gpus)} GPUs"
                + ("" if n.free_cpus is None else f" {n.free_cpus:g} CPUs")
                + "".join(f" {v:g} {k}" for k, v in n.free_custom.items())
                for n in self.nodes
            )
            raise ConfigError(
                f"ray: {what}: {len(bundles)} bundle(s) of {bundles[0]} "
                f"({strategy}) do not fit the nodes given (free: {free})"
            )
        return [
            node.take(bundle) + (node.spec.name,)
            for node, bundle in zip(chosen, bundles, strict=True)
        ]

    def _pack(self, bundles: list[Bundle]) -> list[_Node] | None:
        trial = Cluster([n.copy() for n in self.nodes])
        for node in trial.nodes:
            node.bundles = 0  # this group's bundles only
        out = []
        for bundle in bundles:  # fill the fullest-fitting node first: as few nodes as fit
            used = [n for n in trial.nodes if n.bundles and n.fits(bundle)]
            candidates = used or sorted(
                (n for n in trial.nodes if n.fits(bundle)), key=lambda n: -len(n.free_gpus)
            )
            if not candidates:
                return None
            candidates[0].take(bundle)
            out.append(self.nodes[trial.nodes.index(candidates[0])])
        return out

    def _spread(self, bundles: list[Bundle]) -> list[_Node] | None:
        trial = [n.copy() for n in self.nodes]
        counts = [0] * len(trial)
        out = []
        for bundle in bundles:
            fits = [i for i, n in enumerate(trial) if n.fits(bundle)]
            if not fits:
                return None
            i = min(fits, key=lambda k: (counts[k], k))  # the node with fewest of the group
            counts[i] += 1
            trial[i].take(bundle)
            out.append(self.nodes[i])
        return out


def ray_gpu_problems(cfg: RunConfig) -> list[str]:
    """What stops this config from running on GPUs under Ray, one line each: a GPU
    learner runs as Ray rank actors and needs a GPU in each bundle; GPU replicas are
    Ray's to place (`ray.inference: ray`), never the driver's, whose GPUs Ray does not
    count."""
    problems = []
    for role in run_roles(cfg).learners:
        learner = getattr(cfg.train, role)
        if not learner_on_gpu(learner):
            continue
        if learner.engine.type != "deepspeed":
            problems.append(
                f"train.{role}: a learner on CUDA under runtime ray runs as Ray "
                f"rank actors: set train.{role}.engine.type=deepspeed "
                "(engine.dist_backend=nccl; ranks may be 1)"
            )
        elif not learner.rank_gpus:
            problems.append(
                f"train.{role}: nccl ranks need a GPU in their Ray bundle: set "
                f"train.{role}.rank_gpus=1"
            )
    if cfg.ray.inference == "driver":
        pools = {"policy": cfg.policy, "prm": cfg.prm, "rewriter": cfg.adapt.rewriter.pool}
        gpu_pools = [
            n
            for n in run_roles(cfg).pools
            if pools[n].engine == "vllm" and pools[n].device == "cuda"
        ]
        if gpu_pools:
            problems.append(
                f"{', '.join(gpu_pools)}: vLLM on CUDA under runtime ray is "
                "placed by Ray: set ray.inference=ray"
            )
    return problems


def ray_dry_run(cfg: RunConfig, nodes: list[NodeSpec]) -> dict[str, Any]:
    if problems := ray_gpu_problems(cfg):
        raise ConfigError("; ".join(problems))
    cluster = Cluster.of(nodes)
    driver = nodes[0].name
    processes: list[dict[str, Any]] = [_entry("driver", driver, ())]
    roles = run_roles(cfg)
    for role in roles.learners:
        learner = getattr(cfg.train, role)
        if learner.ranks > 1 or learner_on_gpu(learner):
            bundles = placement.rank_bundles(learner)
            what = f"{role} learner ranks"
            for r, got in enumerate(cluster.reserve(what, bundles, "PACK")):
                processes.append(
                    _entry(
                        f"{role} learner rank {r}",
                        got[-1],
                        got[:-1],
                        what=what,
                        strategy="PACK",
                        bundle=bundles[r],
                    )
                )
        else:
            processes.append(_entry(f"{role} learner (in the driver)", driver, ()))
    pools = {"policy": cfg.policy, "prm": cfg.prm, "rewriter": cfg.adapt.rewriter.pool}
    late = [n for n in roles.pools if n == "rewriter"]
    for name in [n for n in roles.pools if n != "rewriter"]:
        processes += _replicas(cfg, cluster, name, pools[name], driver)
    processes += _fleet_workers(cfg, cluster)
    for name in late:
        processes += _replicas(cfg, cluster, name, pools[name], driver)
    needed = sum(len(p["devices"]) for p in processes)
    return {
        "runtime": "ray",
        "nodes": [n.as_dict() for n in nodes],
        "processes": processes,
        "gpus": {"needed": needed, "cluster": sum(n.gpus for n in nodes)},
        "desktops": desktops_summary(cfg, "the fleet workers' nodes"),
        "notes": [
            "nodes and GPU ids are a prediction from Ray's strategies (PACK, "
            "SPREAD) and its lowest-free-id assignment; Ray decides at run time",
            "Ray sets each actor's CUDA_VISIBLE_DEVICES to its bundle's GPUs",
        ],
    }


def _entry(
    role: str,
    node: str,
    devices: tuple[str, ...],
    *,
    what: str = "",
    strategy: str = "",
    bundle: Bundle | None = None,
    argv: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "role": role,
        "node": node,
        "devices": list(devices),
        "argv": list(argv),
        "env": env or {},
    }
    if bundle is not None:
        out["placement_group"] = f"{what} ({strategy})"
        out["bundle"] = bundle
    return out


def _replicas(
    cfg: RunConfig, cluster: Cluster, name: str, servers: ModelServersConfig, driver: str
) -> list[dict[str, Any]]:
    tiny = cfg.tiny_model_dir or default_tiny_dir()
    model = str(tiny) if servers.model == TINY else resolve_model(servers, tiny)
    python = vllm_python(servers.python) if servers.engine == "vllm" else None
    if servers.urls:
        return []
    on_ray = cfg.ray.inference == "ray"
    gpus = replica_gpus(servers, True) if on_ray else 0
    out = []
    if on_ray:
        bundles = placement.replica_bundles(cfg.ray, servers)
        what = f"{name} replicas"
        where = cluster.reserve(what, bundles, "SPREAD")
    else:
        bundles, what, where = [], "", [(driver,)] * servers.replicas
    for i in range(servers.replicas):
        launch = replica_launch(
            servers,
            name=name,
            index=i,
            model=model,
            port=1,
            version=0,
            token="dry-run",
            python=python,
            host=cfg.ray.replica_bind_host if on_ray else "127.0.0.1",
            device="cuda" if gpus else None,
        )
        record = normalized(launch.as_dict())
        record["env"][OWNER_ENV] = "<replica actor pid>" if on_ray else record["env"][OWNER_ENV]
        got = where[i]
        out.append(
            _entry(
                record["role"],
                got[-1],
                got[:-1],
                what=what,
                strategy="SPREAD",
                bundle=bundles[i] if bundles else None,
                argv=tuple(record["argv"]),
                env=record["env"],
            )
        )
    return out


def _fleet_workers(cfg: RunConfig, cluster: Cluster) -> list[dict[str, Any]]:
    bundles = placement.worker_bundles(cfg.ray)
    where = cluster.reserve("fleet workers", bundles, "SPREAD")
    actors = cfg.ray.worker_actors(cfg.fleet.actors)
    desktops = cfg.ray.worker_desktops(cfg.desktops.count)
    return [
        _entry(
            f"fleet worker {i} ({actors} episode actors, {desktops} "
            f"{cfg.desktops.provider.type} desktops)",
            got[-1],
            got[:-1],
            what="fleet workers",
            strategy="SPREAD",
            bundle=bundles[i],
        )
        for i, got in enumerate(where)
    ]
