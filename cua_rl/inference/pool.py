"""A pool of model-server replicas with sticky, least-loaded routing and failover.

Routing (docs/architecture.md, concurrency): a request with a `session_key` (one episode)
goes to the replica that served that key before while it is healthy, so the
server's prefix cache is reused; a request without a key (PRM votes) goes to
the healthy replica with the fewest requests in flight (ties: the one picked
least recently). An episode whose replica is withheld for a staggered weight
update (replica_set.py, UPDATING) is served elsewhere meanwhile and goes back after.

Failure rules (docs/architecture.md, failure rules): a replica that fails a request
(connection error, timeout, 5xx) is marked down in the pool's `ReplicaSet`
(replica_set.py), which probes, restarts and catches it up before it serves
again; the request is retried on another replica. When no replica is healthy,
requests wait for one to come back until their deadline
(`wait_for_replica_s`), then raise `InferenceUnavailable`; they fail at once
when every replica has been given up on. Request errors (4xx) and
unusable answers (`ModelResponseError`) are never retried: the same request
fails the same way. Every call ends in exactly one result or one exception.
Deadlines and attempts are `InferencePoolConfig`.

Bounds (issue 48): a replica holds at most `max_in_flight_per_replica` requests; when
every routable replica is full, requests wait in the pool for the first slot to free
(no new sockets: each client also keeps at most that many connections, plus a few for
probes). A replica whose oldest request in flight is far older than every other
serving replica's (`stall_factor`) and that has answered nothing for `stall_after_s`
is routed around: a hung server that still accepts connections, and may still answer
/health, gets no new requests (episodes stuck to it move for good) until its old ones
end, by their deadline or by supervision's restart. The replica with the youngest
oldest request is never routed around, so stalling never empties the pool.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from typing import Any

from cua_rl import spans
from cua_rl.errors import InferenceRequestError, ModelResponseError
from cua_rl.inference.base import ChatResult, InferenceUnavailable
from cua_rl.inference.client import CONTROL_CONNECTIONS
from cua_rl.inference.config import InferencePoolConfig
from cua_rl.inference.replica_set import Replica, ReplicaSet, ReplicaState
from cua_rl.retry import retrying

log = logging.getLogger(__name__)


class _NoReplica(InferenceUnavailable):
    """No healthy replica before the deadline: another attempt cannot help."""


class InferencePool:
    """Route chat requests over the serving replicas of a `ReplicaSet` (see module doc)."""

    def __init__(
        self,
        replicas: list[str] | ReplicaSet,
        config: InferencePoolConfig | None = None,
        **overrides: Any,
    ) -> None:
        """`replicas`: a supervised set, or URLs of servers managed elsewhere (probed
        until they answer again, never restarted). `overrides` are fields of
        `InferencePoolConfig` (`timeout_s` is accepted for `request_timeout_s`)."""
        if not replicas:
            raise ValueError("InferencePool needs at least one replica URL")
        if "timeout_s" in overrides:
            overrides["request_timeout_s"] = overrides.pop("timeout_s")
        base = (config or InferencePoolConfig()).model_dump()
        self.config = cfg = InferencePoolConfig.model_validate({**base, **overrides})
        if isinstance(replicas, ReplicaSet):
            self.replicas = replicas
        else:
            self.replicas = ReplicaSet.from_urls(
                replicas,
                timeout_s=cfg.request_timeout_s,
                connect_timeout_s=cfg.connect_timeout_s,
                probe_interval_s=cfg.probe_interval_s,
            )
        self.wait_for_replica_s = cfg.wait_for_replica_s
        self.probe_timeout_s = cfg.probe_timeout_s
        self.max_attempts = cfg.max_attempts
        self._sticky: dict[str, str] = {}
        self._picks = itertools.count()
        self._tokens = itertools.count()
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        limit = cfg.max_in_flight_per_replica + CONTROL_CONNECTIONS
        for replica in self.replicas.replicas.values():
            replica.client.limit_connections(limit)

    def in_flight(self) -> dict[str, int]:
        return {r.url: r.in_flight for r in self.replicas.replicas.values()}

    def end_session(self, session_key: str) -> None:
        """Forget a finished episode's replica so the map does not grow forever."""
        self._sticky.pop(session_key, None)

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        session_key: str | None = None,
        wait_for_replica_s: float | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Serve one chat request somewhere; kwargs are those of `InferenceClient.chat`."""
        loop = asyncio.get_running_loop()
        wait = self.wait_for_replica_s if wait_for_replica_s is None else wait_for_replica_s
        deadline = loop.time() + wait
        # No backoff between attempts: each goes to another replica, and waiting for
        # one to come back is _pick's job (up to the deadline).
        async for attempt in retrying(
            "chat request",
            attempts=self.max_attempts,
            backoff_s=0.0,
            max_backoff_s=0.0,
            retry_on=lambda e: (
                isinstance(e, InferenceUnavailable) and not isinstance(e, _NoReplica)
            ),
        ):
            with attempt:
                replica = await self._pick(session_key, deadline)
                token = next(self._tokens)
                replica.requests[token] = loop.time()
                try:
                    with spans.span("replica_call", pool=self.replicas.name, replica=replica.url):
                        result = await replica.client.chat(messages, **kwargs)
                except InferenceUnavailable as exc:
                    self.replicas.mark_down(replica, exc)
                    raise
                except (InferenceRequestError, ModelResponseError):
                    replica.answered_at = loop.time()  # it answered, if badly
                    raise
                else:
                    replica.answered_at = loop.time()
                    return result
                finally:
                    del replica.requests[token]
                    self._wake_one()
        raise AssertionError("unreachable: retrying re-raises the last error")

    async def _pick(self, session_key: str | None, deadline: float) -> Replica:
        loop = asyncio.get_running_loop()
        replicas = self.replicas
        bound = self.config.max_in_flight_per_replica
        spans.mark_once(
            ("pool", replicas.name), "pool", name=replicas.name, replicas=len(replicas.replicas)
        )
        while True:
            now = loop.time()
            healthy = replicas.serving()
            room = [r for r in self._routable(healthy, now) if r.in_flight < bound]
            sticky = None
            if session_key is not None:
                sticky = replicas.replicas.get(self._sticky.get(session_key, ""))
                if sticky is not None and sticky in room:
                    return sticky
            if room:
                chosen = min(room, key=lambda r: (r.in_flight, r.last_pick))
                chosen.last_pick = next(self._picks)
                # An episode whose replica is only withheld for a weight update, or full
                # for now, goes back to it afterwards, so a staggered sync does not pile
                # every running episode onto the replica updated last. One whose replica
                # is down or stalled moves for good.
                away = sticky is not None and (
                    sticky.state is ReplicaState.UPDATING or (sticky.serving and not sticky.stalled)
                )
                if session_key is not None and not away:
                    self._sticky[session_key] = chosen.url
                return chosen
            if replicas.all_failed():
                raise _NoReplica(
                    f"every {replicas.name} replica was given up on: "
                    f"{[r.reason for r in replicas.replicas.values()]}"
                )
            remaining = deadline - now
            if remaining <= 0:
                if healthy:
                    raise _NoReplica(
                        f"every serving {replicas.name} replica held {bound} requests "
                        f"(InferencePoolConfig.max_in_flight_per_replica) for "
                        f"{self.wait_for_replica_s:g} s (wait_for_replica_s)"
                    )
                raise _NoReplica(
                    f"no healthy replica among {replicas.urls} within {self.wait_for_replica_s:g}"
                    " s (InferencePoolConfig.wait_for_replica_s)"
                )
            if healthy:  # every one it may use is full: the first freed slot, or a recheck
                with spans.span("replica_slot_wait", pool=replicas.name, tid=session_key):
                    await self._freed_slot(min(remaining, replicas.probe_interval_s))
            else:
                with spans.span("replica_wait", pool=replicas.name, tid=session_key):
                    await replicas.changed(remaining)

    def _routable(self, healthy: list[Replica], now: float) -> list[Replica]:
        """The serving replicas that are not stalled (module doc); logs each change."""
        factor, after = self.config.stall_factor, self.config.stall_after_s
        ages = {r.url: r.oldest_age(now) for r in healthy}
        out = []
        for replica in healthy:
            peers = max((a for url, a in ages.items() if url != replica.url), default=None)
            stalled = (
                factor is not None
                and peers is not None
                and replica.silent_for(now) >= after
                and ages[replica.url] > factor * peers
            )
            if stalled != replica.stalled:
                replica.stalled = stalled
                if stalled:
                    log.warning(
                        "%s replica %s: routed around; its oldest of %d requests has "
                        "waited %.0f s with no answer, its peers' oldest %.0f s",
                        self.replicas.name,
                        replica.url,
                        replica.in_flight,
                        ages[replica.url],
                        peers,
                    )
                else:
                    log.warning("%s replica %s: routed to again", self.replicas.name, replica.url)
            if not stalled:
                out.append(replica)
        return out

    async def _freed_slot(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until a request ends somewhere; one waiter is
        woken per ended request, so a thousand waiting judge requests do not all wake
        for one slot."""
        waiter = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
        except TimeoutError:
            pass
        finally:
            if waiter in self._slot_waiters:
                self._slot_waiters.remove(waiter)

    def _wake_one(self) -> None:
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        await self.replicas.close()
