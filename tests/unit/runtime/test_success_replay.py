"""Success replay (`train.replay`), end to end from finished groups: the real router,
sample builder, run store, replay buffer and policy learner service (a recording
engine stands in for the model). A zero-success group gets a stored success with
its stored behaviour logprobs and version, judged fresh on its own rollouts; a
group with a success is untouched; the buffer is bounded; off, nothing changes."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from PIL import Image
from tests_support.recording_engine import RecordingEngine

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.adapt.config import AdaptConfig
from cua_rl.adapt.rewriter import RuleRewriter, TaskTemplate
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.config.train import ReplayConfig, TrainConfig
from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.service import LearnerService
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.runtime.group_router import GroupRouter
from cua_rl.runtime.success_replay import SuccessReplay
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import (
    GroupRecord,
    Step,
    StepVerdict,
    TaskVariant,
    Trajectory,
    TrajectoryStatus,
    Vote,
)

VARIANT = TaskVariant(
    task_id="t",
    domain="os",
    evaluator_name="full",
    instruction="Sort all rows.",
    config=(),
    evaluator={"func": "infeasible"},
)
WIN_LOGPROBS = (-0.7, -0.8, -0.9)
"""Distinct from every other trajectory's, so the learner's copy is traceable."""


async def _group(
    store: AsyncRunStore, gid: str, screen: str, *, wins: int, size: int = 2, version: int = 0
) -> GroupRecord:
    """`size` two-step rollouts at `version`, the first `wins` successful; each saved
    with its verdicts to the run store, as the fleet does."""
    trajs, verdicts = [], {}
    for k in range(size):
        tid = f"{gid}-{k}"
        logprobs = WIN_LOGPROBS if k < wins else (-0.1, -0.2, -0.3)
        steps = tuple(
            Step(
                i,
                screen,
                "Action: click.",
                (),
                None,
                "",
                screen,
                token_ids=(5, 6, 7),
                logprobs=logprobs,
                policy_version=version,
            )
            for i in range(2)
        )
        traj = Trajectory(
            tid,
            VARIANT.variant_id,
            steps,
            TrajectoryStatus.FINISHED,
            score=1.0 if k < wins else 0.0,
            policy_version_at_start=version,
        )
        votes = tuple(
            StepVerdict(tid, i, tuple(Vote(1, "ok", (8,), (-0.5,)) for _ in range(3)))
            for i in range(2)
        )
        await store.save_trajectory(traj, group_id=gid)
        for verdict in votes:
            await store.save_verdict(verdict)
        trajs.append(traj)
        verdicts[tid] = votes
    return GroupRecord(gid, VARIANT, tuple(trajs), verdicts)


class _Run:
    """Router and policy learner (eta 0: a group is fresh only at the learner's
    version), one group per update."""

    def __init__(self, tmp_path: Path, store: AsyncRunStore, replay: ReplayConfig) -> None:
        template = TaskTemplate.from_variants([VARIANT], {"order": ["full"], "hints": {}})
        selector = TemplateSelector(
            {"t": template}, {"t": VARIANT}, band=AdaptBand(), rewriter=RuleRewriter(), store=store
        )
        self.engine = RecordingEngine()
        self.policy = LearnerService(
            "policy",
            self.engine,
            store,  # type: ignore[arg-type]
            LearnerLoopConfig(queue_updates=4),
            checkpoint_dir=tmp_path / "ckpt",
            eta=0,
        )
        self.replay = SuccessReplay(replay, store)
        self.seen: list[dict[str, float]] = []
        self.router = GroupRouter(
            selector=selector,
            store=store,
            policy=self.policy,
            prm=None,
            train=TrainConfig(replay=replay),
            adapt=AdaptConfig(enabled=False),
            episode=EpisodeConfig(),
            selector_file=tmp_path / "selector.json",
            on_metrics=lambda group, samples, n: self.seen.append(
                self.replay.metrics(group.group_id)
            ),
            replay=self.replay,
            replay_file=tmp_path / "replay.json",
        )
        self.run = asyncio.create_task(self.policy.run())

    async def route(self, group: GroupRecord) -> None:
        """Route one group and wait until the learner has trained it."""
        steps = self.policy.steps
        await self.router(group)
        assert await asyncio.wait_for(self.policy.took_step(steps + 1), 30)

    async def finish(self) -> None:
        await self.policy.finish()
        await asyncio.wait_for(self.run, 30)


async def _screen(store: AsyncRunStore) -> str:
    png = io.BytesIO()
    Image.new("RGB", (64, 48), "white").save(png, "PNG")
    return await store.put_screenshot(png.getvalue())


async def test_a_stored_success_enters_a_zero_success_group_with_its_stored_logprobs(
    tmp_path: Path,
) -> None:
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await _screen(store)
    run = _Run(tmp_path, store, ReplayConfig(enabled=True))
    await run.route(await _group(store, "g-win", screen, wins=1, version=0))
    # one update later, a group at version 1 in which nothing succeeded
    await run.route(await _group(store, "g-fail", screen, wins=0, version=1))
    await run.finish()

    batch = run.engine.batches[-1]
    replayed = [s for s in batch if s.replayed]
    # the last rollout (g-fail-1) was replaced by the stored success g-win-0
    assert {s.trajectory_id for s in batch} == {"g-fail-0", "g-win-0"}
    assert [s.step_index for s in replayed] == [0, 1]
    assert all(s.behavior_logprobs == WIN_LOGPROBS and s.version == 0 for s in replayed)
    assert all(s.advantage > 0 for s in replayed)  # standardized within the new group
    assert all(
        s.advantage < 0 and not s.replayed and s.version == 1
        for s in batch
        if s.trajectory_id == "g-fail-0"
    )
    # eta 0: the replayed member (lag 1) did not make the group stale
    counters = await store.counters()
    assert "policy_stale_dropped" not in counters
    assert (counters["replay_groups"], counters["replay_stored"]) == (1, 1)
    assert run.seen[-1] == {
        "replay_buffer_trajectories": 1.0,
        "replay_buffer_tasks": 1.0,
        "replay_replayed": 1.0,
        "replay_lag": 1.0,
    }
    [event] = await store.events("success_replay")
    assert event["data"]["replaced"] == "g-fail-1" and event["data"]["lag"] == 1
    assert (tmp_path / "replay.json").is_file()
    await store.close()


async def test_a_group_with_a_success_is_untouched(tmp_path: Path) -> None:
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await _screen(store)
    run = _Run(tmp_path, store, ReplayConfig(enabled=True))
    await run.route(await _group(store, "g-win", screen, wins=1))
    await run.route(await _group(store, "g-mixed", screen, wins=1, size=3, version=1))
    await run.finish()

    batch = run.engine.batches[-1]
    assert {s.trajectory_id for s in batch} == {"g-mixed-0", "g-mixed-1", "g-mixed-2"}
    assert not any(s.replayed for s in batch)
    assert "replay_groups" not in await store.counters()
    assert run.seen[-1]["replay_replayed"] == 0.0
    assert [s.trajectory_id for s in run.replay.buffer(VARIANT.variant_id)] == [
        "g-win-0",
        "g-mixed-0",
    ]
    await store.close()


async def test_with_replay_off_a_zero_success_group_trains_as_sampled(tmp_path: Path) -> None:
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await _screen(store)
    run = _Run(tmp_path, store, ReplayConfig())  # the default: off
    await run.route(await _group(store, "g-win", screen, wins=1))
    await run.route(await _group(store, "g-fail", screen, wins=0, version=1))
    await run.finish()

    # all advantages of g-fail are zero: no samples, no update for it
    assert len(run.engine.batches) == 1
    assert (await store.counters())["policy_steps_empty"] == 1
    assert run.replay.size == 0 and run.seen[-1] == {}
    assert not any(k.startswith("replay_") for k in await store.counters())
    await store.close()


async def test_the_buffer_is_bounded_per_task_and_evicts_stale_successes(tmp_path: Path) -> None:
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await _screen(store)
    replay = SuccessReplay(ReplayConfig(enabled=True, per_task=2, max_lag=3), store)
    for k in range(3):
        await replay.apply(await _group(store, f"g{k}", screen, wins=2, version=k), k)
    # per_task 2, first in first out: the two of g2 remain
    assert [s.trajectory_id for s in replay.buffer(VARIANT.variant_id)] == ["g2-0", "g2-1"]
    assert (await store.counters())["replay_evicted_full"] == 4
    # the state survives a resume
    resumed = SuccessReplay(replay.cfg, store)
    resumed.load_state_dict(replay.state_dict())
    assert resumed.buffer(VARIANT.variant_id) == replay.buffer(VARIANT.variant_id)
    # 4 updates behind the learner (max_lag 3): evicted and counted, never replayed
    fail = await _group(store, "g-fail", screen, wins=0, version=6)
    out = await replay.apply(fail, 6)
    assert out.group is fail and out.replayed is None
    assert replay.size == 0
    counters = await store.counters()
    assert counters["replay_evicted_stale"] == 2 and "replay_groups" not in counters
    await store.close()


async def test_a_stored_success_missing_from_the_store_is_dropped_not_fatal(tmp_path: Path) -> None:
    """A buffer entry whose trajectory is not in the run store (a hand-edited
    replay.json on --resume) costs the entry and that group's replay, not the run."""
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await _screen(store)
    replay = SuccessReplay(ReplayConfig(enabled=True), store)
    await replay.apply(await _group(store, "g-win", screen, wins=1), 0)
    state = replay.state_dict()
    json_text = json.dumps(state).replace("g-win-0", "g-gone-0")
    replay.load_state_dict(json.loads(json_text))
    out = await replay.apply(await _group(store, "g-fail", screen, wins=0), 0)
    assert not out.replayed and out.group.trajectories[-1].id == "g-fail-1"
    assert replay.size == 0
    await store.close()
