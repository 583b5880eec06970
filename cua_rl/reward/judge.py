"""The streaming process reward model: every step is judged while its episode
goes on.

`submit` starts a judge request for one step and returns at once; `collect`
waits for all of one trajectory's verdicts. Each step yields at most one
StepVerdict (m votes from one request with `n = m`), stored as soon as it is in.
A request that fails after the pool's retries, or whose answer is unusable
(`ModelResponseError`: not JSON, no choices, missing logprobs), leaves its step
without a verdict and is counted (`judge_failures`, in memory and in the run
store, where a `judge_failure` event keeps its reason) and logged: the step's
reward then falls back to the outcome alone, and no vote is invented (an
invented unparseable vote would teach the reward model something it never said).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from cua_rl import spans
from cua_rl.agent import parse_prm_vote, prm_messages
from cua_rl.errors import InferenceError
from cua_rl.inference.base import ChatBackend
from cua_rl.reward.config import JudgeConfig
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.run_events import JUDGE_FAILURE
from cua_rl.types import Step, StepVerdict, TaskVariant, Vote

log = logging.getLogger(__name__)


class StreamingJudge:
    """Judges steps through a reward-model pool with bounded concurrency."""

    def __init__(self, prm: ChatBackend, store: AsyncRunStore, cfg: JudgeConfig) -> None:
        self.prm = prm
        self.store = store
        self.cfg = cfg
        self._pending: dict[str, set[asyncio.Task[StepVerdict | None]]] = {}
        self._slots = asyncio.Semaphore(cfg.max_in_flight)
        self.counts: Counter[str] = Counter()

    @property
    def in_flight(self) -> int:
        return sum(len(tasks) for tasks in self._pending.values())

    def submit(
        self,
        trajectory_id: str,
        variant: TaskVariant,
        step: Step,
        prior_actions: list[str],
        before_url: str,
        after_url: str,
        *,
        seed: int | None = None,
    ) -> None:
        """Start judging `step`; `seed` seeds its request (None: unseeded)."""
        task = asyncio.create_task(
            self._judge(trajectory_id, variant, step, prior_actions, before_url, after_url, seed),
            name=f"judge:{trajectory_id}:{step.index}",
        )
        self._pending.setdefault(trajectory_id, set()).add(task)

    async def _judge(
        self,
        trajectory_id: str,
        variant: TaskVariant,
        step: Step,
        prior_actions: list[str],
        before_url: str,
        after_url: str,
        seed: int | None,
    ) -> StepVerdict | None:
        messages = prm_messages(
            variant.instruction,
            prior_actions,
            before_url,
            step.response,
            after_url,
            parse_error=step.parse_error.message if step.parse_error else None,
        )
        async with self._slots:
            try:
                with spans.span("prm_call", tid=trajectory_id, step=step.index):
                    result = await self.prm.chat(
                        messages,
                        n=self.cfg.votes,
                        temperature=self.cfg.temperature,
                        max_tokens=self.cfg.max_tokens,
                        seed=seed,
                    )
            except InferenceError as exc:
                await self._failed(trajectory_id, step.index, exc)
                return None
        if not result.choices:  # the HTTP client checks this; other backends may not
            await self._failed(trajectory_id, step.index, "no votes in the answer")
            return None
        votes = tuple(
            Vote(
                score=parse_prm_vote(c.text),
                text=c.text,
                token_ids=c.token_ids,
                logprobs=c.logprobs,
            )
            for c in result.choices
        )
        self.counts["verdicts"] += 1
        self.counts["unparseable_votes"] += sum(1 for v in votes if v.score == 0)
        verdict = StepVerdict(
            trajectory_id, step.index, votes, prm_version=result.model_version or 0
        )
        await self.store.save_verdict(verdict)
        return verdict

    async def _failed(self, trajectory_id: str, index: int, reason: object) -> None:
        self.counts["judge_failures"] += 1
        log.warning("no verdict for step %d of %s: %s", index, trajectory_id, reason)
        await self.store.incr("judge_failures")
        await self.store.add_event(
            JUDGE_FAILURE, trajectory_id, {"step_index": index, "reason": str(reason)}
        )

    async def collect(self, trajectory_id: str) -> list[StepVerdict]:
        """All verdicts of a trajectory, in step order, once every one is in."""
        tasks = self._pending.pop(trajectory_id, set())
        results = await asyncio.gather(*tasks)
        return sorted((v for v in results if v is not None), key=lambda v: v.step_index)

    def discard(self, trajectory_id: str) -> None:
        """Stop judging an aborted trajectory: its steps are never trained on."""
        for task in self._pending.pop(trajectory_id, set()):
            task.cancel()

    async def close(self) -> None:
        tasks = [t for ts in self._pending.values() for t in ts]
        self._pending.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
