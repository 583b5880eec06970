"""A multi-node Ray cluster on this one machine, for the soak and the tests that
kill fleet nodes (`bench soak --runtime ray`, tests/integration/runtime/test_ray_nodes.py).

Ray's own test cluster (`ray.cluster_utils.Cluster`): a head node (the driver
attaches to it: learners, model pools and the run's services stay there) and fleet
nodes, each a raylet with its own object store and `{"fleet": 1}`, so fleet workers
placed with `ray.worker_resources={fleet: 1}` land only on fleet nodes. Every node
listens on 127.0.0.1 only: `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` makes Ray resolve
"this machine" to loopback instead of the first interface's address (the run, and
the worker processes the raylets start, inherit it). Node death is detected in ~3 s
(health checks every second, three misses) instead of Ray's ~15 s.

Ray's test cluster writes its address to the machine's "current cluster" file,
which a plain `ray.init()` of any other process here would then join (a local
`runtime: ray` run, another test); the file is put back as it was right after
the head starts and after `shutdown`: runs join this cluster only by its address.

A node kill is `remove_node(node, allow_graceful=False)`: SIGKILL of its raylet,
object store and their workers, as a machine that dies. `shutdown` stops every node.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

LOOPBACK = "127.0.0.1"
FLEET_RESOURCE = "fleet"
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
"""Ray resolves this machine's address to loopback (module doc)."""
HEALTH_CHECKS = {
    "health_check_initial_delay_ms": 1000,
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
}
"""A dead node is known within ~3 s (the GCS's health checks of each raylet)."""


class NodeStartFailed(RuntimeError):
    """A fleet node's raylet did not join the cluster in time."""


