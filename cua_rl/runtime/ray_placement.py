"""Where a Ray run's actors go: every placement decision is in this module.

- Fleet workers: one placement group of `fleet_workers` CPU bundles with the
  SPREAD strategy, so workers (and the desktops each starts on its node) are
  spread over as many nodes as the cluster has; on one machine they all fit.
- Model replicas (`ray.inference: ray`): one placement group per role, one
  bundle per replica of `replica_cpus` CPUs plus `replica_gpus` GPUs (none for
  hf, i.e. CPU bundles on a CPU-only cluster). Ray sets CUDA_VISIBLE_DEVICES in
  the replica's actor, and the `cua-rl serve` child inherits it.
- Services (scheduler, gate): no CPU reserved (they only wait on queues and
  conditions), with enough concurrency for every actor's blocking call.
- Learners: on the driver, which holds the engines. For multi-GPU learners the
  driver runs on a GPU node (`ray job submit` with `--entrypoint-num-gpus`), or
  DeepSpeed's ranks are placed as actors in a STRICT_PACK group of
  `{"GPU": 1, "CPU": c}` bundles, one per rank, behind the learner engine's
  strategy class (not wired here: the engines are built by `learner.engines`).

Bundles never come empty (Ray rejects those), hence the `> 0` CPU bounds in
`RayConfig`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cua_rl.errors import ConfigError
from cua_rl.inference.config import ModelServersConfig
from cua_rl.runtime.ray_config import RayConfig

Bundle = dict[str, float]


def worker_bundles(cfg: RayConfig) -> list[Bundle]:
    return [{"CPU": cfg.num_cpus} for _ in range(cfg.fleet_workers)]


def replica_bundles(cfg: RayConfig, servers: ModelServersConfig) -> list[Bundle]:
    bundle: Bundle = {"CPU": cfg.replica_cpus}
    if gpus := cfg.replica_gpu_count(servers.engine):
        bundle["GPU"] = gpus
    return [dict(bundle) for _ in range(servers.replicas)]


def service_options(total_actors: int) -> dict[str, Any]:
    """Options of a coordination service: every actor may hold one call open
    (`next_ticket`, `wait_fresh`) and still leave room for completions."""
    return {"num_cpus": 0, "max_concurrency": max(1000, 4 * total_actors)}


def bundle_options(group: Any, index: int, bundle: Bundle) -> dict[str, Any]:
    """Actor options that pin it to one bundle and claim exactly its resources."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return {"num_cpus": bundle.get("CPU", 0), "num_gpus": bundle.get("GPU", 0),
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=index)}


async def reserve(bundles: list[Bundle], strategy: str, *, what: str,
                  timeout_s: float) -> Any:
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
            "ray.num_cpus / ray.replica_cpus / ray.replica_gpus)") from None
    return group


def release(group: Any) -> None:
    from ray.util import remove_placement_group

    remove_placement_group(group)
