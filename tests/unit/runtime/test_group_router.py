"""Algorithm 2's rule for training data, end to end from a finished group: the real
selector, sample builder, run store and learner services; candidate groups decide
their acceptance and never reach a learner."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from PIL import Image
from tests_support.recording_engine import RecordingEngine

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.adapt.config import AdaptConfig
from cua_rl.adapt.rewriter import RuleRewriter, TaskTemplate
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.service import LearnerService
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.runtime.group_router import GroupRouter
from cua_rl.runtime.train_config import TrainConfig
from cua_rl.store.run_store import AsyncRunStore
from cua_rl.types import (
    GroupRecord,
    Step,
    StepVerdict,
    TaskVariant,
    Trajectory,
    TrajectoryStatus,
    Vote,
)


def _v(name: str, instruction: str) -> TaskVariant:
    return TaskVariant(task_id="t", domain="os", evaluator_name=name, instruction=instruction,
                       config=(), evaluator={"func": "infeasible"})


TEMPLATE = TaskTemplate.from_variants(
    [_v("full", "Sort all rows."), _v("narrow", "Sort rows 1-5.")],
    {"order": ["narrow", "full"], "hints": {}})


def _group(gid: str, variant: TaskVariant, screen: str, votes: list[int],
           wins: int = 0) -> GroupRecord:
    """One trajectory per vote value, two steps each; all fail unless `wins`."""
    trajs, verdicts = [], {}
    for k, vote in enumerate(votes):
        tid = f"{gid}-{k}"
        steps = tuple(Step(i, screen, "Action: click.", (), None, "", screen,
                           token_ids=(5, 6, 7), logprobs=(-0.1, -0.2, -0.3)) for i in range(2))
        trajs.append(Trajectory(tid, variant.variant_id, steps, TrajectoryStatus.FINISHED,
                                score=1.0 if k < wins else 0.0))
        verdicts[tid] = tuple(StepVerdict(tid, i, (Vote(vote, "ok", (8,), (-0.5,)),) * 3)
                              for i in range(2))
    return GroupRecord(gid, variant, tuple(trajs), verdicts)


async def test_candidate_groups_never_reach_a_learner(tmp_path: Path) -> None:
    store = AsyncRunStore.open(tmp_path / "run")
    png = io.BytesIO()
    Image.new("RGB", (64, 48), "white").save(png, "PNG")
    screen = await store.put_screenshot(png.getvalue())
    original = TEMPLATE.variants["full"]
    selector = TemplateSelector({"t": TEMPLATE}, {"t": original}, band=AdaptBand(),
                                rewriter=RuleRewriter(), store=store)
    engines = {role: RecordingEngine() for role in ("policy", "prm")}
    learners = {role: LearnerService(role, engine, store,  # type: ignore[arg-type]
                                     LearnerLoopConfig(queue_updates=4),
                                     checkpoint_dir=tmp_path / "ckpt")
                for role, engine in engines.items()}
    seen: list[tuple[str, int]] = []
    router = GroupRouter(
        selector=selector, store=store, policy=learners["policy"], prm=learners["prm"],
        train=TrainConfig(prm_sample_band=AdaptBand(alpha_low=0.0, alpha_high=1.0)),
        adapt=AdaptConfig(), episode=EpisodeConfig(), selector_file=tmp_path / "selector.json",
        on_metrics=lambda group, samples, n: seen.append((group.group_id, len(samples.policy))))
    runs = [asyncio.create_task(s.run()) for s in learners.values()]

    # the original fails (acc 0 -> easier: the `narrow` candidate); votes differ, so
    # its steps have non-zero advantages and become samples
    await router(_group("g-orig", original, screen, votes=[1, -1]))
    candidate = await selector.next_variant()
    assert candidate.evaluator_name == "narrow"
    # the candidate's group is judged (acc 0.5: accepted) but is not training data
    await router(_group("g-cand", candidate, screen, votes=[1, -1], wins=1))
    assert selector.current["t"] == candidate
    # once accepted, the same variant's next group is training data
    await router(_group("g-next", candidate, screen, votes=[1, -1], wins=1))
    for service in learners.values():
        await service.finish()
    await asyncio.gather(*runs)

    trained = {s.trajectory_id.rsplit("-", 1)[0] for e in engines.values()
               for batch in e.batches for s in batch}
    assert trained == {"g-orig", "g-next"}
    assert seen == [("g-orig", 4), ("g-cand", 0), ("g-next", 4)]
    counters = await store.counters()
    assert counters["candidate_groups"] == 1
    assert counters["policy_samples_collected"] == counters["policy_samples_used"] == 8
    assert (tmp_path / "selector.json").is_file()
    await store.close()
