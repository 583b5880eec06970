"""A learner's DeepSpeed ranks as Ray actors (`runtime: ray`, `train.<role>.ranks` > 1).

The `RankTransport` of a `RankGroupEngine` on a Ray cluster: one `RankActor`
(a `RankWorker`) per rank, each in its bundle of one placement group
(`ray.placement.rank_bundles`). Forming the group: the actors are created, rank
0 names its node and a free port there (the rendezvous, torchrun's MASTER_ADDR
and MASTER_PORT), then every rank starts DeepSpeed at once. When every rank
landed on the driver's node the rendezvous is 127.0.0.1, so a one-machine
cluster never uses another interface.

Invariants: a call waits for every rank, bounded by `rank_timeout_s`; a rank
that fails or dies (Ray raises for it) fails the call at once and the group is
torn down (the others may wait in a collective). The actors belong to the
driver: Ray kills them when the driver dies, even by SIGKILL, and `close`
kills them and removes their placement group.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cua_rl.config.ray_cluster import RayConfig
from cua_rl.errors import LearnerRankError
from cua_rl.learner.config import LearnerConfig
from cua_rl.runtime.ray import placement as placement

POLL_S = 1.0
CALL_GRACE_S = 1.0
"""What `close` waits for a call in flight: its result is of no use to a stopping run."""
STOP_TIMEOUT_S = 30.0


class RayRanks:
    """`cfg.ranks` rank actors in one PACK placement group."""

    def __init__(
        self, cfg: LearnerConfig, model_dir: str, *, name: str, ray_cfg: RayConfig
    ) -> None:
        self.cfg = cfg
        self.model_dir = model_dir
        self.name = name
        self.ray_cfg = ray_cfg
        self.world_size = cfg.ranks
        self._group: Any = None
        self._actors: list[Any] = []
        self._lock = threading.Lock()
        self._failed: str | None = None

    def start(self) -> None:
        import ray

        from cua_rl.runtime.ray.actors import RankActor

        bundles = placement.rank_bundles(self.cfg)
        self._group = placement.reserve_blocking(
            bundles,
            "PACK",
            what=f"{self.name} learner ranks",
            timeout_s=self.ray_cfg.placement_timeout_s,
        )
        for rank, bundle in enumerate(bundles):
            options = placement.bundle_options(self._group, rank, bundle)
            # Ray gives each GPU actor its own CUDA_VISIBLE_DEVICES: its GPU is device 0.
            # (Threads and DeepSpeed's accelerator are set by `RankWorker.start`.)
            self._actors.append(
                RankActor.options(**options).remote(
                    self.cfg, self.model_dir, rank, self.world_size, 0
                )
            )
        timeout = self.cfg.rank_timeout_s
        ips = self.call([("node_ip", ())] * self.world_size, timeout, "start")
        host = "127.0.0.1" if set(ips) == {ray.util.get_node_ip_address()} else ips[0]
        port = self._one(self._actors[0].free_port.remote(host), timeout, "start")
        self.call([("start", (host, port))] * self.world_size, timeout, "start")

    def _one(self, ref: Any, timeout_s: float, what: str) -> Any:
        import ray

        try:
            return ray.get(ref, timeout=timeout_s)
        except Exception as exc:  # noqa: BLE001 - Ray's task, actor and timeout errors
            raise LearnerRankError(f"{self.name} rank 0 {what}: {_line(exc)}") from exc

    def call(
        self, calls: Sequence[tuple[str, tuple[Any, ...]]], timeout_s: float, what: str
    ) -> list[Any]:
        with self._lock:
            if self._failed is not None:
                raise LearnerRankError(f"{self.name} ranks stopped after: {self._failed}")
            try:
                refs = [
                    getattr(actor, method).remote(*args)
                    for actor, (method, args) in zip(self._actors, calls, strict=True)
                ]
                return _gather(
                    refs,
                    timeout_s,
                    lambda i, e: f"{self.name} rank {i} {what}: {e}",
                    f"{self.name} {what}",
                )
            except LearnerRankError as exc:
                self._failed = str(exc)
                self._kill()
                raise

    def close(self) -> None:
        """Ask every rank to leave its group, then kill the actors and free the bundles
        (at once after CALL_GRACE_S when a call is still in flight)."""
        if not self._lock.acquire(timeout=CALL_GRACE_S):
            self._failed = self._failed or "closed during a call"
            self._kill()
            return
        try:
            if self._failed is None and self._actors:
                with contextlib.suppress(LearnerRankError):
                    _gather(
                        [a.stop.remote() for a in self._actors],
                        STOP_TIMEOUT_S,
                        lambda i, e: f"rank {i} stop: {e}",
                        "stop",
                    )
            self._failed = self._failed or "closed"
            self._kill()
        finally:
            self._lock.release()

    def _kill(self) -> None:
        import ray

        for actor in self._actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        self._actors = []
        if self._group is not None:
            with contextlib.suppress(Exception):
                placement.release(self._group)
            self._group = None


def _gather(
    refs: list[Any], timeout_s: float, failed: Callable[[int, str], str], what: str
) -> list[Any]:
    """Every ref's result in order; the first failure (or the deadline) raises."""
    import ray

    index = {ref: i for i, ref in enumerate(refs)}
    results: list[Any] = [None] * len(refs)
    pending = list(refs)
    deadline = time.monotonic() + timeout_s
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            ranks = sorted(index[r] for r in pending)
            raise LearnerRankError(
                f"{what}: rank(s) {ranks} did not answer within "
                f"{timeout_s:.0f} s (learner.rank_timeout_s)"
            )
        ready, pending = ray.wait(pending, num_returns=1, timeout=min(left, POLL_S))
        for ref in ready:
            try:
                results[index[ref]] = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a rank's error or death, reported
                raise LearnerRankError(failed(index[ref], _line(exc))) from exc
    return results


def _line(exc: BaseException) -> str:
    """The last line of Ray's (multi-line, traceback-carrying) error text."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def ray_rank_group(ray_cfg: RayConfig) -> Callable[[LearnerConfig, str, str, Path], RayRanks]:
    """The transport factory `learner.engines.build_engine` takes (its log_dir is
    unused: an actor logs where Ray puts worker logs)."""

    def make(cfg: LearnerConfig, model_dir: str, name: str, _log_dir: Path) -> RayRanks:
        return RayRanks(cfg, model_dir, name=name, ray_cfg=ray_cfg)

    return make
