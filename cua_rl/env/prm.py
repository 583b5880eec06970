"""The per-step reward model of an environment: the project's streaming judge
(cua_rl/reward/judge.py, the two-image PRM with m votes) asked about each step.

A step's verdict is awaited inside `step()`, so it lands in that step's `info`
(and, with `prm_weight`, in its reward). A judge request that fails leaves the
step without a verdict (`info["prm"]["error"]`), as in training: no vote is
invented. Verdicts are also kept in a run store (SQLite) in a temporary folder,
because the judge records every verdict and failure there.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from cua_rl.agent.images import encode_image
from cua_rl.env.actions import EnvAction
from cua_rl.env.config import EnvConfig
from cua_rl.inference.pool import InferencePool
from cua_rl.reward.judge import StreamingJudge
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import Step, StepVerdict, TaskVariant


class StepJudge:
    """Judges one environment's steps through a reward-model pool."""

    def __init__(self, cfg: EnvConfig) -> None:
        self.cfg = cfg
        self.folder = Path(tempfile.mkdtemp(prefix="cua-rl-env-prm-"))
        # Bounded below the step's deadline: a judge that is down costs a step its
        # verdict (reported), not the step itself.
        self.pool = InferencePool(cfg.judge_urls, request_timeout_s=60.0, wait_for_replica_s=30.0)
        self.store = AsyncRunStore.open(self.folder)
        self.judge = StreamingJudge(self.pool, self.store, cfg.judge)

    async def verdict(
        self,
        episode_id: str,
        variant: TaskVariant,
        index: int,
        action: EnvAction,
        prior: list[str],
        before: bytes,
        after: bytes,
    ) -> tuple[StepVerdict | None, dict[str, Any]]:
        """The verdict of one step (None when the request failed) and its `info` entry."""
        failures = self.judge.counts["judge_failures"]
        step = Step(
            index=index,
            screenshot_before="",
            response=action.text,
            actions=action.actions,
            parse_error=action.error,
            code=action.code,
            screenshot_after="",
        )
        before_url, after_url = await asyncio.gather(  # resizing is CPU work: off the loop
            asyncio.to_thread(encode_image, before), asyncio.to_thread(encode_image, after)
        )
        self.judge.submit(episode_id, variant, step, prior, before_url, after_url)
        verdicts = await self.judge.collect(episode_id)
        if not verdicts:
            failed = self.judge.counts["judge_failures"] > failures
            return None, {
                "votes": [],
                "mean": None,
                "error": "judge request failed (see the log)" if failed else "no verdict",
            }
        verdict = verdicts[-1]
        return verdict, {
            "votes": [v.score for v in verdict.votes],
            "mean": verdict.mean_score,
            "texts": [v.text for v in verdict.votes],
        }

    async def close(self) -> None:
        await self.judge.close()
        await self.pool.close()
        await self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)
