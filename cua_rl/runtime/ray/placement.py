"""Where a Ray run's actors go: every placement decision is in this module.

- Fleet workers: one placement group of `fleet_workers` CPU bundles with the
  SPREAD strategy, so workers (and the desktops each starts on its node) are
  spread over as many nodes as the cluster has; on one machine they all fit.
  `worker_resources` (e.g. `{fleet: 1}`) adds custom resources to each bundle, so
  workers go only to nodes that offer them (fleet nodes, not the driver's). A
  bundle on a node that died is placed again by Ray once a node with room joins;
  a replacement worker goes into the same bundle (ray/fleet.py).
- Model replicas (`ray.inference: ray`): one placement group per role, one
  bundle per replica of `replica_cpus` CPUs plus `replica_gpus` GPUs (none for
  hf, i.e. CPU bundles on a CPU-only cluster). Ray sets CUDA_VISIBLE_DEVICES in
  the replica's actor, and the `cua-rl serve` child inherits it.
- Services (scheduler, gate): no CPU reserved (they only wait on queues and
  conditions), with enough concurrency for every actor's blocking call, pinned
  to the driver's node: a fleet node that dies must not take them along.
- Learners: a learner with `ranks: 1` runs on the driver, in its process. With
  `ranks: N` its DeepSpeed ranks are N actors (ray/ranks.py) in one PACK group of
  `{"CPU": rank_cpus, "GPU": rank_gpus}` bundles, one per rank: as few nodes as
  fit (NCCL within a node is fastest), more when one node has too few GPUs. The
  driver's `RankGroupEngine` calls them; it needs no GPU itself.

Bundles never come empty (Ray rejects those), hence the `> 0` CPU bounds in
`RayConfig`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cua_rl.config.ray_cluster import RayConfig
from cua_rl.errors import ConfigError
from cua_rl.inference.config import ModelServersConfig
from cua_rl.learner.config import LearnerConfig

Bundle = dict[str, float]


def worker_bundles(cfg: RayConfig) -> list[Bundle]:
    return [{"CPU": cfg.num_cpus, **cfg.worker_resources} for _ in range(cfg.fleet_workers)]


def replica_bundles(cfg: RayConfig, servers: ModelServersConfig) -> list[Bundle]:
    bundle: Bundle = {"CPU": cfg.replica_cpus}
    if gpus := cfg.replica_gpu_count(servers.engine):
        bundle["GPU"] = gpus
    return [dict(bundle) for _ in range(servers.replicas)]


def rank_bundles(cfg: LearnerConfig) -> list[Bundle]:
    """One bundle per DeepSpeed rank of a learner."""
    bundle: Bundle = {"CPU": cfg.rank_cpus}
    if cfg.rank_gpus:
        bundle["GPU"] = cfg.rank_gpus
    return [dict(bundle) for _ in range(cfg.ranks)]


def service_options(total_actors: int, node_id: str | None = None) -> dict[str, Any]:
    """Options of a coordination service: every actor may hold one call open
    (`next_ticket`, `wait_fresh`) and still leave room for completions; on
    `node_id` (the driver's) when given."""
    options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": max(1000, 4 * total_actors)}
    if node_id is not None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id, soft=False)
    return options


def driver_node() -> str:
    """The id of the node this process (the driver) is attached to."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


def bundle_options(group: Any, index: int, bundle: Bundle) -> dict[str, Any]:
    """Actor options that pin it to one bundle and claim exactly its resources."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    custom = {name: amount for name, amount in bundle.items() if name not in ("CPU", "GPU")}
    return {
        "num_cpus": bundle.get("CPU", 0),
        "num_gpus": bundle.get("GPU", 0),
        **({"resources": custom} if custom else {}),
        "scheduling_strategy": PlacementGroupSchedulingStrategy(
            group, placement_group_bundle_index=index
        ),
    }


async def reserve(bundles: list[Bundle], strategy: str, *, what: str, timeout_s: float) -> Any:
    """A ready placement group, or a ConfigError saying what the cluster lacks."""
    import ray
    from ray.util import placement_group, remove_placement_group

    group = placement_group(bundles, strategy=strategy)
    try:
        await asyncio.wait_for(group.ready(), timeout_s)
    except TimeoutError:
        remove_placement_group(group)
        raise ConfigError(
            f"ray: {what}: the cluster did not offer {len(bundles)} bundle(s) of "
            f"{bundles[0]} ({strategy}) within {timeout_s:.0f} s; it has "
            f"{ray.available_resources()} available (see `ray status`, and "
            "ray.num_cpus / ray.replica_cpus / ray.replica_gpus)"
        ) from None
    return group


def reserve_blocking(bundles: list[Bundle], strategy: str, *, what: str, timeout_s: float) -> Any:
    """`reserve` for a caller on a thread (a learner engine is built on one)."""
    import ray
    from ray.exceptions import GetTimeoutError
    from ray.util import placement_group, remove_placement_group

    group = placement_group(bundles, strategy=strategy)
    try:
        ray.get(group.ready(), timeout=timeout_s)
    except GetTimeoutError:
        remove_placement_group(group)
        raise ConfigError(
            f"ray: {what}: the cluster did not offer {len(bundles)} bundle(s) of "
            f"{bundles[0]} ({strategy}) within {timeout_s:.0f} s; it has "
            f"{ray.available_resources()} available (see `ray status`, and "
            "train.<role>.rank_cpus / rank_gpus)"
        ) from None
    return group


def release(group: Any) -> None:
    from ray.util import remove_placement_group

    remove_placement_group(group)
