"""Critic: which steps it asks about, what each stage is shown, how answers are read."""

from __future__ import annotations

import json
from typing import Any

from cua_rl.adapt.config import CritiqueConfig
from cua_rl.adapt.critique import Critic, at_most_two_sentences
from cua_rl.errors import InferenceError
from cua_rl.inference.base import ChatResult, Choice
from cua_rl.types import StepVerdict, TaskVariant, Trajectory, TrajectoryStatus, Vote

VARIANT = TaskVariant(
    task_id="t",
    domain="os",
    evaluator_name="e",
    instruction="Save it.",
    config=(),
    evaluator={"func": "infeasible"},
)
TRAJ = Trajectory(id="tr", variant_id="t:e", steps=(), status=TrajectoryStatus.FINISHED, score=0.0)


class ScriptedCritic:
    """The model boundary: one scripted answer per stage, every prompt recorded."""

    def __init__(self, step_answer: str, trajectory_answer: str, fail: bool = False) -> None:
        self.answers = {"step": step_answer, "trajectory": trajectory_answer}
        self.fail = fail
        self.asked: list[str] = []

    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        if self.fail:
            raise InferenceError("replica down")
        text = messages[0]["content"]
        self.asked.append(text)
        stage = "trajectory" if "JSON list of summaries" in text else "step"
        return ChatResult((Choice(0, self.answers[stage], (), (), "stop"),), 0)

    def end_session(self, key: str) -> None:
        pass


def verdict(index: int, *scores: int) -> StepVerdict:
    votes = tuple(
        Vote(score=s, text=f"step {index} vote {i} \\boxed{{{s}}}")  # type: ignore[arg-type]
        for i, s in enumerate(scores)
    )
    return StepVerdict("tr", index, votes)


async def test_only_flagged_steps_are_asked_with_all_votes_and_scores() -> None:
    model = ScriptedCritic(
        "\\boxed{Clicked the wrong icon.}",
        "Both steps misread the UI. \\boxed{The agent misreads the toolbar.}",
    )
    critic = Critic(model)
    verdicts = [verdict(0, 1, 1, 1), verdict(1, 1, -1, 0), verdict(2, -1, -1, -1)]
    summary = await critic.summarize(VARIANT, TRAJ, verdicts)
    assert summary == "The agent misreads the toolbar."
    step_prompts, trajectory_prompt = model.asked[:-1], model.asked[-1]
    assert len(step_prompts) == 2  # step 0 has no -1 vote
    first = next(p for p in step_prompts if "step 2 " in p)
    assert "Judgement 1 (score 1):\nstep 1 vote 0 \\boxed{1}" in first
    assert "Judgement 2 (score -1):\nstep 1 vote 1 \\boxed{-1}" in first
    assert "Judgement 3 (score 0):\nstep 1 vote 2 \\boxed{0}" in first
    listed = trajectory_prompt[trajectory_prompt.index("[") : trajectory_prompt.index("]") + 1]
    assert json.loads(listed) == ["Clicked the wrong icon."] * 2
    assert critic.counts == {"step_summaries": 2, "trajectory_summaries": 1}


async def test_unboxed_answers_are_counted_and_skipped() -> None:
    critic = Critic(ScriptedCritic("no box here", "\\boxed{x}"))
    assert await critic.summarize(VARIANT, TRAJ, [verdict(0, -1)]) is None
    assert critic.counts["critique_unusable"] == 1 and critic.counts["trajectory_summaries"] == 0


async def test_nothing_flagged_asks_nothing_and_failures_are_counted() -> None:
    model = ScriptedCritic("\\boxed{a}", "\\boxed{b}")
    assert await Critic(model).summarize(VARIANT, TRAJ, [verdict(0, 1, 0)]) is None
    assert model.asked == []
    down = Critic(ScriptedCritic("", "", fail=True))
    assert await down.summarize(VARIANT, TRAJ, [verdict(0, -1)]) is None
    assert down.counts["critique_failures"] == 1


async def test_at_most_the_latest_flagged_steps_are_asked() -> None:
    model = ScriptedCritic("\\boxed{s}", "\\boxed{t}")
    critic = Critic(model, CritiqueConfig(max_flagged_steps=2))
    await critic.summarize(VARIANT, TRAJ, [verdict(i, -1) for i in range(5)])
    asked_steps = sorted(p.split("step ", 1)[1].split(" ", 1)[0] for p in model.asked[:-1])
    assert asked_steps == ["4", "5"]


def test_answers_are_cut_to_two_sentences() -> None:
    assert at_most_two_sentences("One. Two! Three? Four.") == "One. Two!"
