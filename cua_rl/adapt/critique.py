"""Critique summaries: what the reward model saw going wrong in a task group.

For every step with at least one -1 vote, a step summary (at most 2 sentences)
is written from ALL the reward model's responses for that step, each shown with
its extracted score (so the critic weighs the negative votes against the others);
then one trajectory summary, from the JSON list of the step summaries, names the
recurring failure modes once. These summaries are what the
rewriter reads when it adds hints (easier) or removes them (harder). Answers
are read from \\boxed{...}; an unusable answer is skipped and counted, never
fatal: adaptation then works from fewer summaries.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter

from cua_rl.adapt.config import CritiqueConfig
from cua_rl.agent.messages import boxed_answer, critique_step_messages, critique_trajectory_messages
from cua_rl.errors import InferenceError
from cua_rl.inference.base import ChatBackend
from cua_rl.seeds import SeedSequence
from cua_rl.types import StepVerdict, TaskVariant, Trajectory

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def at_most_two_sentences(text: str) -> str:
    parts = [p for p in _SENTENCE_END.split(text.strip()) if p]
    return " ".join(parts[:2])


class Critic:
    """Writes step and trajectory summaries through a model pool (default: the PRM's)."""

    def __init__(
        self, model: ChatBackend, cfg: CritiqueConfig | None = None, seed: int | None = None
    ) -> None:
        self.model = model
        self.cfg = cfg or CritiqueConfig()
        self.counts: Counter[str] = Counter()
        self._seeds = SeedSequence(seed, "critique")
        """Request seeds from the run's `seed` (None: unseeded)."""

    async def _ask(self, messages: list[dict]) -> str | None:
        try:
            result = await self.model.chat(
                messages,
                temperature=self.cfg.temperature,
                max_tokens=self.cfg.max_tokens,
                seed=self._seeds.next(),
            )
        except InferenceError:
            self.counts["critique_failures"] += 1
            return None
        answer = boxed_answer(result.choices[0].text)
        if not answer:
            self.counts["critique_unusable"] += 1
            return None
        return at_most_two_sentences(answer)

    async def summarize(
        self, variant: TaskVariant, trajectory: Trajectory, verdicts: list[StepVerdict]
    ) -> str | None:
        """One trajectory's summary, or None when nothing was flagged or usable.

        `variant` is not shown to the critic (the method's critique prompts carry only
        the votes and summaries); it stays in the signature for the callers."""
        flagged = [v for v in verdicts if any(vote.score == -1 for vote in v.votes)]
        flagged = flagged[-self.cfg.max_flagged_steps :]
        if not flagged:
            return None
        step_summaries = await asyncio.gather(
            *(
                self._ask(
                    critique_step_messages(
                        v.step_index,
                        [vote.text for vote in v.votes],
                        [vote.score for vote in v.votes],
                    )
                )
                for v in flagged
            )
        )
        usable = [s for s in step_summaries if s]
        if not usable:
            return None
        self.counts["step_summaries"] += len(usable)
        summary = await self._ask(critique_trajectory_messages(usable))
        if summary:
            self.counts["trajectory_summaries"] += 1
        return summary

    async def summarize_group(
        self,
        variant: TaskVariant,
        trajectories: list[Trajectory],
        verdicts: dict[str, list[StepVerdict]],
    ) -> list[str]:
        summaries = await asyncio.gather(
            *(self.summarize(variant, t, verdicts.get(t.id, [])) for t in trajectories)
        )
        return [s for s in summaries if s]
