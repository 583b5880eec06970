"""Weight sync: from a learner to every replica of its inference pool.

Replicas are updated one at a time, so the pool never stops serving: while one
replica swaps weights the others keep answering, and each replica itself keeps
serving its old weights until the new ones are complete (the server swaps under
its generation gate). Staggered (`WeightSyncConfig.staggered`, the default), the
replica under update is also out of routing meanwhile (`ReplicaSet.withheld`), so
no new request queues behind its swap; with a single serving replica it stays
routed and requests wait for it, as they do unstaggered.

Two transports: `checkpoint` exports an HF directory once and has each replica
load it; `collective` broadcasts the tensors over a two-party gloo link per
replica, from host memory, in buckets of at most `train.sync.bucket_mb`
(weight_transfer.py; the vLLM worker extension's NCCL receiver is not used).
From a rank group (`train.sync.from_rank0`, the default) rank 0 is the sender: the
driver hosts the link's rendezvous store and forwards rank 0's manifest to the
replica, and the weights never pass through the driver's process. After a sync,
every serving replica reports the new version in `x-model-version`.

Replicas come from the pool's `ReplicaSet`, the same object routing uses: a sync
goes to the replicas serving now, skips one that fails (its supervisor takes it out),
and sets the set's `target_version`; a replica that comes back (restarted, or
answering again) is caught up to the learner's current weights before it serves
(`_catch_up`, through a checkpoint export made on the learner's own thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cua_rl import spans
from cua_rl.errors import InferenceUnavailable
from cua_rl.inference.client import InferenceClient
from cua_rl.inference.replica_set import Replica, ReplicaSet
from cua_rl.learner.config import WeightSyncConfig

log = logging.getLogger(__name__)


class WeightSource(Protocol):
    """What a learner engine offers for a sync (TrainEngine has this shape; its
    `version`, when present, names the weights `export_weights` writes)."""

    def named_parameters(self) -> Iterator[tuple[str, Any]]: ...

    def export_weights(self, path: str | Path) -> Path: ...


@runtime_checkable
class RankZeroSource(Protocol):
    """A learner whose rank 0 can send its weights to a replica itself (a rank group,
    learner/engine_group.py): the driver never holds them (`train.sync.from_rank0`)."""

    def prepare_weights(self) -> list[dict[str, Any]]: ...

    def send_weights(
        self, host: str, port: int, bucket_bytes: int, timeout_s: float
    ) -> dict[str, Any]: ...


class WeightSync:
    """Pushes a learner's weights to the serving replicas of a pool's `ReplicaSet` and
    catches up the replicas that were not serving (see module doc)."""

    def __init__(
        self,
        replicas: ReplicaSet | list[str],
        cfg: WeightSyncConfig,
        export_root: Path,
        *,
        token: str | None = None,
    ) -> None:
        """`replicas`: the pool's set (shared with routing), or URLs of servers managed
        elsewhere; `token`: their credential when given as URLs."""
        self._owns_replicas = not isinstance(replicas, ReplicaSet)
        if not isinstance(replicas, ReplicaSet):
            replicas = ReplicaSet.from_urls(replicas, timeout_s=cfg.timeout_s, token=token)
        self.replicas = replicas
        replicas.catch_up = self._catch_up
        self.cfg = cfg
        self.export_root = export_root
        self._exports: list[tuple[int, Path]] = []
        self._lock = asyncio.Lock()
        """One transfer at a time: pushes and catch-ups never interleave."""
        self._source: WeightSource | None = None
        self._executor: Executor | None = None

    @property
    def clients(self) -> list[InferenceClient]:
        return [r.client for r in self.replicas.replicas.values()]

    def attach(self, source: WeightSource, executor: Executor | None) -> None:
        """The learner whose weights a catch-up exports, and the executor that runs its
        training steps: a catch-up export runs there, so it never reads weights halfway
        through an optimizer step."""
        self._source = source
        self._executor = executor

    async def push(self, source: WeightSource, version: int) -> list[int]:
        """Send the source's weights as `version` to each serving replica in turn;
        returns the versions they report. A replica that fails with
        `InferenceUnavailable` (dead, hung) is taken out and caught up by its
        supervisor once it answers again; the sync does not fail for it."""
        async with self._lock:
            if self._source is None:
                self._source = source
            self.replicas.target_version = version
            path = await self._export(source, version) if self.cfg.mode == "checkpoint" else None
            reached = []
            for replica in self.replicas.serving():
                if not replica.serving:  # went down during an earlier replica's update
                    continue
                try:
                    async with (
                        self._out_of_routing(replica),
                        spans.span(
                            "replica_sync",
                            pool=self.replicas.name,
                            replica=replica.url,
                            version=version,
                        ),
                    ):
                        if path is not None:
                            served = await replica.client.update_weights(
                                version, str(path), self.cfg.timeout_s
                            )
                        else:
                            served = await self._broadcast(replica.client, source, version)
                        replica.version = served  # before it is routed again
                except InferenceUnavailable as exc:
                    self.replicas.mark_down(replica, f"weight sync to v{version}: {exc}")
                    continue
                reached.append(served)
            if not reached:
                log.warning(
                    "%s weight sync to version %d reached no replica; each catches up "
                    "before it serves again",
                    self.replicas.name,
                    version,
                )
            return reached

    def _out_of_routing(self, replica: Replica) -> AbstractAsyncContextManager[bool]:
        """Staggered sync: the replica leaves routing for its update while another
        serves (`ReplicaSet.withheld`); unstaggered it keeps taking requests."""
        if self.cfg.staggered:
            return self.replicas.withheld(replica)
        return contextlib.nullcontext(False)

    async def _catch_up(self, replica: Replica) -> int:
        """Bring one replica that was not serving to the learner's current weights
        (through a checkpoint directory: both engines load one)."""
        async with self._lock:
            source = self._source
            if source is None:
                raise RuntimeError("no learner attached to the weight sync")
            version, path = await self._export_current(source)
            return await replica.client.update_weights(version, str(path), self.cfg.timeout_s)

    async def _export_current(self, source: WeightSource) -> tuple[int, Path]:
        target = self.replicas.target_version
        if self._exports and self._exports[-1][0] >= target:
            return self._exports[-1]  # a checkpoint-mode push or an earlier catch-up

        def export() -> tuple[int, Path]:
            version = getattr(source, "version", None)
            version = version if isinstance(version, int) else target
            return version, source.export_weights(self.export_root / f"v{version:06d}")

        loop = asyncio.get_running_loop()
        version, path = await loop.run_in_executor(self._executor, export)
        await self._keep(version, path)
        return version, path

    async def _export(self, source: WeightSource, version: int) -> Path:
        path = self.export_root / f"v{version:06d}"
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, source.export_weights, path)
        await self._keep(version, path)
        return path

    async def _keep(self, version: int, path: Path) -> None:
        self._exports = [e for e in self._exports if e[1] != path] + [(version, path)]
        loop = asyncio.get_running_loop()
        while len(self._exports) > self.cfg.keep_exports:
            _, old = self._exports.pop(0)
            await loop.run_in_executor(None, shutil.rmtree, old, True)

    async def _broadcast(self, client: InferenceClient, source: WeightSource, version: int) -> int:
        if self.cfg.from_rank0 and isinstance(source, RankZeroSource):
            return await self._broadcast_from_rank0(client, source, version)
        from cua_rl.inference import weight_transfer as wt

        # On the learner's thread, not the loop: gathering the weights (ZeRO-3, or
        # from rank 0 of a rank group) takes as long as the model is large.
        loop = asyncio.get_running_loop()
        named = await loop.run_in_executor(self._executor, lambda: list(source.named_parameters()))
        # Port 0: the store binds a port of the kernel's choice itself, before the
        # replica is told it, so no other socket can take it in between. Only `link`
        # holds it, and it is emptied on the way out: TCPStore has no close, its
        # server thread and sockets end when the last reference goes, and a failed
        # push leaves this frame in a reference cycle (the request task's error)
        # that only a full garbage collection would free.
        link = [wt.host_store(self.cfg.host, 0, self.cfg.timeout_s)]
        port = link[0].port
        bucket_bytes = self.cfg.bucket_mb * wt.MIB  # the request carries it: one layout
        request = asyncio.create_task(
            client.update_weights_collective(
                version,
                self.cfg.host,
                port,
                wt.manifest(named),
                self.cfg.timeout_s,
                bucket_bytes=bucket_bytes,
            )
        )
        abandoned = threading.Event()

        def send() -> None:
            store = next(iter(link), None)  # None: given up before this thread ran
            if store is None:
                raise wt.LinkAbandoned("the weight link was given up before the sender ran")
            group = wt.open_link(
                self.cfg.host,
                port,
                rank=0,
                timeout_s=self.cfg.timeout_s,
                store=store,
                abandoned=abandoned,
            )
            wt.send(group, (p for _, p in named), bucket_bytes)

        # A daemon thread, not the loop's executor: a replica that died mid-transfer
        # leaves the sender blocked up to timeout_s, and asyncio.run joins executor
        # threads at exit, which made Ctrl-C wait out that timeout.
        sending = in_daemon_thread(send, name=f"weight-send v{version}")
        try:
            done, _ = await asyncio.wait({request, sending}, return_when=asyncio.FIRST_EXCEPTION)
            if request in done and request.exception() is not None:
                # The replica refused or died: nobody will join the link; the
                # `finally` below ends the sender's wait for it.
                raise request.exception()  # type: ignore[misc]  # exception() is not None here: the task failed
            try:
                await sending
            except RuntimeError as exc:  # gloo: the replica went away mid-transfer
                raise InferenceUnavailable(
                    f"weight broadcast to {client.base_url} failed: {exc}"
                ) from exc
            return await request
        finally:
            abandoned.set()  # a sender still waiting for the replica stops (no effect once linked)
            request.cancel()
            # the sender's late error (after the request's) is expected, not news
            sending.add_done_callback(lambda f: f.cancelled() or f.exception())
            link.clear()  # the store ends with the sender thread, not at a later gc
            named.clear()  # the gathered weights (a full model's worth on a large one)

    async def _broadcast_from_rank0(
        self, client: InferenceClient, source: RankZeroSource, version: int
    ) -> int:
        """A rank group's rank 0 sends its gathered weights to the replica itself: the
        driver hosts the link's store (a rendezvous only, no tensor passes through it),
        tells the replica the manifest rank 0 returned, and gives the link up
        (`ABANDONED_KEY`) when the replica's request fails, so rank 0 stops waiting."""
        from cua_rl.inference import weight_transfer as wt

        loop = asyncio.get_running_loop()
        items = await loop.run_in_executor(self._executor, source.prepare_weights)
        link = [wt.host_store(self.cfg.host, 0, self.cfg.timeout_s)]  # see `_broadcast`
        port = link[0].port
        bucket_bytes = self.cfg.bucket_mb * wt.MIB
        request = asyncio.create_task(
            client.update_weights_collective(
                version, self.cfg.host, port, items, self.cfg.timeout_s, bucket_bytes=bucket_bytes
            )
        )
        host, timeout_s = self.cfg.host, self.cfg.timeout_s
        sending = in_daemon_thread(  # rank 0 may wait out its link's timeout: not the loop's
            lambda: source.send_weights(host, port, bucket_bytes, timeout_s),
            name=f"rank0-send v{version}",
        )
        try:
            done, _ = await asyncio.wait({request, sending}, return_when=asyncio.FIRST_EXCEPTION)
            if request in done and request.exception() is not None:
                raise request.exception()  # type: ignore[misc]  # checked not None on the line above
            sent = await sending
            if not sent.get("ok"):
                raise InferenceUnavailable(
                    f"weight broadcast from rank 0 to {client.base_url} failed: {sent.get('error')}"
                )
            return await request
        finally:
            link[0].set(wt.ABANDONED_KEY, "1")  # a rank 0 still waiting stops (none once linked)
            request.cancel()
            sending.add_done_callback(lambda f: f.cancelled() or f.exception())
            link.clear()

    async def close(self) -> None:
        """Close the replica set if it was made here (a pool's set is the pool's)."""
        if self._owns_replicas:
            await self.replicas.close()


def in_daemon_thread(fn: Callable[[], Any], name: str) -> asyncio.Future[Any]:
    """Run blocking `fn` in a daemon thread; its result or error lands in the future.
    Cancelling the future abandons the thread (it ends on its own timeouts) instead of
    joining it, so process exit is never held by a stuck transfer. An error reaches
    the future without its traceback (logged at debug level)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        try:
            result, error = fn(), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            # Without its traceback: the thread's frames (and what they hold, e.g. a
            # TCPStore) die with the thread instead of living on in the future.
            log.debug("%s failed", name, exc_info=True)
            result, error = None, exc.with_traceback(None)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
