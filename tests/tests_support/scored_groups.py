"""Finished task groups as a fleet would hand them to the training loop, for tests of
what the loop does with groups (routing, batches) without desktops or models."""

from __future__ import annotations

import io

from PIL import Image

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


def scored_group(
    gid: str, variant: TaskVariant, screen: str, votes: list[int], wins: int = 0
) -> GroupRecord:
    """One trajectory per vote value, two steps each; all fail unless `wins`."""
    trajs, verdicts = [], {}
    for k, vote in enumerate(votes):
        tid = f"{gid}-{k}"
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
                logprobs=(-0.1, -0.2, -0.3),
            )
            for i in range(2)
        )
        trajs.append(
            Trajectory(
                tid,
                variant.variant_id,
                steps,
                TrajectoryStatus.FINISHED,
                score=1.0 if k < wins else 0.0,
            )
        )
        # votes that differ within a step give the reward model something to learn
        votes_of_step = tuple(Vote(v, "ok", (8,), (-0.5,)) for v in (vote, -vote, vote))
        verdicts[tid] = tuple(StepVerdict(tid, i, votes_of_step) for i in range(2))
    return GroupRecord(gid, variant, tuple(trajs), verdicts)


async def white_screen(store: AsyncRunStore) -> str:
    """A stored screenshot for every step (its hash)."""
    png = io.BytesIO()
    Image.new("RGB", (64, 48), "white").save(png, "PNG")
    return await store.put_screenshot(png.getvalue())
