"""Choices the RLAnything paper leaves open, each pinned by a test (docs/algorithms.md,
"Choices the paper leaves open", lists them with the tests that decide them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.adapt.config import CritiqueConfig, RewriterConfig
from cua_rl.adapt.rewriter import RuleRewriter, TaskTemplate
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.learner.rank_split import contiguous_chunks
from cua_rl.reward.advantages import standardize, step_rewards
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import GroupRecord, TaskVariant, Trajectory, TrajectoryStatus


def _v(task: str, name: str, instruction: str) -> TaskVariant:
    return TaskVariant(
        task_id=task,
        domain="os",
        evaluator_name=name,
        instruction=instruction,
        config=(),
        evaluator={"func": "infeasible"},
    )


def _group(variant: TaskVariant, wins: int, n: int = 4) -> GroupRecord:
    trajs = tuple(
        Trajectory(
            f"{variant.variant_id}-{i}",
            variant.variant_id,
            (),
            TrajectoryStatus.FINISHED,
            score=float(i < wins),
        )
        for i in range(n)
    )
    return GroupRecord("g", variant, trajs, {t.id: () for t in trajs})


def test_rewards_span_minus_2_to_2_with_one_lambda() -> None:
    # R_i = O + lambda * mean(S_ij), lambda = 1: the paper's text says [-1, 1], its
    # formula gives [-2, 2]; the reward model's vote rewards reuse this same R_i
    assert step_rewards(1, [(1, 1, 1)]) == [2.0]
    assert step_rewards(-1, [(-1, -1, -1)]) == [-2.0]


def test_population_std_and_the_flat_group_rule() -> None:
    # ddof 0: (1, -1) has std 1, so the advantages are the rewards themselves
    assert standardize([1.0, -1.0]) == pytest.approx([1.0, -1.0])
    # a spread at or below 1e-6 is no signal: zeros, not amplified noise
    assert standardize([0.5, 0.5 + 1e-7]) == [0.0, 0.0]


async def test_tasks_are_sampled_round_robin_and_candidates_first(tmp_path: Path) -> None:
    tasks = {t: _v(t, "main", f"Do {t}.") for t in ("a", "b", "c")}
    templates = {
        t: TaskTemplate.from_variants(
            [v, _v(t, "easy", f"Just start {t}.")], {"order": ["easy", "main"]}
        )
        for t, v in tasks.items()
    }
    store = AsyncRunStore.open(tmp_path)
    sel = TemplateSelector(templates, tasks, band=AdaptBand(), rewriter=RuleRewriter(), store=store)
    assert [(await sel.next_variant()).task_id for _ in range(4)] == ["a", "b", "c", "a"]
    await sel.on_group(_group(tasks["b"], wins=0))  # too hard: a candidate joins
    assert (await sel.next_variant()).evaluator_name == "easy"
    assert [(await sel.next_variant()).task_id for _ in range(3)] == ["b", "c", "a"]
    await store.close()


async def test_acc_parent_is_frozen_at_proposal(tmp_path: Path) -> None:
    main = _v("t", "main", "Do it.")
    template = TaskTemplate.from_variants(
        [main, _v("t", "easy", "Start it.")], {"order": ["easy", "main"]}
    )
    store = AsyncRunStore.open(tmp_path)
    sel = TemplateSelector(
        {"t": template}, {"t": main}, band=AdaptBand(), rewriter=RuleRewriter(), store=store
    )
    await sel.on_group(_group(main, wins=0))  # acc(q) = 0: propose easier
    await sel.on_group(_group(main, wins=1))  # later groups of q do not move acc(q)
    candidate = await sel.next_variant()
    assert await sel.on_group(_group(candidate, wins=1)) == "accepted"  # 0 < 0.25 < 0.8
    decision = (await store.events("adapt_decision"))[0]["data"]
    assert decision["acc_parent"] == 0.0 and decision["acc_candidate"] == 0.25
    await store.close()


def test_mini_batches_are_contiguous_in_arrival_order() -> None:
    # groups in the order they completed, steps in trajectory order: no shuffle
    assert contiguous_chunks(10, 4) == [[0, 1], [2, 3, 4], [5, 6], [7, 8, 9]]
    assert contiguous_chunks(2, 4) == [[], [0], [], [1]]


def test_critique_and_rewriter_sampling() -> None:
    critique, rewriter = CritiqueConfig(), RewriterConfig()
    assert (critique.max_flagged_steps, critique.temperature) == (8, 0.0)
    assert (rewriter.candidates, rewriter.temperature) == (3, 1.0)
