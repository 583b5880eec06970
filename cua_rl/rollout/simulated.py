"""Simulated desktops, model servers and staleness gate for `cua-rl bench fleet`.

They implement the same protocols as the real ones (`EpisodeDesktop`,
`DesktopSource`, `ChatBackend`), so the fleet, the actor with the real prompt
builders and parsers, the streaming judge and the run store run unchanged.
Only time is simulated: every piece of work is an `asyncio.sleep` drawn from
the `LatencyModel`, multiplied by the run's time scale.

Capacity is modelled the same way for every caller: a pool has R replicas,
each running at most B requests at once (a semaphore); requests beyond that
queue, and a call's latency grows mildly with its replica's occupancy.
"""

from __future__ import annotations

import asyncio
import io
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import cache
from typing import Any

from cua_rl import spans
from cua_rl.inference.base import ChatResult, Choice
from cua_rl.rollout.latency import Dist, LatencyModel
from cua_rl.staleness_gate import VersionGate
from cua_rl.types import Action, TaskVariant

SCREEN = (256, 256)
"""65,536 pixels = Qwen3-VL's min_pixels, a multiple of 32: `encode_image` passes
the bytes through unchanged, as it does for a screen already at model size."""

CLICK = (
    'Action: Click the button in the middle of the screen.\n<tool_call>{"name": '
    '"computer_use", "arguments": {"action": "left_click", "coordinate": [500, 500]}}'
    "</tool_call>"
)
TERMINATE = (
    'Action: The task is done.\n<tool_call>{"name": "computer_use", "arguments": '
    '{"action": "terminate", "status": "success"}}</tool_call>'
)
GOOD_VOTE = "The click opens the dialog the task needs, so it makes progress.\n\\boxed{1}"
BAD_VOTE = "The click does nothing useful for the task.\n\\boxed{-1}"


