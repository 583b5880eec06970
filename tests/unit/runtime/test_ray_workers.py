"""Fleet workers and the driver's WorkerFleet, without Ray: two workers share one
scheduler and gate service through in-process handles, on fake desktops and a
fake policy (the Ray wrappers add nothing to these classes)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cua_rl.config import RunConfig
from cua_rl.errors import FleetLost
from cua_rl.inference.base import ChatResult, Choice
from cua_rl.rollout.fleet import Fleet
from cua_rl.runtime.ray import fleet as ray_fleet
from cua_rl.runtime.ray import workers as ray_workers
from cua_rl.runtime.ray.fleet import WorkerFleet, WorkerSupervision
from cua_rl.runtime.ray.services import GateService, SchedulerService
from cua_rl.runtime.ray.workers import FleetWorker, WorkerParts, WorkerReport, WorkerSpec
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.run_store import RunStore
from cua_rl.types import Action, GroupRecord, TaskVariant

TERMINATE = (
    '<tool_call>{"name": "computer_use", "arguments": '
    '{"action": "terminate", "status": "success"}}</tool_call>'
)


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (256, 256), (30, 60, 90)).save(buffer, format="PNG")
    return buffer.getvalue()


class FakeDesktop:
    screen = (256, 256)

    async def prepare(self, variant: TaskVariant) -> None:
        await asyncio.sleep(0.001)

    async def screenshot(self) -> bytes:
        return _png()

    async def act(self, code: str) -> None:
        return None

    async def evaluate(self, variant: TaskVariant, last_action: Action | None) -> float:
        return 1.0


class FakeDesktops:
    @asynccontextmanager
    async def lease(self, ticket: object = None) -> AsyncIterator[FakeDesktop]:
        yield FakeDesktop()


class FakePolicy:
    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        await asyncio.sleep(0.001)
        return ChatResult(
            choices=(Choice(0, TERMINATE, (1, 2), (-0.1, -0.2), "stop"),), model_version=0
        )

    def end_session(self, session_key: str) -> None:
        return None


class FakedWorker(FleetWorker):
    """A worker whose parts are fakes; `run` is what the driver calls remotely."""

    async def run(self) -> WorkerReport:
        store = AsyncRunStore.open(self.spec.run_dir)
        try:
            return await self.run_fleet(FakeDesktops(), FakePolicy(), store)
        finally:
            await store.close()


def _variant(i: int) -> TaskVariant:
    return TaskVariant(
        task_id=f"t{i}",
        domain="os",
        evaluator_name="default",
        instruction="do it",
        config=(),
        evaluator={"func": "infeasible"},
    )


@pytest.fixture
def cfg() -> RunConfig:
    return RunConfig.model_validate(
        {
            "runtime": "ray",
            "judge": {"enabled": False},
            "fleet": {"actors": 4, "group_size": 3, "max_groups": 5},
            "episode": {"max_steps": 2},
            "train": {"horizon": {"steps": [1, 2], "every": 1}},
        }
    )


async def test_two_workers_share_the_groups_and_every_group_reaches_the_driver(
    cfg: RunConfig, tmp_path: Path, handle
) -> None:
    RunStore(tmp_path).close()
    scheduler = handle(SchedulerService(3, max_groups=5, backlog=1))
    gate = handle(GateService(eta=2))
    workers = [
        FakedWorker(
            WorkerSpec(
                f"w{i}",
                cfg,
                tmp_path,
                ["http://x"],
                [],
                actors=cfg.ray.worker_actors(cfg.fleet.actors),
                desktops=1,
            ),
            scheduler,
            gate,
        )
        for i in range(2)
    ]
    asked = iter([_variant(i) for i in range(10)])
    received: list[GroupRecord] = []

    async def source() -> TaskVariant | None:
        return next(asked)

    async def on_group(finished: GroupRecord) -> None:
        await asyncio.sleep(0.01)  # a slow driver: the small backlog pushes back
        received.append(finished)

    fleet = WorkerFleet(scheduler, [handle(w) for w in workers], source, on_group)
    counts = await asyncio.wait_for(fleet.run(), 30)

    assert len(received) == 5 == counts["groups"]
    assert len({f.group_id for f in received}) == 5
    assert all(len(f.trajectories) == 3 for f in received)
    assert counts["episodes"] == 15 and fleet.busy_s > 0
    per_worker = fleet.episodes_per_worker()
    assert sum(per_worker.values()) == 15 and all(per_worker[w] > 0 for w in ("w0", "w1"))
    counters = RunStore(tmp_path).counters()
    assert counters["episodes/w0"] + counters["episodes/w1"] == 15
    assert next(asked).task_id == "t5"  # exactly one variant per group was drawn


async def test_worker_fleet_applies_the_horizon_from_the_remote_learner_version(
    cfg: RunConfig, tmp_path: Path, handle
) -> None:
    gate_service = GateService(eta=2)
    worker = FleetWorker(
        WorkerSpec("w0", cfg, tmp_path, ["http://x"], [], actors=1, desktops=1),
        handle(SchedulerService(3, max_groups=1, backlog=1)),
        handle(gate_service),
    )
    fleet = Fleet(
        worker.scheduler,
        FakeDesktops(),
        FakePolicy(),
        None,  # type: ignore[arg-type]
        cfg.episode,
        cfg.fleet,
        gate=worker.gate,  # type: ignore[arg-type]
        horizon=cfg.train.horizon,
    )
    assert fleet._episode().max_steps == 1  # horizon at version 0
    assert cfg.episode.max_steps == 2  # the shared config is never mutated
    await gate_service.set_versions(learner=1, serving=1)
    assert await worker.gate.wait_fresh() == 1
    assert fleet._episode().max_steps == 2


async def test_stop_cancels_a_running_worker_and_its_parts_are_stopped(
    cfg: RunConfig, tmp_path: Path, handle, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = asyncio.Event()

    @asynccontextmanager
    async def fake_parts(spec: WorkerSpec, episode: Any) -> AsyncIterator[WorkerParts]:
        store = AsyncRunStore.open(spec.run_dir)
        try:
            yield WorkerParts(store, FakePolicy(), None, FakeDesktops())  # type: ignore[arg-type]
        finally:
            await store.close()
            closed.set()

    monkeypatch.setattr(ray_workers, "worker_parts", fake_parts)
    # Nobody answers the scheduler's request for a variant: the actors wait forever.
    worker = FleetWorker(
        WorkerSpec("w0", cfg, tmp_path, ["http://x"], [], actors=2, desktops=1),
        handle(SchedulerService(3, max_groups=1, backlog=1)),
        handle(GateService(eta=2)),
    )
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0.05)
    assert not running.done()
    await asyncio.wait_for(worker.stop(), 5)
    assert closed.is_set() and running.cancelled()


class WorkerGone(Exception):
    """Stands for Ray's RayActorError: the worker's node died."""


class DyingWorker(FakedWorker):
    """Takes one ticket, then its process dies: it never answers again."""

    async def run(self) -> WorkerReport:
        await self.scheduler.next_ticket()
        raise WorkerGone(self.spec.worker_id)


class DiesBeforeStart(FakedWorker):
    async def ready(self) -> str:
        raise WorkerGone(self.spec.worker_id)


async def test_a_lost_worker_is_released_replaced_and_every_group_reaches_the_driver_once(
    cfg: RunConfig, tmp_path: Path, handle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_fleet, "RESPAWN_DELAY_S", 0.0)  # fakes finish in milliseconds
    RunStore(tmp_path).close()
    service = SchedulerService(3, max_groups=4, backlog=2)
    scheduler, gate = handle(service), handle(GateService(eta=2))

    def spec(worker_id: str) -> WorkerSpec:
        return WorkerSpec(worker_id, cfg, tmp_path, ["http://x"], [], actors=2, desktops=1)

    spawned: list[str] = []
    killed: list[Any] = []
    events: list[tuple[str, dict[str, Any]]] = []

    def spawn(index: int, worker_id: str) -> Any:
        spawned.append(worker_id)
        if len(spawned) == 1:  # placed on the dead node before Ray declared it dead
            return handle(DiesBeforeStart(spec(worker_id), scheduler, gate))
        return handle(FakedWorker(spec(worker_id), scheduler, gate))

    async def on_event(kind: str, data: dict[str, Any]) -> None:
        events.append((kind, data))

    asked = iter([_variant(i) for i in range(10)])
    received: list[GroupRecord] = []

    async def source() -> TaskVariant | None:
        return next(asked)

    async def on_group(finished: GroupRecord) -> None:
        received.append(finished)

    workers = [
        handle(FakedWorker(spec("w0"), scheduler, gate)),
        handle(DyingWorker(spec("w1"), scheduler, gate)),
    ]
    fleet = WorkerFleet(
        scheduler,
        workers,
        source,
        on_group,
        WorkerSupervision(
            spawn=spawn, kill=killed.append, lost_errors=(WorkerGone,), on_event=on_event
        ),
    )
    counts = await asyncio.wait_for(fleet.run(), 30)

    assert [g.group_id for g in received] == list(dict.fromkeys(g.group_id for g in received))
    assert len(received) == 4 and all(len(g.trajectories) == 3 for g in received)
    assert spawned == ["w1.1", "w1.1"] and len(killed) == 2  # the lost one, the stillborn
    assert fleet.replaced == ["w1.1"] and len(fleet.lost) == 1
    assert [kind for kind, _ in events][0] == "worker_lost"
    assert events[0][1]["worker"] == "w1" and len(events[0][1]["requeued"]) == 1
    assert counts["workers_lost"] == 1 and counts["episodes"] == 12
    assert (await scheduler.stats.remote())["requeued"] == 1


async def test_with_no_worker_left_and_none_placed_the_run_fails_in_time(
    cfg: RunConfig, tmp_path: Path, handle
) -> None:
    scheduler, gate = handle(SchedulerService(3, max_groups=4, backlog=2)), handle(GateService(2))

    class NeverPlaced:
        """A replacement Ray never places (no node with room joins)."""

        def __getattr__(self, name: str) -> Any:
            return type("M", (), {"remote": lambda *a, **k: asyncio.Event().wait()})()

    asked = iter([_variant(i) for i in range(10)])

    async def source() -> TaskVariant | None:
        return next(asked)

    async def on_group(finished: GroupRecord) -> None:
        return None

    dying = handle(
        DyingWorker(
            WorkerSpec("w0", cfg, tmp_path, ["http://x"], [], actors=1, desktops=1), scheduler, gate
        )
    )
    fleet = WorkerFleet(
        scheduler,
        [dying],
        source,
        on_group,
        WorkerSupervision(
            spawn=lambda i, w: NeverPlaced(), lost_errors=(WorkerGone,), replace_timeout_s=0.2
        ),
    )
    with pytest.raises(ExceptionGroup) as raised:  # from the fleet's task group
        await asyncio.wait_for(fleet.run(), 10)
    assert raised.group_contains(FleetLost, match="no fleet worker is running")
