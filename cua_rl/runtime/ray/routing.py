"""Staggered weight sync across processes: the fleet workers' pools route around the
replicas the driver has out of routing for their update.

Under `runtime: ray` each fleet worker builds its own pools from the replicas' URLs,
so the driver's withholding (`ReplicaSet.withheld`, `train.sync.staggered`) would not
reach the requests the workers send. The driver publishes each pool's withheld URLs to
the gate service whenever they change (`publishing_withheld`); each worker follows the
table with a bounded long poll and mirrors it onto its pools (`following_withheld`,
`ReplicaSet.mirror_withheld`), recording a `routing_withheld` event in the run store
for every replica it takes out. A worker learns of a change a round trip late: a
request sent meanwhile waits on the updating replica, as without staggering.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from cua_rl.inference.replica_set import ReplicaSet
from cua_rl.store.async_run_store import AsyncRunStore

log = logging.getLogger(__name__)

ROUTING_WITHHELD = "routing_withheld"
"""Event kind: a fleet worker took a replica out of its routing (subject: the pool)."""
POLL_S = 30.0
WATCH_S = 5.0


@contextlib.asynccontextmanager
async def publishing_withheld(gate: Any, pools: dict[str, ReplicaSet]) -> AsyncIterator[None]:
    """While the block runs, tell the gate service each pool's withheld URLs whenever
    they change (the driver side)."""

    async def publish(name: str, replicas: ReplicaSet) -> None:
        last: list[str] | None = None
        while True:
            urls = replicas.withheld_urls()
            if urls != last:
                await gate.set_withheld.remote(name, urls)
                last = urls
            await replicas.changed(WATCH_S)

    tasks = [
        asyncio.create_task(publish(name, pool), name=f"withheld:{name}")
        for name, pool in pools.items()
    ]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def following_withheld(
    gate: Any, pools: dict[str, ReplicaSet], store: AsyncRunStore, worker_id: str
) -> AsyncIterator[None]:
    """While the block runs, mirror the driver's withheld replicas onto `pools` (a fleet
    worker's side)."""

    async def follow() -> None:
        since = 0
        while True:
            since, table = await gate.routing.remote(since, POLL_S)
            for name, replicas in pools.items():
                taken = replicas.mirror_withheld(set(table.get(name, [])))
                if taken:
                    await store.add_event(
                        ROUTING_WITHHELD, name, {"worker": worker_id, "urls": taken}
                    )

    task = asyncio.create_task(follow(), name=f"follow-withheld:{worker_id}")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
