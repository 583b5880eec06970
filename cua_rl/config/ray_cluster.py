"""Settings of `runtime: ray`: where the fleet workers, the model replicas and the
coordinating services run on a Ray cluster.

Kept free of Ray imports so that loading a config never needs Ray installed.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class RayConfig(BaseModel):
    """A run spread over a Ray cluster (used only when `runtime: ray`)."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None
    """Cluster to join (`auto`, `ray://host:10001`, `host:6379`); None starts a
    Ray instance on this machine for the run and shuts it down at the end."""
    init_num_cpus: int | None = Field(None, ge=1)
    """CPUs a Ray instance started for the run advertises (None: all of this
    machine's); ignored when joining a cluster."""
    include_dashboard: bool = False
    """Start Ray's dashboard with an instance started for the run."""
    fleet_workers: int = Field(2, ge=1)
    """Fleet worker processes (Ray actors), spread over the nodes; each runs its
    own desktops, episodes and streaming judge."""
    actors_per_worker: int | None = Field(None, ge=1)
    """Concurrent episodes per worker; None: `fleet.actors` divided over the
    workers (rounded up), so a preset keeps its totals under either runtime."""
    desktops_per_worker: int | None = Field(None, ge=1)
    """Desktops each worker starts on its node; None: `desktops.count` divided
    over the workers (rounded up)."""
    num_cpus: float = Field(1.0, gt=0)
    """CPUs reserved per fleet worker (a placement-group bundle each)."""
    worker_resources: dict[str, float] = Field(default_factory=dict)
    """Custom resources each fleet worker's bundle also claims, e.g. `{fleet: 1}` so
    workers land only on nodes started with that resource (`ray start --resources
    '{"fleet": 1}'`), away from the driver's node; empty: CPUs only."""
    worker_replacements: int = Field(8, ge=0)
    """Replacement workers a run starts over its life for fleet workers it lost (their
    node died); each waits until a node with room for its bundle is there. 0: the run
    goes on with the workers left."""
    replace_timeout_s: float = Field(600.0, gt=0)
    """With no fleet worker running, how long the run waits for a replacement to be
    placed before it fails (a lost cluster must not hang a run)."""
    inference: Literal["driver", "ray"] = "driver"
    """`driver`: model replicas start on the driver's machine as in a local run;
    `ray`: each replica is a Ray actor placed in a placement group (on GPU nodes
    when `replica_gpus` > 0) that reports its URL. Roles with `urls` set use
    those servers either way."""
    replica_cpus: float = Field(1.0, gt=0)
    """CPUs in the bundle of one model replica (`inference: ray`)."""
    replica_gpus: float | None = Field(None, ge=0)
    """GPUs in the bundle of one model replica; None: 1 for vllm, 0 for hf (a
    CPU-only bundle, e.g. on a CPU-only cluster)."""
    replica_bind_host: str = "0.0.0.0"
    """Interface a Ray-placed replica listens on; its URL uses the node's IP when it is
    all interfaces (0.0.0.0, ::), else this address (127.0.0.1 on a one-machine cluster)."""
    group_backlog: int = Field(8, ge=1)
    """Finished groups waiting for the driver before workers that finish more
    wait (backpressure from the learners to the fleet)."""
    placement_timeout_s: float = Field(600.0, gt=0)
    """Deadline for the cluster to offer the bundles a run asks for."""
    stop_timeout_s: float = Field(120.0, gt=0)
    """Grace for a worker or replica to stop its desktops/servers before it is killed."""

    @field_validator("worker_resources")
    @classmethod
    def _custom_only(cls, value: dict[str, float]) -> dict[str, float]:
        for name, amount in value.items():
            if name in ("CPU", "GPU", "memory", "object_store_memory"):
                raise ValueError(
                    f"ray.worker_resources.{name}: a built-in resource; use "
                    "ray.num_cpus for CPUs (custom resources only here)"
                )
            if amount <= 0:
                raise ValueError(f"ray.worker_resources.{name}: expected > 0, got {amount}")
        return value

    def worker_actors(self, total_actors: int) -> int:
        return self.actors_per_worker or math.ceil(total_actors / self.fleet_workers)

    def worker_desktops(self, total_desktops: int) -> int:
        return self.desktops_per_worker or math.ceil(total_desktops / self.fleet_workers)

    def replica_gpu_count(self, engine: str) -> float:
        if self.replica_gpus is not None:
            return self.replica_gpus
        return 1.0 if engine == "vllm" else 0.0
