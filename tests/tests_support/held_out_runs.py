"""A stored rollout run for reward-model accuracy tests, written through `RunStore`
as a real rollout writes it: two task variants, scored and aborted trajectories,
screenshots, and a marker `[tid/i]` in each step's thinking that only that step's
reward-model prompt contains (tests_support/fake_answers.votes)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cua_rl.store.run_store import RunStore
from cua_rl.types import Action, Step, Trajectory, TrajectoryStatus
from tests_support.viewer_runs import tiny_png, variant

SCREEN = (320, 240)


@dataclass(frozen=True)
class Planned:
    tid: str
    task: str
    steps: int
    score: float | None
    """None: aborted (no outcome)."""


PLAN = (
    Planned("ta1", "a", 3, 1.0),
    Planned("ta2", "a", 2, 0.0),
    Planned("tb1", "b", 2, 1.0),
    Planned("tb2", "b", 1, None),
)
"""The run of the hand-computed tests: ta1 and tb1 succeed, ta2 fails, tb2 aborted."""


def marker(tid: str, index: int) -> str:
    return f"[{tid}/{index}]"


def response(tid: str, index: int) -> str:
    return (
        f"<think>Looking at the screen {marker(tid, index)}.</think>\n"
        'Action: Click the button.\n<tool_call>{"name": "computer_use", '
        '"arguments": {"action": "left_click", "coordinate": [10, 20]}}</tool_call>'
    )


def build_held_out_run(run_dir: Path, plan: tuple[Planned, ...] = PLAN) -> RunStore:
    """Write `plan` into a new store at `run_dir` (returned open: callers may add
    labels, then close it)."""
    store = RunStore(run_dir)
    store.save_config({"episode": {"min_pixels": 4096, "max_pixels": 65536}})
    for task in sorted({p.task for p in plan}):
        store.add_variant(variant(task))
    for k, p in enumerate(plan):
        names = [store.put_screenshot(tiny_png(10 * k + i, SCREEN)) for i in range(p.steps + 1)]
        steps = tuple(
            Step(
                index=i,
                screenshot_before=names[i],
                screenshot_after=names[i + 1],
                response=response(p.tid, i),
                actions=(Action(kind="left_click", coordinate=(10, 20)),),
                parse_error=None,
                code="pyautogui.click(10, 20)",
                token_ids=(1, 2),
                logprobs=(-0.1, -0.2),
            )
            for i in range(p.steps)
        )
        status = TrajectoryStatus.FINISHED if p.score is not None else TrajectoryStatus.ABORTED
        store.save_trajectory(
            Trajectory(
                id=p.tid,
                variant_id=f"{p.task}:default",
                steps=steps,
                status=status,
                score=p.score,
                screen=SCREEN,
            ),
            group_id=f"g-{p.task}",
        )
    return store
