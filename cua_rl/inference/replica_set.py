"""The replicas of one model pool: who they are, whether they serve, which weights.

One owner for replica state, shared by routing (`pool.py`) and weight sync
(`learner/weight_sync.py`): each `Replica` carries its client, its process handle
(None for servers managed elsewhere), its state and the weight version it serves.

State machine (one supervisor task per replica that is not serving):

    HEALTHY --request fails / probe fails / process gone--> DOWN
    DOWN --/health answers, version current--> HEALTHY
    DOWN --/health answers, version behind--> CATCHING_UP --pushed--> HEALTHY
    DOWN --process gone, or no answer for `unresponsive_after_s`--> RESTARTING
    RESTARTING --new process healthy--> DOWN (then as above: catch-up first)
    RESTARTING --`restart_attempts` failed--> FAILED (reported in one line, never routed)
    HEALTHY --staggered weight sync starts on it--> UPDATING --its update ends--> HEALTHY
    UPDATING --its update or a request on it fails--> DOWN (then as above)

UPDATING (`withheld`) takes a replica out of routing while it takes new weights,
and only while another replica serves: requests go to the others instead of
queueing behind the weight swap, the ones already on it finish there. Should the
last serving replica go down meanwhile, the updating ones are routed again at
once (they serve their old weights until the swap, as without staggering), so
withholding never leaves a pool with nothing to route to.

Only HEALTHY replicas take requests or weight pushes, so a replica never serves
older weights than the pool's `target_version` once a catch-up hook is set (the
weight sync sets it). A replica without a handle is never restarted: it is probed
until it answers again. Every wait is bounded by `SupervisionConfig`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cua_rl.inference.client import InferenceClient
from cua_rl.inference.config import SupervisionConfig
from cua_rl.retry import retrying

log = logging.getLogger(__name__)


class ReplicaState(enum.StrEnum):
    HEALTHY = "healthy"
    DOWN = "down"
    RESTARTING = "restarting"
    CATCHING_UP = "catching_up"
    FAILED = "failed"
    UPDATING = "updating"
    """Healthy, but out of routing while it takes new weights (staggered sync)."""


class ReplicaHandle(Protocol):
    """The process behind a replica, for a set that may restart it."""

    def alive(self) -> bool:
        """False once the process has exited."""
        ...

    async def restart(self) -> None:
        """Stop whatever is left of the process and start it again on the same URL,
        returning once it answers /health (raise if it does not)."""
        ...

    async def stop(self) -> None: ...


CatchUp = Callable[["Replica"], Awaitable[int]]
"""Brings one replica to the pool's current weights; returns the version it now serves."""


@dataclass(eq=False)
class Replica:
    url: str
    client: InferenceClient
    handle: ReplicaHandle | None = None
    state: ReplicaState = ReplicaState.HEALTHY
    version: int | None = None
    """Weights it serves, as last reported (None: unknown)."""
    requests: dict[int, float] = field(default_factory=dict, repr=False)
    """Requests in flight on it: the pool's token -> loop time it was sent."""
    answered_at: float | None = None
    """Loop time a request on it last ended (None: none has)."""
    stalled: bool = False
    """The pool routes around it (its oldest request far older than its peers')."""
    last_pick: int = -1
    restarts: int = 0
    """Restarts done over the run (all incidents)."""
    reason: str = ""
    """Why it last left routing."""
    supervisor: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def serving(self) -> bool:
        return self.state is ReplicaState.HEALTHY

    @property
    def in_flight(self) -> int:
        return len(self.requests)

    def oldest_age(self, now: float) -> float:
        """Seconds its oldest request in flight has waited (0 with none)."""
        return now - min(self.requests.values()) if self.requests else 0.0

    def silent_for(self, now: float) -> float:
        """Seconds it has kept a request waiting without ending any: since a request
        on it last ended, or since its oldest request in flight was sent if that is
        later (0 with none in flight). A hung server's grows; a busy one's does not."""
        if not self.requests:
            return 0.0
        oldest = min(self.requests.values())
        return now - max(oldest, self.answered_at if self.answered_at is not None else oldest)


