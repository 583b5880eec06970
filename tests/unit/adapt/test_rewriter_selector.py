from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.adapt.config import RewriterConfig
from cua_rl.adapt.rewriter import ModelRewriter, RuleRewriter, TaskTemplate
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.inference.base import ChatResult, Choice
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import GroupRecord, TaskVariant, Trajectory, TrajectoryStatus


def _v(name: str, instruction: str) -> TaskVariant:
    return TaskVariant(
        task_id="t",
        domain="os",
        evaluator_name=name,
        instruction=instruction,
        config=(),
        evaluator={"func": "infeasible"},
    )


VARIANTS = [
    _v("narrow", "Sort rows 1-5."),
    _v("full", "Sort all rows."),
    _v("extra", "Sort all rows and bold the header."),
]
TEMPLATE = TaskTemplate.from_variants(
    VARIANTS,
    {
        "order": ["narrow", "full", "extra"],
        "hints": {"full": ["Hint: use Data > Sort.", "Hint: select column A first."]},
    },
)


async def _propose(
    rw: RuleRewriter,
    current: TaskVariant,
    direction: str,
    summaries: list[str] | None = None,
    **kw: Any,
) -> TaskVariant | None:
    return (await rw.propose(current, TEMPLATE, summaries or [], direction, **kw)).candidate


async def test_rule_rewriter_walks_hints_then_variants() -> None:
    rw = RuleRewriter()
    full = TEMPLATE.variants["full"]
    easier1 = await _propose(rw, full, "easier")
    assert easier1.instruction == "Sort all rows.\nHint: use Data > Sort."
    easier2 = await _propose(rw, easier1, "easier")
    assert easier2.instruction.endswith("Hint: select column A first.")
    easier3 = await _propose(rw, easier2, "easier")
    assert easier3.evaluator_name == "narrow"  # hints exhausted: the easier variant
    assert await _propose(rw, easier3, "easier") is None
    harder = await _propose(rw, easier2, "harder")
    assert harder.instruction == easier1.instruction  # the last hint removed
    assert (await _propose(rw, full, "harder")).evaluator_name == "extra"
    assert await _propose(rw, TEMPLATE.variants["extra"], "harder") is None


async def test_rule_rewriter_picks_the_hint_the_critique_points_at() -> None:
    rw = RuleRewriter()
    full = TEMPLATE.variants["full"]
    assert rw.reads_summaries(full, TEMPLATE, "easier")  # two hints to choose from
    assert not rw.reads_summaries(full, TEMPLATE, "harder")  # nothing to choose
    out = await rw.propose(
        full, TEMPLATE, ["The agent never selected column A before sorting."], "easier"
    )
    assert out.candidate.instruction.endswith("Hint: select column A first.")
    assert "critique" in out.note
    # without a critique the recorded order decides
    plain = await rw.propose(full, TEMPLATE, [], "easier")
    assert plain.candidate.instruction.endswith("Hint: use Data > Sort.")


async def test_rule_rewriter_never_reproposes_a_rejected_candidate() -> None:
    rw = RuleRewriter()
    full = TEMPLATE.variants["full"]
    first = await _propose(rw, full, "easier")
    second = await _propose(
        rw, full, "easier", exclude=frozenset({(first.evaluator_name, first.instruction)})
    )
    assert second.instruction.endswith("Hint: select column A first.")
    every = frozenset(
        {
            ("full", "Sort all rows.\nHint: use Data > Sort."),
            ("full", "Sort all rows.\nHint: select column A first."),
            ("narrow", "Sort rows 1-5."),
        }
    )
    out = await rw.propose(full, TEMPLATE, [], "easier", exclude=every)
    assert out.candidate is None and "rejected before" in out.note


async def test_rule_rewriter_says_when_a_task_has_nothing_to_adapt() -> None:
    lone = TaskTemplate.from_variants([_v("only", "Do it.")])
    out = await RuleRewriter().propose(lone.variants["only"], lone, [], "easier")
    assert out.candidate is None and "adapt.rewriter.type=model" in out.note


