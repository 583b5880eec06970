"""The Ray actor classes of a Ray run: thin wrappers over plain classes.

Each actor is its plain class as-is (tested without Ray); all methods are
async, so Ray runs each actor as an async actor with one event loop. Only the
replica wrapper adds something: the IP of the node it landed on, which only
Ray knows (its URL's host unless it binds one specific address). Options
(resources, placement, concurrency) come from `ray_placement`.
"""

from __future__ import annotations

from typing import Any

import ray

from cua_rl.runtime.ray_replicas import ModelReplica, advertised_host
from cua_rl.runtime.ray_services import GateService, SchedulerService
from cua_rl.runtime.ray_workers import FleetWorker


class _NodeReplica(ModelReplica):
    def __init__(self, *args: Any, bind_host: str, **kwargs: Any) -> None:
        host = advertised_host(bind_host, ray.util.get_node_ip_address())
        super().__init__(*args, bind_host=bind_host, advertise_host=host, **kwargs)


SchedulerActor = ray.remote(SchedulerService)
GateActor = ray.remote(GateService)
FleetWorkerActor = ray.remote(FleetWorker)
ReplicaActor = ray.remote(_NodeReplica)