class ReplicaSet:
    """The replicas of one pool and their supervision (see module doc)."""

    def __init__(
        self,
        replicas: list[Replica],
        *,
        name: str = "model",
        config: SupervisionConfig | None = None,
        probe_interval_s: float = 1.0,
        version: int = 0,
    ) -> None:
        if not replicas:
            raise ValueError("a replica set needs at least one replica")
        self.name = name
        self.config = config or SupervisionConfig()
        self.probe_interval_s = probe_interval_s
        self.replicas = {r.url: r for r in replicas}
        self.target_version = version
        """The version every serving replica must have (set by the weight sync)."""
        self.catch_up: CatchUp | None = None
        self._changed = asyncio.Event()
        self._monitor: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    def from_urls(
        cls,
        urls: list[str],
        *,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        token: str | None = None,
        **kwargs: Any,
    ) -> ReplicaSet:
        """A set of servers managed elsewhere (probed, never restarted)."""
        return cls(
            [
                Replica(
                    u.rstrip("/"),
                    InferenceClient(u, timeout_s, connect_timeout_s=connect_timeout_s, token=token),
                )
                for u in urls
            ],
            **kwargs,
        )

    @property
    def urls(self) -> list[str]:
        return list(self.replicas)

    def serving(self) -> list[Replica]:
        return [r for r in self.replicas.values() if r.serving]

    @contextlib.asynccontextmanager
    async def withheld(self, replica: Replica) -> AsyncIterator[bool]:
        """Keep `replica` out of routing for the block (a staggered weight update) when
        another replica serves; yields whether it was taken out. With no other replica
        serving it stays routed and its requests wait for the update, as unstaggered."""
        if not replica.serving or not any(r is not replica for r in self.serving()):
            yield False
            return
        replica.state = ReplicaState.UPDATING
        self._notify()
        try:
            yield True
        finally:
            if replica.state is ReplicaState.UPDATING:  # not taken down meanwhile
                replica.state = ReplicaState.HEALTHY
                self._notify()

    def withheld_urls(self) -> list[str]:
        """The replicas out of routing for their weight update (UPDATING), in URL order."""
        return sorted(url for url, r in self.replicas.items() if r.state is ReplicaState.UPDATING)

    def mirror_withheld(self, urls: set[str]) -> list[str]:
        """Follow another process's withholding (a Ray fleet worker's copy of a pool whose
        weights the driver syncs): a serving replica named in `urls` leaves routing, an
        UPDATING one not named comes back; a replica that is down is left alone. Keeps
        the rule of `withheld`: the last serving replica is never taken out. Returns the
        URLs taken out now."""
        taken = []
        for url, replica in sorted(self.replicas.items()):
            if url in urls and replica.serving and any(r is not replica for r in self.serving()):
                replica.state = ReplicaState.UPDATING
                taken.append(url)
            elif url not in urls and replica.state is ReplicaState.UPDATING:
                replica.state = ReplicaState.HEALTHY
        self._notify()
        return taken

    def all_failed(self) -> bool:
        return all(r.state is ReplicaState.FAILED for r in self.replicas.values())

    async def changed(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) for some replica to change state. `asyncio.timeout`,
        not `wait_for`: on Python 3.11 `wait_for` swallows a cancellation that arrives as
        the event fires, so a cancelled waiter kept waiting (seen with staggered sync,
        whose withholding notifies often)."""
        event = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await event.wait()

    def _notify(self) -> None:
        self._changed.set()  # wake every waiter, then re-arm
        self._changed = asyncio.Event()

    def start_monitor(self) -> None:
        """Probe serving replicas periodically (without it, only failed requests and
        `check` take a replica out)."""
        if self._monitor is None and not self._closed:
            self._monitor = asyncio.create_task(self._watch(), name=f"{self.name} monitor")

    async def _watch(self) -> None:
        while not self._closed:
            await self.check()
            await asyncio.sleep(self.config.health_interval_s)

    async def check(self) -> None:
        """One round of probes of the serving replicas."""
        serving = self.serving()
        answers = await asyncio.gather(*(self._probe(r) for r in serving))
        for replica, problem in zip(serving, answers, strict=True):
            if problem is not None:
                self.mark_down(replica, problem)

    async def _probe(self, replica: Replica) -> str | None:
        if replica.handle is not None and not replica.handle.alive():
            return "its process exited"
        info = await replica.client.health_info(self.config.health_timeout_s)
        if info is None:
            return f"no /health answer within {self.config.health_timeout_s:g} s"
        _note_version(replica, info)
        return None

    def mark_down(self, replica: Replica, reason: object) -> None:
        """Take a replica out of routing and start its supervisor (idempotent)."""
        if replica.state not in (ReplicaState.HEALTHY, ReplicaState.UPDATING):
            return
        replica.state = ReplicaState.DOWN
        replica.reason = str(reason)
        log.warning("%s replica %s is down: %s", self.name, replica.url, reason)
        if not self.serving():  # never withhold the last replicas that can answer
            for other in self.replicas.values():
                if other.state is ReplicaState.UPDATING:
                    other.state = ReplicaState.HEALTHY
        self._notify()
        if not self._closed:
            replica.supervisor = asyncio.create_task(
                self._supervise(replica), name=f"supervise {replica.url}"
            )

    async def _supervise(self, replica: Replica) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.config
        down_since = loop.time()
        tries = [0]  # restarts tried in this incident, across restart phases
        while not self._closed:
            handle = replica.handle
            if handle is not None and (
                not handle.alive() or loop.time() - down_since >= cfg.unresponsive_after_s
            ):
                if tries[0] >= cfg.restart_attempts or not await self._restart(replica, tries):
                    self._give_up(replica, tries[0])
                    if cfg.retry_given_up_s is None:
                        return
                    await asyncio.sleep(cfg.retry_given_up_s)
                    log.warning(
                        "%s replica %s: trying again, %.0f s after it was given up",
                        self.name,
                        replica.url,
                        cfg.retry_given_up_s,
                    )
                    tries = [0]
                    if handle.alive():  # up but not answering: a restart, as for a hang
                        down_since = loop.time() - cfg.unresponsive_after_s
                    continue
                down_since = loop.time()
            info = await replica.client.health_info(cfg.health_timeout_s)
            if info is not None and await self._bring_up(replica, info):
                return
            await asyncio.sleep(self.probe_interval_s)

    async def _restart(self, replica: Replica, tries: list[int]) -> bool:
        """Restart the process, retrying with backoff within the incident's budget
        (`tries` counts every try); False once the budget is spent."""
        assert replica.handle is not None
        handle = replica.handle
        cfg = self.config
        replica.state = ReplicaState.RESTARTING
        self._notify()

        async def once() -> None:
            tries[0] += 1
            await handle.restart()

        try:
            async for attempt in retrying(
                f"restart of {self.name} replica {replica.url}",
                attempts=cfg.restart_attempts - tries[0],
                backoff_s=cfg.restart_backoff_s,
                max_backoff_s=cfg.max_restart_backoff_s,
                retry_on=lambda e: isinstance(e, Exception),
            ):
                with attempt:
                    await once()
        except Exception as exc:  # noqa: BLE001 - the budget is spent; reported by _give_up
            replica.reason = f"restart failed: {exc}"
            return False
        finally:
            replica.state = ReplicaState.DOWN
        replica.restarts += 1
        replica.version = None
        log.warning("%s replica %s restarted (%d so far)", self.name, replica.url, replica.restarts)
        return True

    async def _bring_up(self, replica: Replica, info: dict[str, Any]) -> bool:
        """Serve again, after a catch-up when its weights are behind; False to keep waiting."""
        _note_version(replica, info)
        behind = replica.version is not None and replica.version < self.target_version
        if behind and self.catch_up is not None:
            replica.state = ReplicaState.CATCHING_UP
            try:
                replica.version = await self.catch_up(replica)
            except Exception as exc:  # noqa: BLE001 - it stays out; the supervisor retries
                log.warning(
                    "%s replica %s: catch-up to version %d failed: %s",
                    self.name,
                    replica.url,
                    self.target_version,
                    exc,
                )
                replica.state = ReplicaState.DOWN
                return False
            log.warning(
                "%s replica %s caught up to version %d", self.name, replica.url, replica.version
            )
        replica.state = ReplicaState.HEALTHY
        log.warning("%s replica %s is back (version %s)", self.name, replica.url, replica.version)
        self._notify()
        return True

    def _give_up(self, replica: Replica, restarts: int) -> None:
        replica.state = ReplicaState.FAILED
        log.error(
            "%s replica %s given up after %d restart(s): %s",
            self.name,
            replica.url,
            restarts,
            replica.reason,
        )
        self._notify()

    async def close(self) -> None:
        """Stop supervision and close the clients (processes are the launcher's)."""
        self._closed = True
        tasks = [
            t
            for t in (self._monitor, *(r.supervisor for r in self.replicas.values()))
            if t is not None and not t.done()
        ]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for replica in self.replicas.values():
            await replica.client.close()


def _note_version(replica: Replica, info: dict[str, Any]) -> None:
    version = info.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        replica.version = version