class ScriptedModel:
    """The model boundary: answers are scripted so validation can be checked."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.asked: list[list[dict[str, Any]]] = []

    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.asked.append(messages)
        return ChatResult(
            tuple(Choice(i, a, (), (), "stop") for i, a in enumerate(self.answers)), 0
        )

    def end_session(self, key: str) -> None:
        pass


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (
            [
                '{"full": "Sort all rows. Hint: use Data > Sort.", "extra": "x"}',  # extra key
                '{"bogus": "Sort."}',  # unknown name
                '{"full": "   "}',
            ],
            None,
        ),  # empty instruction
        (['Sure! Here it is: {"narrow": "Sort rows 1-5 only."} Hope it helps.'], "narrow"),
        (["not json", '{"full": "Sort all rows. Use Data > Sort."}'], "full"),
        (['{"full": "Sort all rows."}'], None),  # unchanged
    ],
)
async def test_model_rewriter_keeps_first_valid(answers: list[str], expected: str | None) -> None:
    model = ScriptedModel(answers)
    rw = ModelRewriter(model, RewriterConfig(type="model", candidates=len(answers)))
    out = (
        await rw.propose(TEMPLATE.variants["full"], TEMPLATE, ["clicked the wrong menu"], "easier")
    ).candidate
    assert (out.evaluator_name if out else None) == expected
    assert "clicked the wrong menu" in model.asked[0][0]["content"]


def _group(variant: TaskVariant, wins: int, n: int = 4) -> GroupRecord:
    trajs = tuple(
        Trajectory(
            id=f"{variant.variant_id}-{i}",
            variant_id=variant.variant_id,
            steps=(),
            status=TrajectoryStatus.FINISHED,
            score=1.0 if i < wins else 0.0,
        )
        for i in range(n)
    )
    return GroupRecord("g", variant, trajs, {t.id: () for t in trajs})


async def test_selector_proposes_then_accepts_or_rejects(tmp_path: Path) -> None:
    store = AsyncRunStore.open(tmp_path)
    full = TEMPLATE.variants["full"]
    sel = TemplateSelector(
        {"t": TEMPLATE}, {"t": full}, band=AdaptBand(), rewriter=RuleRewriter(), store=store
    )
    assert (await sel.next_variant()).evaluator_name == "full"
    assert await sel.on_group(_group(full, wins=0)) == "original"  # acc 0 -> easier
    candidate = await sel.next_variant()  # joins the next round
    assert candidate.revision == 1 and "Hint: use Data > Sort." in candidate.instruction
    assert await sel.on_group(_group(full, wins=0)) == "original"  # q: still pending
    # the candidate's own group decides, and is training data once accepted (S u N)
    assert await sel.on_group(_group(candidate, wins=2)) == "accepted"  # 0 < 0.5 < 0.8
    assert sel.current["t"] == candidate and not sel.pending
    # acc 1.0 -> harder. Removing the hint gives back the original's text: an earlier
    # version of the task, never a candidate (it would take the original's id); the
    # next harder option is proposed instead
    assert await sel.on_group(_group(candidate, wins=4)) == "original"
    harder = await sel.next_variant()
    assert harder.evaluator_name == "extra" and harder.variant_id != full.variant_id
    assert await sel.on_group(_group(harder, wins=0, n=10)) == "rejected"  # below the band
    assert sel.current["t"] == candidate
    # still too easy: nothing is left that is neither a version nor rejected
    assert await sel.on_group(_group(candidate, wins=4)) == "original"
    assert not sel.pending
    summary = await store.summary()
    assert summary["adapt_proposals"] == 2 and summary["adapt_accepted"] == 1
    decisions = await store.events("adapt_decision")
    assert [d["data"]["accepted"] for d in decisions] == [True, False]
    restored = TemplateSelector(
        {"t": TEMPLATE}, {"t": VARIANTS[0]}, band=AdaptBand(), rewriter=RuleRewriter(), store=store
    )
    restored.load_state_dict(sel.state_dict())
    assert restored.current == sel.current and restored.accuracy == sel.accuracy
    await store.close()


def test_difficulty_entry_must_name_every_variant() -> None:
    from cua_rl.errors import TaskFormatError

    with pytest.raises(TaskFormatError, match="difficulty entry of task t"):
        TaskTemplate.from_variants(VARIANTS, ["narrow", "full"])
    assert Counter(TaskTemplate.from_variants(VARIANTS).order) == Counter(
        ["narrow", "full", "extra"]
    )
