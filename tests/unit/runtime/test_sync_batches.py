"""`train.mode: sync` (runtime/sync_batches.py): a batch of `tasks_per_update` groups
opens only once the previous batch has been routed, trained on by both learners and
synced; a group that trains nothing leaves its place to one group of the next batch.
The real scheduler, router, selector, run store and learner services; the engines
record their batches instead of training a model."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests_support.recording_engine import RecordingEngine
from tests_support.scored_groups import scored_group, white_screen

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.adapt.config import AdaptConfig
from cua_rl.adapt.rewriter import RuleRewriter, TaskTemplate
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.config.train import PrmSampleBand, TrainConfig
from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.service import LearnerService
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.scheduler import GroupScheduler, RolloutTicket
from cua_rl.runtime.group_router import GroupRouter
from cua_rl.runtime.sync_batches import SyncBatches
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import TaskVariant

VARIANT = TaskVariant(
    task_id="t",
    domain="os",
    evaluator_name="full",
    instruction="Sort all rows.",
    config=(),
    evaluator={"func": "infeasible"},
)

EVERY_TASK = PrmSampleBand(alpha_low=0.0, alpha_high=1.0)
"""The reward model trains on every group (these groups all fail)."""


class _Loop:
    """Two actors against a synchronous run of `updates` steps of two groups of two
    rollouts; `opened[group]` is how many policy steps had settled when the group's
    first rollout started. `give_up` names groups whose every rollout is given up."""

    def __init__(
        self,
        tmp_path: Path,
        store: AsyncRunStore,
        *,
        updates: int,
        give_up: frozenset[str] = frozenset(),
    ) -> None:
        self.store, self.updates, self.give_up = store, updates, give_up
        self.engines = {role: RecordingEngine() for role in ("policy", "prm")}
        loop_cfg = LearnerLoopConfig(queue_updates=4)
        self.policy = LearnerService(
            "policy",
            self.engines["policy"],
            store,  # type: ignore[arg-type]
            loop_cfg,
            checkpoint_dir=tmp_path / "ckpt",
            tasks_per_update=2,
        )
        self.prm = LearnerService(
            "prm",
            self.engines["prm"],
            store,  # type: ignore[arg-type]
            loop_cfg,
            checkpoint_dir=tmp_path / "ckpt",
            tasks_per_update=2,
            leader=self.policy,
        )
        template = TaskTemplate.from_variants([VARIANT], {"order": ["full"], "hints": {}})
        selector = TemplateSelector(
            {"t": template}, {"t": VARIANT}, band=AdaptBand(), rewriter=RuleRewriter(), store=store
        )
        self.router = GroupRouter(
            selector=selector,
            store=store,
            policy=self.policy,
            prm=self.prm,
            train=TrainConfig(tasks_per_update=2, prm_sample_band=EVERY_TASK),
            adapt=AdaptConfig(enabled=False),
            episode=EpisodeConfig(),
            selector_file=tmp_path / "selector.json",
        )
        self.batches = SyncBatches(self._next, [self.policy, self.prm], 2)
        self.scheduler = GroupScheduler(self.batches, 2)
        self.handler = self.batches.wrap(self.router)
        self.opened: dict[str, int] = {}

    async def _next(self) -> TaskVariant | None:
        return None if self.policy.version >= self.updates else VARIANT

    async def _actor(self, screen: str) -> None:
        while (ticket := await self.scheduler.next_ticket()) is not None:
            self.opened.setdefault(ticket.group_id, self.policy.steps_done)
            await asyncio.sleep(0)  # the other actor takes its ticket meanwhile
            group = await self._finish(ticket, screen)
            if group is not None:
                await self.handler(group)

    async def _finish(self, ticket: RolloutTicket, screen: str):  # type: ignore[no-untyped-def]
        if ticket.group_id in self.give_up:
            return await self.scheduler.give_up(ticket, "desktop died")
        scored = scored_group(
            f"{ticket.group_id}.{ticket.slot}",
            VARIANT,
            screen,
            votes=[1 if ticket.slot == 0 else -1],
        )
        traj = scored.trajectories[0]
        return await self.scheduler.complete(ticket, traj, list(scored.verdicts[traj.id]))

    async def run(self) -> None:
        screen = await white_screen(self.store)
        learners = [
            asyncio.create_task(self.policy.run(max_updates=self.updates)),
            asyncio.create_task(self.prm.run()),
        ]
        await asyncio.wait_for(asyncio.gather(self._actor(screen), self._actor(screen)), 30)
        for service in (self.policy, self.prm):
            await service.finish()
        await asyncio.wait_for(asyncio.gather(*learners), 30)

    def trained(self, role: str) -> list[set[str]]:
        return [
            {s.trajectory_id.split(".")[0] for s in batch} for batch in self.engines[role].batches
        ]


async def test_a_batch_starts_only_after_the_previous_one_is_trained_and_synced(
    tmp_path: Path,
) -> None:
    store = AsyncRunStore.open(tmp_path / "run")
    loop = _Loop(tmp_path, store, updates=2)
    await loop.run()
    groups = sorted(loop.opened)
    assert len(groups) == 4
    # batch 1 opens before any step, batch 2 only after step 1 has settled
    assert [loop.opened[g] for g in groups] == [0, 0, 1, 1]
    assert loop.trained("policy") == [set(groups[:2]), set(groups[2:])]
    assert loop.trained("prm") == loop.trained("policy")
    assert (loop.batches.batches, loop.batches.handed, loop.batches.routed) == (2, 4, 4)
    updates = await store.events("update")
    assert sorted((e["data"]["version"], e["subject"]) for e in updates) == [
        (1, "policy"),
        (1, "prm"),
        (2, "policy"),
        (2, "prm"),
    ]


async def test_a_group_that_trains_nothing_leaves_its_place_to_the_next_batch(
    tmp_path: Path,
) -> None:
    store = AsyncRunStore.open(tmp_path / "run")
    # the scheduler numbers groups g000000, g000001, ...: the second one is given up
    loop = _Loop(tmp_path, store, updates=1, give_up=frozenset({"g000001"}))
    await loop.run()
    assert sorted(loop.opened) == ["g000000", "g000001", "g000002"]
    # the step needed one more group: batch 2 is g000002 alone, opened with no step
    # taken, and the one step trains g000000 and g000002
    assert loop.opened["g000002"] == 0
    assert loop.trained("policy") == [{"g000000", "g000002"}]
    assert (loop.batches.batches, loop.batches.handed) == (2, 3)
    assert (await store.counters())["groups_empty"] == 1