@dataclass
class LocalCluster:
    """Head + fleet nodes on loopback (module doc). Use as a context manager."""

    fleet_nodes: int = 2
    cpus_per_node: int = 1
    object_store_mb: int = 80
    nodes_started: int = 0
    nodes_killed: int = 0
    start_failures: int = 0
    seen: dict[int, tuple[str, float]] = field(default_factory=dict)
    """Every process of the cluster seen (`watch`): pid -> (command line, start time)."""
    _cluster: Any = None
    _fleet: list[Any] = field(default_factory=list)

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def address(self) -> str:
        """The GCS address a run joins (`ray.address`)."""
        return str(self._cluster.address)

    def start(self) -> None:
        """The head and every fleet node, each joined before this returns."""
        self.start_head()
        for _ in range(self.fleet_nodes):
            self.add_fleet_node()

    def start_head(self) -> None:
        """The head node alone: a run can join it and start its model servers while
        the fleet nodes start (`add_fleet_node`); its workers wait for them."""
        os.environ.update(LOOPBACK_ENV)
        from ray._private import ray_constants
        from ray.cluster_utils import Cluster

        ray_constants.ENABLE_RAY_CLUSTER = False  # read at call time, set at import
        with _current_cluster_kept():
            self._cluster = Cluster(
                initialize_head=True,
                shutdown_at_exit=True,
                head_node_args={
                    **self._node_args(),
                    "include_dashboard": False,
                    "_system_config": HEALTH_CHECKS,
                },
            )

    def _node_args(self) -> dict[str, Any]:
        return {
            "num_cpus": self.cpus_per_node,
            "node_ip_address": LOOPBACK,
            "object_store_memory": self.object_store_mb * 1024 * 1024,
        }

    def add_fleet_node(self) -> str:
        """Start one more fleet node; its node id once it has joined. A raylet that
        does not register within Ray's 30 s (a machine under heavy load) raises
        `NodeStartFailed`, after its processes were killed (none is left behind)."""
        known = self._node_pids()
        try:
            node = self._cluster.add_node(
                **self._node_args(), resources={FLEET_RESOURCE: 1}, wait=True
            )
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception here
            self.start_failures += 1
            stray = self._kill_strays(known)
            raise NodeStartFailed(
                f"a fleet node did not start: {exc} ({stray} of its processes killed)"
            ) from exc
        self._fleet.append(node)
        self.nodes_started += 1
        self.watch()
        return str(node.node_id)

    def fleet_node_ids(self) -> list[str]:
        return [str(node.node_id) for node in self._fleet]

    def kill_fleet_node(self, index: int = 0) -> str:
        """SIGKILL the `index`-th live fleet node's processes (raylet, store, workers):
        its node id. Its workers' children (desktops) stop through their owner watch."""
        self.watch()
        node = self._fleet.pop(index)
        self._cluster.remove_node(node, allow_graceful=False)
        self.nodes_killed += 1
        return str(node.node_id)

    def watch(self) -> None:
        """Remember every live process of the nodes, with their descendants (Ray
        workers and what they started), for `leftovers` after `shutdown`. Only the
        nodes' trees: other children of this process are not the cluster's (a test
        session's desktops, the run that joined it; a CI run counted a session
        fixture's Xvfb as left by the cluster). A node that failed to start is
        killed by `_kill_strays`."""
        if self._cluster is None:
            return
        for pid in self._node_pids():
            self._remember(pid, descendants=False)

    def _node_pids(self) -> set[int]:
        """Processes of the nodes that joined, with their descendants."""
        pids: set[int] = set()
        for node in self._cluster.list_all_nodes():
            for infos in node.all_processes.values():
                for info in infos:
                    try:
                        proc = psutil.Process(info.process.pid)
                        pids.update(p.pid for p in [proc, *proc.children(recursive=True)])
                    except psutil.Error:
                        continue
        return pids

    def _kill_strays(self, known: set[int]) -> int:
        """SIGKILL the Ray processes this process started since `known` was taken
        that belong to no joined node: a node whose start failed."""
        self.watch()
        stray = 0
        for proc in psutil.Process(os.getpid()).children(recursive=True):
            try:
                cmd = " ".join(proc.cmdline())
                if (
                    proc.pid not in known
                    and proc.pid not in self._node_pids()
                    and ("site-packages/ray/" in cmd or cmd.startswith("ray::"))
                ):
                    proc.kill()
                    stray += 1
            except psutil.Error:
                continue
        return stray

    def _remember(self, pid: int, *, descendants: bool) -> None:
        try:
            proc = psutil.Process(pid)
            family = [proc, *(proc.children(recursive=True) if descendants else [])]
        except psutil.Error:
            return
        for p in family:
            try:
                self.seen.setdefault(p.pid, (" ".join(p.cmdline()), p.create_time()))
            except psutil.Error:
                continue

    def shutdown(self) -> None:
        if self._cluster is not None:
            self.watch()
            with _current_cluster_kept():
                self._cluster.shutdown()
            self._cluster = None

    def leftovers(self, grace_s: float = 30.0) -> dict[int, str]:
        """Processes of the cluster seen alive while it ran that still run (the same
        process: pid and start time), polled for up to `grace_s` while they stop."""
        end = time.monotonic() + grace_s
        while True:
            left = {
                pid: cmd for pid, (cmd, started) in self.seen.items() if _same_process(pid, started)
            }
            if not left or time.monotonic() >= end:
                return left
            time.sleep(0.5)


@contextlib.contextmanager
def _current_cluster_kept() -> Iterator[None]:
    """Ray's "current cluster" address file as it was before (module doc)."""
    from ray._common.utils import get_ray_address_file

    path = Path(get_ray_address_file(None))
    before = path.read_text() if path.exists() else None
    try:
        yield
    finally:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(before)


def _same_process(pid: int, started: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - started) < 0.05 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def cluster_overrides(cluster: LocalCluster, state_dir: str) -> list[str]:
    """A run's overrides that put its fleet on the cluster's fleet nodes, one worker
    per node with one desktop each (the desktops' state dir given explicitly: worker
    processes inherit the cluster's environment, not the run's)."""
    return [
        "runtime=ray",
        f"ray.address={cluster.address}",
        f"ray.fleet_workers={cluster.fleet_nodes}",
        f"ray.worker_resources={{{FLEET_RESOURCE}: 1}}",
        f"ray.num_cpus={cluster.cpus_per_node}",
        "ray.replica_bind_host=127.0.0.1",
        f"desktops.count={cluster.fleet_nodes}",
        f"desktops.provider.state_dir={state_dir}",
    ]
