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
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from cua_rl import spans
from cua_rl.inference.base import ChatResult, InferenceUnavailable
from cua_rl.inference.config import InferencePoolConfig
from cua_rl.inference.replica_set import Replica, ReplicaSet, ReplicaState
from cua_rl.retry import retrying

log = logging.getLogger(__name__)



class _NoReplica(InferenceUnavailable):
    """No healthy replica before the deadline: another attempt cannot help."""


class InferencePool:
    """Route chat requests over the serving replicas of a `ReplicaSet` (see module doc)."""

    def __init__(
        self, replicas: list[str] | ReplicaSet, config: InferencePoolConfig | None = None,
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
                replicas, timeout_s=cfg.request_timeout_s,
                connect_timeout_s=cfg.connect_timeout_s, probe_interval_s=cfg.probe_interval_s)
        self.wait_for_replica_s = cfg.wait_for_replica_s
        self.probe_timeout_s = cfg.probe_timeout_s
        self.max_attempts = cfg.max_attempts
        self._sticky: dict[str, str] = {}
        self._picks = itertools.count()

    @property
    def healthy_urls(self) -> list[str]:
        return [r.url for r in self.replicas.serving()]

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
            "chat request", attempts=self.max_attempts, backoff_s=0.0, max_backoff_s=0.0,
            retry_on=lambda e: isinstance(e, InferenceUnavailable)
            and not isinstance(e, _NoReplica),
        ):
            with attempt:
                replica = await self._pick(session_key, deadline)
                replica.in_flight += 1
                try:
                    with spans.span("replica_call", pool=self.replicas.name,
                                    replica=replica.url):
                        return await replica.client.chat(messages, **kwargs)
                except InferenceUnavailable as exc:
                    self.replicas.mark_down(replica, exc)
                    raise
                finally:
                    replica.in_flight -= 1
        raise AssertionError("unreachable: retrying re-raises the last error")

    async def _pick(self, session_key: str | None, deadline: float) -> Replica:
        loop = asyncio.get_running_loop()
        replicas = self.replicas
        spans.mark_once(("pool", replicas.name), "pool", name=replicas.name,
                        replicas=len(replicas.replicas))
        while True:
            sticky = None
            if session_key is not None:
                sticky = replicas.replicas.get(self._sticky.get(session_key, ""))
                if sticky is not None and sticky.serving:
                    return sticky
            healthy = replicas.serving()
            if healthy:
                chosen = min(healthy, key=lambda r: (r.in_flight, r.last_pick))
                chosen.last_pick = next(self._picks)
                # An episode whose replica is only withheld for a weight update goes
                # back to it afterwards, so a staggered sync does not pile every
                # running episode onto the replica updated last.
                away = sticky is not None and sticky.state is ReplicaState.UPDATING
                if session_key is not None and not away:
                    self._sticky[session_key] = chosen.url
                return chosen
            if replicas.all_failed():
                raise _NoReplica(f"every {replicas.name} replica was given up on: "
                                 f"{[r.reason for r in replicas.replicas.values()]}")
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise _NoReplica(
                    f"no healthy replica among {replicas.urls} within {self.wait_for_replica_s:g}"
                    " s (InferencePoolConfig.wait_for_replica_s)"
                )
            with spans.span("replica_wait", pool=replicas.name, tid=session_key):
                await replicas.changed(remaining)

    async def wait_until_healthy(self, timeout_s: float, min_replicas: int = 1) -> list[str]:
        """Poll every replica's `/health` until `min_replicas` answer (no fixed sleep)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            replicas = list(self.replicas.replicas.values())
            ok = await asyncio.gather(*(r.client.health(self.probe_timeout_s) for r in replicas))
            for replica, up in zip(replicas, ok, strict=True):
                if not up:
                    self.replicas.mark_down(replica, "not ready")
            ready = [r.url for r, up in zip(replicas, ok, strict=True) if up]
            if len(ready) >= min_replicas:
                return ready
            if loop.time() >= deadline:
                raise InferenceUnavailable(f"only {ready} of {self.replicas.urls} became healthy")
            await asyncio.sleep(self.replicas.probe_interval_s)

    async def close(self) -> None:
        await self.replicas.close()