@cache
def screenshot_png() -> bytes:
    """A fixed 256x256 RGB PNG (a gradient, a few KB, like a plain desktop)."""
    from PIL import Image

    image = Image.new("RGB", SCREEN)
    image.putdata([(x, y, (x + y) // 2) for y in range(SCREEN[1]) for x in range(SCREEN[0])])
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


class SimClock:
    """Scaled sleeps and the one random stream of a simulated run."""

    def __init__(self, scale: float, seed: int) -> None:
        self.scale = scale
        self.rng = random.Random(seed)

    async def spend(self, dist: Dist, factor: float = 1.0) -> None:
        await asyncio.sleep(dist.draw(self.rng) * factor * self.scale)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds * self.scale)


class SimulatedDesktop:
    """One leased desktop: every call takes its drawn time and does nothing else."""

    def __init__(self, source: SimulatedDesktops) -> None:
        self.source = source
        self.model = source.model
        self.screen = SCREEN

    async def _work(self, dist: Dist) -> None:
        t0 = time.perf_counter()
        await self.source.clock.spend(dist)
        self.source.work_s += time.perf_counter() - t0

    async def prepare(self, variant: TaskVariant) -> None:
        await self._work(self.model.reset_s)

    async def screenshot(self) -> bytes:
        await self._work(self.model.screenshot_s)
        return screenshot_png()

    async def act(self, code: str) -> None:
        await self._work(self.model.act_s)

    async def evaluate(self, variant: TaskVariant, last_action: Action | None) -> float:
        await self._work(self.model.evaluate_s)
        return 1.0 if self.source.clock.rng.random() < self.model.success_rate else 0.0


class SimulatedDesktops:
    """A `DesktopSource` of `count` desktops that integrates leased desktop-seconds
    (utilization = leased seconds / (desktops x wall)) and, separately, the
    seconds desktops spent working rather than waiting for a model."""

    def __init__(self, count: int, model: LatencyModel, clock: SimClock) -> None:
        self.count = count
        self.model = model
        self.clock = clock
        self.leased = 0
        self.work_s = 0.0
        self._busy = 0.0
        self._since = time.perf_counter()

    def busy_seconds(self) -> float:
        now = time.perf_counter()
        self._busy += self.leased * (now - self._since)
        self._since = now
        return self._busy

    @asynccontextmanager
    async def lease(self, ticket: object = None) -> AsyncIterator[SimulatedDesktop]:
        if self.leased >= self.count:
            raise RuntimeError(f"all {self.count} simulated desktops are leased")
        self.busy_seconds()
        self.leased += 1
        try:
            yield SimulatedDesktop(self)
        finally:
            self.busy_seconds()
            self.leased -= 1


class _Replica:
    __slots__ = ("name", "running", "sessions", "slots", "waiting", "withheld")

    def __init__(self, batch: int, name: str = "") -> None:
        self.name = name
        self.slots = asyncio.Semaphore(batch)
        self.running = 0
        self.waiting = 0
        self.sessions = 0
        self.withheld = False
        """Out of routing for its weight update (staggered sync)."""


class SimulatedModelPool:
    """R replicas x batch B of one model; a `ChatBackend`.

    As policy (`episode_length` given) it answers with clicks until the
    episode's drawn length, then `terminate`; as reward model it answers each of
    the `n` votes with \\boxed{1} or \\boxed{-1}. Sessions stick to the replica
    they started on (prefix cache); session-less requests go to the least loaded.
    """

    def __init__(
        self,
        replicas: int,
        batch: int,
        latency: Dist,
        clock: SimClock,
        *,
        slowdown: float,
        tokens: int,
        version: Callable[[], int],
        episode_length: Callable[[random.Random], int] | None = None,
        name: str = "model",
    ) -> None:
        self.name = name
        """The pool's name in recorded spans (`policy`, `prm`)."""
        self.batch = batch
        self.latency = latency
        self.clock = clock
        self.slowdown = slowdown
        self.version = version
        self.episode_length = episode_length
        self._replicas = [_Replica(batch, f"{name}-{i}") for i in range(replicas)]
        self._sticky: dict[str, tuple[_Replica, list[int]]] = {}
        self._token_ids = tuple(range(tokens))
        self._logprobs = (-0.25,) * tokens
        self._open = asyncio.Event()
        self._open.set()
        self.calls = 0
        self.peak_running = 0
        """Most requests one replica ever ran at once (never above `batch`)."""
        self.queued_s = 0.0
        """Seconds requests waited for a free batch slot (capacity pressure)."""

    @property
    def capacity(self) -> int:
        return len(self._replicas) * self.batch

    def pause(self) -> None:
        """Stop admitting requests (weight sync); running ones finish."""
        self._open.clear()

    def resume(self) -> None:
        self._open.set()

    @property
    def replicas(self) -> int:
        return len(self._replicas)

    def withhold(self, index: int, withheld: bool = True) -> None:
        """Staggered sync: replica `index` takes no new requests while withheld (its
        running ones finish); its episodes go to the others meanwhile and come back."""
        self._replicas[index].withheld = withheld

    def end_session(self, session_key: str) -> None:
        entry = self._sticky.pop(session_key, None)
        if entry is not None:
            entry[0].sessions -= 1

    async def chat(
        self, messages: list[dict[str, Any]], *, session_key: str | None = None, **kwargs: Any
    ) -> ChatResult:
        spans.mark_once(("pool", self.name), "pool", name=self.name, replicas=self.replicas)
        if not self._open.is_set():
            with spans.span("replica_wait", pool=self.name, tid=session_key):
                await self._open.wait()
        replica, texts = self._route(session_key, int(kwargs.get("n", 1)))
        replica.waiting += 1
        t0 = time.perf_counter()
        queued = replica.slots.locked()  # no free batch slot: the wait is recorded
        waiting = spans.span("replica_wait", pool=self.name, tid=session_key).begin()
        async with replica.slots:
            if queued:
                waiting.end()
            self.queued_s += time.perf_counter() - t0
            replica.waiting -= 1
            replica.running += 1
            self.peak_running = max(self.peak_running, replica.running)
            try:
                with spans.span("replica_call", pool=self.name, replica=replica.name):
                    load = (replica.running - 1) / max(1, self.batch - 1)
                    await self.clock.spend(self.latency, 1.0 + self.slowdown * load)
            finally:
                replica.running -= 1
        self.calls += 1
        return ChatResult(
            choices=tuple(
                Choice(i, text, self._token_ids, self._logprobs, "stop")
                for i, text in enumerate(texts)
            ),
            model_version=self.version(),
        )

    def _route(self, session_key: str | None, n: int) -> tuple[_Replica, list[str]]:
        rng = self.clock.rng
        routed = [r for r in self._replicas if not r.withheld] or self._replicas
        if self.episode_length is None:
            replica = min(routed, key=lambda r: r.running + r.waiting)
            return replica, [GOOD_VOTE if rng.random() < 0.7 else BAD_VOTE for _ in range(n)]
        key = session_key or ""
        entry = self._sticky.get(key)
        if entry is None:
            replica = min(routed, key=lambda r: r.sessions)
            replica.sessions += 1
            entry = self._sticky[key] = (replica, [0, self.episode_length(rng)])
        replica, progress = entry
        if replica not in routed:  # withheld for its update: served elsewhere meanwhile
            replica = min(routed, key=lambda r: r.running + r.waiting)
        progress[0] += 1
        return replica, [TERMINATE if progress[0] >= progress[1] else CLICK] * n


class CountingGate(VersionGate):
    """The fleet's staleness gate, counting the rollout starts it actually held back."""

    def __init__(self, eta: int = 2) -> None:
        super().__init__(eta)
        self.waits = 0

    async def wait_fresh(self) -> int:
        if not self.fresh(self.serving_version):
            self.waits += 1
        return await super().wait_fresh()


class LoopLag:
    """Measures how late the event loop wakes a sleeper: if the loop is saturated,
    every simulated latency is stretched and the run says nothing about the
    cluster, so the bench reports this next to its figures."""

    def __init__(self, period_s: float = 0.02) -> None:
        self.period_s = period_s
        self.lags: list[float] = []

    async def run(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(self.period_s)
            self.lags.append(time.perf_counter() - t0 - self.period_s)

    def summary_ms(self) -> tuple[float, float]:
        """(mean, 99th percentile) lag in ms."""
        if not self.lags:
            return 0.0, 0.0
        ordered = sorted(self.lags)
        return (
            1000 * sum(ordered) / len(ordered),
            1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        )
