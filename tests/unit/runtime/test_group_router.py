"""Algorithm 2's rule for training data, end to end from a finished group: the real
selector, scheduler, sample builder, run store and learner services. S u N: groups
of a task's versions and an accepted candidate's own group train both learners, a
rejected candidate's never does; no task is left waiting on a decision; the
reward model updates once per policy step on the in-band subset of its groups.
Each test reproduces a defect of an earlier main (issue 28)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests_support.recording_engine import RecordingEngine
from tests_support.scored_groups import scored_group, white_screen

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.adapt.config import AdaptConfig
from cua_rl.adapt.rewriter import RuleRewriter, TaskTemplate
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.config.train import TrainConfig
from cua_rl.learner.config import LearnerLoopConfig
from cua_rl.learner.service import LearnerService
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.scheduler import GroupScheduler
from cua_rl.runtime.group_router import GroupRouter
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.config import StoreConfig
from cua_rl.store.upkeep import StoreUpkeep
from cua_rl.types import TaskVariant


def _v(name: str, instruction: str) -> TaskVariant:
    return TaskVariant(
        task_id="t",
        domain="os",
        evaluator_name=name,
        instruction=instruction,
        config=(),
        evaluator={"func": "infeasible"},
    )


TEMPLATE = TaskTemplate.from_variants(
    [_v("full", "Sort all rows."), _v("narrow", "Sort rows 1-5.")],
    {"order": ["narrow", "full"], "hints": {}},
)
HINTED = TaskTemplate.from_variants(
    [
        _v("full", "Sort all rows."),
        _v("narrow", "Sort rows 1-5."),
        _v("extra", "Sort all rows and bold the header."),
    ],
    {"order": ["narrow", "full", "extra"], "hints": {"full": ["Hint: use Data > Sort."]}},
)


class _Run:
    """Selector, router and both learners (reward model following the policy), with
    recording engines; `trained(role)` lists the groups each learner trained on. Every
    step is sampled at version 0: eta 10 keeps staleness out of these tests."""

    def __init__(
        self,
        tmp_path: Path,
        store: AsyncRunStore,
        template: TaskTemplate,
        *,
        tasks_per_update: int = 1,
        adapt: bool = True,
        upkeep: StoreUpkeep | None = None,
    ) -> None:
        self.store = store
        self.selector = TemplateSelector(
            {"t": template},
            {"t": template.variants["full"]},
            band=AdaptBand(),
            rewriter=RuleRewriter(),
            store=store,
        )
        self.engines = {role: RecordingEngine() for role in ("policy", "prm")}
        policy = LearnerService(
            "policy",
            self.engines["policy"],
            store,  # type: ignore[arg-type]
            LearnerLoopConfig(queue_updates=4),
            checkpoint_dir=tmp_path / "ckpt",
            eta=10,
            tasks_per_update=tasks_per_update,
        )
        prm = LearnerService(
            "prm",
            self.engines["prm"],
            store,  # type: ignore[arg-type]
            LearnerLoopConfig(queue_updates=4),
            checkpoint_dir=tmp_path / "ckpt",
            eta=10,
            tasks_per_update=tasks_per_update,
            leader=policy,
        )
        self.learners = {"policy": policy, "prm": prm}
        self.seen: list[tuple[str, int]] = []
        self.router = GroupRouter(
            selector=self.selector,
            store=store,
            policy=policy,
            prm=prm,
            train=TrainConfig(tasks_per_update=tasks_per_update),
            adapt=AdaptConfig(enabled=adapt),
            episode=EpisodeConfig(),
            selector_file=tmp_path / "selector.json",
            on_metrics=lambda group, samples, n: self.seen.append(
                (group.group_id, len(samples.policy))
            ),
            upkeep=upkeep,
        )
        self.runs = [asyncio.create_task(s.run()) for s in self.learners.values()]

    async def finish(self) -> None:
        for service in self.learners.values():
            await service.finish()
        await asyncio.wait_for(asyncio.gather(*self.runs), 30)

    def trained(self, role: str) -> list[set[str]]:
        return [
            {s.trajectory_id.rsplit("-", 1)[0] for s in batch}
            for batch in self.engines[role].batches
        ]


async def test_an_accepted_candidates_group_trains_and_a_rejected_ones_never(
    tmp_path: Path,
) -> None:
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await white_screen(store)
    run = _Run(tmp_path, store, TEMPLATE)
    original = TEMPLATE.variants["full"]
    # the original fails (acc 0 -> easier: the `narrow` candidate); votes differ, so
    # its steps have non-zero advantages and become samples
    await run.router(scored_group("g-orig", original, screen, votes=[1, -1]))
    candidate = await run.selector.next_variant()
    assert candidate.evaluator_name == "narrow"
    # the candidate's group is judged (acc 0.5: accepted) and, accepted, trains (N)
    await run.router(scored_group("g-cand", candidate, screen, votes=[1, -1], wins=1))
    assert run.selector.current["t"] == candidate
    await run.router(scored_group("g-next", candidate, screen, votes=[1, -1], wins=1))
    await run.finish()

    assert run.trained("policy") == [{"g-orig"}, {"g-cand"}, {"g-next"}]
    # the reward model trains only on in-band groups (acc 0.5): g-orig's acc is 0
    assert run.trained("prm") == [{"g-cand"}, {"g-next"}]
    assert run.seen == [("g-orig", 4), ("g-cand", 4), ("g-next", 4)]
    counters = await store.counters()
    assert (counters["groups_original"], counters["groups_accepted"]) == (2, 1)
    assert "candidate_groups_rejected" not in counters
    assert counters["policy_samples_collected"] == counters["policy_samples_used"] == 12
    assert counters["prm_steps_empty"] == 1
    assert (tmp_path / "selector.json").is_file()
    await store.close()


async def test_a_candidate_whose_every_rollout_is_given_up_is_rejected(tmp_path: Path) -> None:
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await white_screen(store)
    run = _Run(tmp_path, store, HINTED)
    scheduler = GroupScheduler(run.selector.next_variant, 2)
    first = [await scheduler.next_ticket() for _ in range(2)]
    await run.router(scored_group("g-orig", first[0].variant, screen, votes=[1, -1]))  # acc 0
    tickets = [await scheduler.next_ticket() for _ in range(2)]
    candidate = tickets[0].variant
    assert run.selector.pending["t"].candidate == candidate
    # both rollouts of the candidate are given up: its group comes back empty
    assert await scheduler.give_up(tickets[0], "setup failed: asset missing") is None
    empty = await scheduler.give_up(tickets[1], "variant set aside: 3 aborts in a row")
    assert empty is not None
    await run.router(empty)
    assert not run.selector.pending  # decided: the task is free for a new proposal
    decision = (await store.events("adapt_decision"))[-1]["data"]
    assert decision["accepted"] is False and decision["reason"] == "no_rollouts"
    assert decision["gave_up_reasons"] == [
        "setup failed: asset missing",
        "variant set aside: 3 aborts in a row",
    ]
    # the next out-of-band group of the task gets a proposal again
    await run.router(scored_group("g-orig2", first[0].variant, screen, votes=[1, -1]))
    assert run.selector.pending["t"].candidate.variant_id != candidate.variant_id
    await run.finish()
    assert run.trained("policy") == [{"g-orig"}, {"g-orig2"}]
    counters = await store.counters()
    assert counters["groups_empty"] == 1 and counters["adapt_no_rollouts"] == 1
    await store.close()


async def test_every_group_is_recorded_for_retention_once_routed(tmp_path: Path) -> None:
    """Training groups, a rejected candidate's and an empty one: none is read again
    after its routing, so screenshot retention must know of each (store/upkeep.py)."""
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await white_screen(store)
    run = _Run(tmp_path, store, HINTED, upkeep=StoreUpkeep(store, StoreConfig()))
    scheduler = GroupScheduler(run.selector.next_variant, 2)
    first = [await scheduler.next_ticket() for _ in range(2)]
    await run.router(scored_group("g-orig", first[0].variant, screen, votes=[1, -1]))
    tickets = [await scheduler.next_ticket() for _ in range(2)]
    await scheduler.give_up(tickets[0], "setup failed")
    empty = await scheduler.give_up(tickets[1], "setup failed")
    assert empty is not None
    await run.router(empty)
    await run.finish()
    rows = await store.call(
        store.sync.query,
        lambda db: db.execute(
            "SELECT group_id, policy_version, pruned FROM routed_groups ORDER BY routed_at"
        ).fetchall(),
    )
    assert [(g, pruned) for g, _, pruned in rows] == [("g-orig", 0), (empty.group_id, 0)]
    await store.close()


async def test_a_rewrite_equal_to_the_original_is_no_candidate_and_late_groups_train(
    tmp_path: Path,
) -> None:
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await white_screen(store)
    run = _Run(tmp_path, store, HINTED)
    original = HINTED.variants["full"]
    await run.router(scored_group("g-orig", original, screen, votes=[1, -1]))  # acc 0: easier
    hinted = await run.selector.next_variant()
    await run.router(scored_group("g-hint", hinted, screen, votes=[1, -1], wins=1))  # accepted
    # acc 1.0: harder. Dropping the hint gives the original's text (and, on an
    # earlier main, the original's id): not a candidate; `extra` is proposed instead
    await run.router(scored_group("g-easy", hinted, screen, votes=[1, -1], wins=2))
    harder = run.selector.pending["t"].candidate
    assert harder.evaluator_name == "extra"
    assert harder.variant_id not in {original.variant_id, hinted.variant_id}
    # a late group of the original, in flight since before: training data, no decision
    await run.router(scored_group("g-late", original, screen, votes=[1, -1], wins=1))
    assert run.selector.pending["t"].candidate == harder
    await run.router(scored_group("g-hard", harder, screen, votes=[1, -1]))  # acc 0: rejected
    await run.finish()
    assert run.trained("policy") == [{"g-orig"}, {"g-hint"}, {"g-easy"}, {"g-late"}]
    decisions = [e["data"] for e in await store.events("adapt_decision")]
    assert [(d["candidate"], d["accepted"]) for d in decisions] == [
        (hinted.variant_id, True),
        (harder.variant_id, False),
    ]
    assert (await store.counters())["candidate_groups_rejected"] == 1
    await store.close()


async def test_the_reward_model_updates_once_per_policy_step_on_in_band_groups(
    tmp_path: Path,
) -> None:
    # 12 sampled tasks per step; in the first step 9 of 12 are out of band (acc 0),
    # in the second all are: the reward model trains on the 3 in-band groups of
    # step 1 and makes no update in step 2 (counted), while the policy trains on
    # all 24 groups in 2 updates. Earlier, the reward model waited for 12 groups
    # with samples and never updated here.
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await white_screen(store)
    run = _Run(tmp_path, store, TEMPLATE, tasks_per_update=12, adapt=False)
    original = TEMPLATE.variants["full"]
    in_band = {2, 5, 11}
    for k in range(24):
        await run.router(
            scored_group(
                f"g{k:02d}", original, screen, votes=[1, -1], wins=1 if k in in_band else 0
            )
        )
    await run.finish()
    assert [len(groups) for groups in run.trained("policy")] == [12, 12]
    assert run.trained("prm") == [{"g02", "g05", "g11"}]
    counters = await store.counters()
    assert (counters["policy_updates"], counters["prm_updates"]) == (2, 1)
    assert (counters["prm_steps"], counters["prm_steps_empty"]) == (2, 1)
    await store.close()


async def test_groups_routed_at_once_leave_the_selector_state_whole_and_newest(
    tmp_path: Path,
) -> None:
    """Groups are routed concurrently (a soak whose reward model was gone routed dozens
    within milliseconds): the selector's file is written one write at a time, so no
    writer loses its temporary file to another and the newest state is the last."""
    store = AsyncRunStore.open(tmp_path / "run")
    screen = await white_screen(store)
    run = _Run(tmp_path, store, TEMPLATE)
    original = TEMPLATE.variants["full"]
    await asyncio.gather(
        *(run.router(scored_group(f"g{i}", original, screen, votes=[1, -1])) for i in range(40))
    )
    await run.finish()
    import json
    import os

    assert json.loads((tmp_path / "selector.json").read_text()) == json.loads(
        json.dumps(run.selector.state_dict())
    )
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]
    await store.close()
