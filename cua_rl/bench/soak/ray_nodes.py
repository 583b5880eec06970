"""`bench soak --runtime ray`: the soak of `soak.runner.run_soak` with the run's fleet
on a multi-node Ray cluster on this machine, and whole fleet nodes killed.

The bench starts a `LocalCluster` (runtime/ray/local_cluster.py: the head, where the run's
driver, learners, model servers and services live, and `nodes - 1` fleet nodes with
one fleet worker and one desktop each), points the run at it (`ray.address`,
`ray.worker_resources={fleet: 1}`), and injects `node_kill` at the chaos rate:

- `node_kill`: SIGKILL one fleet node (its raylet, object store and Ray workers,
  `remove_node(allow_graceful=False)`), and `NODE_BACK_S` later start a new fleet
  node. The run must lose the worker, re-queue its rollouts, go on with the others
  and place a replacement on the new node (runtime/ray/fleet.py). Recovered: a
  good trajectory that started after the kill is stored and the store holds a
  `worker_replaced` event after it. One node is down at a time: a kill waits
  until the previous one recovered.

At the end the cluster is shut down (`cluster.shutdown()`); every process the
bench started that was seen during the soak (the nodes' raylets and GCS, Ray
workers and the desktops they started, a node that failed to start) must be gone
30 s later: they are added to `processes_left` otherwise. The figures are those
of the soak (docs/soak.md), plus `cluster` (nodes started and killed) and the
ledger's node figures (`lost.workers_lost`, `trajectories_lost_with_node`, ...).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial
from typing import Any

from cua_rl.bench.faults.watched_run import RunProcess
from cua_rl.bench.soak.injections import RECOVER_DEADLINE_S, Injection
from cua_rl.runtime.ray.local_cluster import LocalCluster, NodeStartFailed, cluster_overrides
from cua_rl.store.run_store import RunStore

NODE_KILL = "node_kill"
NODE_BACK_S = 20.0
"""Seconds between a node kill and the start of a new fleet node."""
NODE_RETRY_S = 10.0
NODE_START_TRIES = 5
"""A node start that fails (its raylet did not register in Ray's 30 s, on a machine
under heavy load) is tried again this many times over the soak, then the soak fails."""


def replacements_since(run_dir: Any, epoch: float) -> int:
    """`worker_replaced` events the run stored after `epoch` (0 while unreadable)."""
    try:
        store = RunStore.read_only(run_dir)
    except Exception:  # noqa: BLE001 - no store yet
        return 0
    try:
        return sum(1 for e in store.events("worker_replaced") if e["created_at"] > epoch)
    except Exception:  # noqa: BLE001 - busy: read again at the next tick
        return 0
    finally:
        store.close()


class NodeChaos:
    """Node kills at a seeded Poisson rate (module doc); the face `run_soak` uses of
    `soak.chaos.Chaos`: `run`, `tick`, `finish`, `results`, `injections`, `skipped`."""

    def __init__(
        self,
        run: RunProcess,
        rate_per_min: float,
        seed: int,
        kinds: list[str] | None = None,
        *,
        cluster: LocalCluster,
        log: Callable[[str], None] = print,
        restart: Any = None,
        node_back_s: float = NODE_BACK_S,
        recover_deadline_s: float = RECOVER_DEADLINE_S,
    ) -> None:
        unknown = set(kinds or ()) - {NODE_KILL}
        if unknown:
            raise ValueError(f"--runtime ray injects only {NODE_KILL}; not {sorted(unknown)}")
        self.run, self.rate, self.cluster, self.log = run, rate_per_min, cluster, log
        self.rng = random.Random(seed)
        self.node_back_s, self.recover_deadline_s = node_back_s, recover_deadline_s
        self.injections: list[Injection] = []
        self.skipped: list[dict[str, Any]] = []
        self.next_t: float | None = None
        self._add_due: list[float] = []

    def tick(self, t: float, progress: float | None, *, inject: bool) -> None:
        """Start due nodes, decide recoveries, inject a due kill (see `Chaos.tick`)."""
        self.cluster.watch()
        while self._add_due and t >= self._add_due[0]:
            self._add_due.pop(0)
            try:
                node = self.cluster.add_fleet_node()
            except NodeStartFailed as exc:
                if self.cluster.start_failures >= NODE_START_TRIES:
                    raise
                self._add_due.append(t + NODE_RETRY_S)
                self.log(f"chaos: t={t:.0f}s {exc}; trying again in {NODE_RETRY_S:.0f} s")
                break
            self.log(f"chaos: t={t:.0f}s fleet node {node[:8]} started")
        for fault in self.injections:
            if fault.recovered is None:
                self._decide(fault, t, progress, final=False)
        if self.rate <= 0 or not inject:
            return
        if self.next_t is None:
            self.next_t = t + 60.0 * self.rng.expovariate(self.rate)
        if t < self.next_t:
            return
        self.next_t += 60.0 * self.rng.expovariate(self.rate)
        if any(f.recovered is None for f in self.injections) or not self.cluster.fleet_node_ids():
            self.skipped.append(
                {
                    "t": round(t, 1),
                    "drawn": NODE_KILL,
                    "why": "the last node kill has not recovered yet",
                }
            )
            return
        index = self.rng.randrange(len(self.cluster.fleet_node_ids()))
        node = self.cluster.kill_fleet_node(index)
        fault = Injection(round(t, 1), NODE_KILL, 0, f"fleet node {node[:8]} killed", t)
        fault.extra.update(node=node, killed_epoch=time.time())
        self.injections.append(fault)
        self._add_due.append(t + self.node_back_s)
        self.log(
            f"chaos: t={t:.0f}s {NODE_KILL}: {fault.detail}; a new node in {self.node_back_s:.0f} s"
        )

    def _decide(self, fault: Injection, t: float, progress: float | None, *, final: bool) -> None:
        replaced = replacements_since(self.run.run_dir, fault.extra["killed_epoch"])
        if progress is not None and progress > fault.after and replaced > 0:
            fault.recovered, fault.recover_s = True, round(t - fault.t, 1)
            self.log(f"chaos: {NODE_KILL} ({fault.detail}) recovered in {fault.recover_s} s")
        elif final or t - fault.t > self.recover_deadline_s:
            fault.recovered = False
            self.log(f"chaos: {NODE_KILL} ({fault.detail}) NOT recovered")

    def finish(self, t: float, progress: float | None) -> None:
        for fault in self.injections:
            if fault.recovered is None:
                self._decide(fault, t, progress, final=True)

    def results(self) -> list[dict[str, Any]]:
        return [asdict(f) for f in self.injections]


def run_ray_soak(
    spec: Any,
    nodes: int,
    run_soak: Callable[..., dict[str, Any]],
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The soak of `spec` (a `soak.runner.SoakSpec`, run by its `run_soak`, given so this
    module does not import the command's) on a cluster of `nodes` nodes (the head +
    `nodes - 1` fleet nodes); its figures, also in OUT/soak.json (module doc)."""
    if nodes < 2:
        raise ValueError(f"--nodes: a head and at least one fleet node, got {nodes}")
    spec.out.mkdir(parents=True, exist_ok=True)
    state_dir = spec.out / "run.desktops"  # where FaultBench puts the run's desktops
    started = time.monotonic()
    with LocalCluster(fleet_nodes=nodes - 1) as cluster:
        log(
            f"soak: Ray cluster of {nodes} nodes at {cluster.address} "
            f"({time.monotonic() - started:.0f} s to start)"
        )
        ray_spec = replace(
            spec,
            extra=(*cluster_overrides(cluster, str(state_dir)), *spec.extra),
            make_chaos=partial(NodeChaos, cluster=cluster),
        )
        result = run_soak(ray_spec, log)
    left = cluster.leftovers()
    result["processes_left"] += [{"pid": pid, "cmd": cmd} for pid, cmd in sorted(left.items())]
    result["runtime"] = "ray"
    result["cluster"] = {
        "nodes": nodes,
        "fleet_nodes_started": cluster.nodes_started,
        "fleet_nodes_killed": cluster.nodes_killed,
        "fleet_node_start_failures": cluster.start_failures,
        "processes_seen": len(cluster.seen),
    }
    (spec.out / "soak.json").write_text(json.dumps(result, indent=2, default=str))
    return result
