"""The Ray actor classes of a Ray run: thin wrappers over plain classes.

Each actor is its plain class as-is (tested without Ray); the services' and
workers' methods are async, so Ray runs them as async actors with one event
loop; a learner rank's are blocking (one DeepSpeed call at a time). Only the
replica and rank wrappers add something: the IP of the node they landed on,
which only Ray knows (a replica's URL host unless it binds one specific address;
a rank group's rendezvous). Options (resources, placement, concurrency) come
from `ray.placement`.
"""

from __future__ import annotations

from typing import Any

import ray

from cua_rl.learner.rank_worker import RankWorker
from cua_rl.runtime.ray.replicas import ModelReplica, advertised_host
from cua_rl.runtime.ray.services import GateService, SchedulerService
from cua_rl.runtime.ray.workers import FleetWorker


class _NodeReplica(ModelReplica):
    def __init__(self, *args: Any, bind_host: str, **kwargs: Any) -> None:
        host = advertised_host(bind_host, ray.util.get_node_ip_address())
        super().__init__(*args, bind_host=bind_host, advertise_host=host, **kwargs)


class _NodeRank(RankWorker):
    """A learner rank that can say where it runs (the group's rendezvous is rank 0's)."""

    def node_ip(self) -> str:
        return str(ray.util.get_node_ip_address())

    def free_port(self, host: str) -> int:
        from cua_rl.net_ports import pick_port

        return pick_port(host)


SchedulerActor = ray.remote(SchedulerService)
GateActor = ray.remote(GateService)
FleetWorkerActor = ray.remote(FleetWorker)
ReplicaActor = ray.remote(_NodeReplica)
RankActor = ray.remote(_NodeRank)
