from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cua_rl.adapt.acceptance import AdaptBand
from cua_rl.adapt.rewriter import ModelRewriter, RewriterConfig, RuleRewriter, TaskTemplate
from cua_rl.adapt.selector import TemplateSelector
from cua_rl.inference.base import ChatResult, Choice
from cua_rl.rollout.fleet import FinishedGroup
from cua_rl.rollout.scheduler import TaskGroup
from cua_rl.store.run_store import AsyncRunStore
from cua_rl.types import TaskVariant, Trajectory, TrajectoryStatus


def _v(name: str, instruction: str) -> TaskVariant:
    return TaskVariant(task_id="t", domain="os", evaluator_name=name, instruction=instruction,
                       config=(), evaluator={"func": "infeasible"})


VARIANTS = [_v("narrow", "Sort rows 1-5."), _v("full", "Sort all rows."),
            _v("extra", "Sort all rows and bold the header.")]
TEMPLATE = TaskTemplate.from_variants(
    VARIANTS, {"order": ["narrow", "full", "extra"],
               "hints": {"full": ["Hint: use Data > Sort.", "Hint: select column A first."]}})


async def test_rule_rewriter_walks_hints_then_variants() -> None:
    rw = RuleRewriter()
    full = TEMPLATE.variants["full"]
    easier1 = await rw.propose(full, TEMPLATE, [], "easier")
    assert easier1.instruction == "Sort all rows.\nHint: use Data > Sort."
    easier2 = await rw.propose(easier1, TEMPLATE, [], "easier")
    assert easier2.instruction.endswith("Hint: select column A first.")
    easier3 = await rw.propose(easier2, TEMPLATE, [], "easier")
    assert easier3.evaluator_name == "narrow"  # hints exhausted: the easier variant
    assert await rw.propose(easier3, TEMPLATE, [], "easier") is None
    harder = await rw.propose(easier2, TEMPLATE, [], "harder")
    assert harder.instruction == easier1.instruction  # the last hint removed
    assert (await rw.propose(full, TEMPLATE, [], "harder")).evaluator_name == "extra"
    assert await rw.propose(TEMPLATE.variants["extra"], TEMPLATE, [], "harder") is None


class ScriptedModel:
    """The model boundary: answers are scripted so validation can be checked."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.asked: list[list[dict[str, Any]]] = []

    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.asked.append(messages)
        return ChatResult(tuple(Choice(i, a, (), (), "stop") for i, a in enumerate(self.answers)),
                          0)

    def end_session(self, key: str) -> None:
        pass


@pytest.mark.parametrize(("answers", "expected"), [
    (['{"full": "Sort all rows. Hint: use Data > Sort.", "extra": "x"}',  # extra key
      '{"bogus": "Sort."}',                                               # unknown name
      '{"full": "   "}'], None),                                            # empty instruction
    (['Sure! Here it is: {"narrow": "Sort rows 1-5 only."} Hope it helps.'], "narrow"),
    (['not json', '{"full": "Sort all rows. Use Data > Sort."}'], "full"),
    (['{"full": "Sort all rows."}'], None),                               # unchanged
])
async def test_model_rewriter_keeps_first_valid(answers: list[str], expected: str | None) -> None:
    model = ScriptedModel(answers)
    rw = ModelRewriter(model, RewriterConfig(type="model", candidates=len(answers)))
    out = await rw.propose(TEMPLATE.variants["full"], TEMPLATE, ["clicked the wrong menu"],
                           "easier")
    assert (out.evaluator_name if out else None) == expected
    assert "clicked the wrong menu" in model.asked[0][0]["content"]


def _group(variant: TaskVariant, wins: int, n: int = 4) -> FinishedGroup:
    trajs = {i: Trajectory(id=f"{variant.variant_id}-{i}", variant_id=variant.variant_id, steps=(),
                           status=TrajectoryStatus.FINISHED, score=1.0 if i < wins else 0.0)
             for i in range(n)}
    return FinishedGroup(TaskGroup("g", variant, n, trajs))


async def test_selector_proposes_then_accepts_or_rejects(tmp_path: Path) -> None:
    store = AsyncRunStore.open(tmp_path)
    sel = TemplateSelector({"t": TEMPLATE}, {"t": TEMPLATE.variants["full"]}, band=AdaptBand(),
                           rewriter=RuleRewriter(), store=store)
    assert (await sel.next_variant()).evaluator_name == "full"
    await sel.on_group(_group(TEMPLATE.variants["full"], wins=0))      # acc 0 -> easier
    candidate = await sel.next_variant()                                # joins the next round
    assert candidate.revision == 1 and "Hint: use Data > Sort." in candidate.instruction
    await sel.on_group(_group(TEMPLATE.variants["full"], wins=0))      # q again: still pending
    await sel.on_group(_group(candidate, wins=2))                       # 0 < 0.5 < 0.8: accept
    assert sel.current["t"] == candidate and not sel.pending
    # acc 1.0 -> harder: remove the hint; 0.1 overshoots below the band -> rejected
    await sel.on_group(_group(candidate, wins=4))
    harder = await sel.next_variant()
    assert harder.instruction == "Sort all rows."
    await sel.on_group(_group(harder, wins=0, n=10))
    assert sel.current["t"] == candidate
    summary = await store.call(store.sync.summary)
    assert summary["adapt_proposals"] == 2 and summary["adapt_accepted"] == 1
    decisions = await store.call(store.sync.events, "adapt_decision")
    assert [d["data"]["accepted"] for d in decisions] == [True, False]
    restored = TemplateSelector({"t": TEMPLATE}, {"t": VARIANTS[0]}, band=AdaptBand(),
                                rewriter=RuleRewriter(), store=store)
    restored.load_state_dict(sel.state_dict())
    assert restored.current == sel.current and restored.accuracy == sel.accuracy
    await store.close()


def test_difficulty_entry_must_name_every_variant() -> None:
    from cua_rl.errors import TaskFormatError

    with pytest.raises(TaskFormatError, match="difficulty entry of task t"):
        TaskTemplate.from_variants(VARIANTS, ["narrow", "full"])
    assert Counter(TaskTemplate.from_variants(VARIANTS).order) == Counter(["narrow", "full",
                                                                           "extra"])
