"""Stored evaluation runs for report, comparison and layout tests: task runs written
through `RunStore` as `cua-rl eval` writes them (group `<task_id>#<run>`, steps with
JPEG screenshots, a declared end on the last step of a success), without desktops
or models."""

from __future__ import annotations

import io
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from cua_rl.report.eval_report import task_run_id
from cua_rl.report.manifest.files import write_manifest
from cua_rl.store.run_store import RunStore
from cua_rl.types import Action, Step, StepTimings, TaskVariant, Trajectory, TrajectoryStatus

Scores = Mapping[str, tuple[str, Sequence[float]]]
"""task id -> (domain, the score of each run)."""


def jpeg(seed: int, size: tuple[int, int] = (64, 36)) -> bytes:
    """A small distinct JPEG screenshot (what the guest sends by default)."""
    out = io.BytesIO()
    Image.new("RGB", size, ((37 * seed) % 256, 120, (90 + 11 * seed) % 256)).save(
        out, format="JPEG", quality=90
    )
    return out.getvalue()


def variant(task_id: str, domain: str) -> TaskVariant:
    return TaskVariant(
        task_id=task_id,
        domain=domain,
        evaluator_name="default",
        instruction=f"Do {task_id}.",
        config=(),
        evaluator={"func": "exact_match"},
    )


def _steps(store: RunStore, seed: int, n_steps: int, success: bool) -> tuple[Step, ...]:
    names = [store.put_screenshot(jpeg(seed + i)) for i in range(n_steps + 1)]
    steps = []
    for i in range(n_steps):
        last = i == n_steps - 1
        actions: tuple[Action, ...] = (Action(kind="left_click", coordinate=(10 + i, 20)),)
        code = f"pyautogui.click({10 + i}, 20)"
        if last and success:
            actions, code = (Action(kind="terminate", status="success"),), ""
        steps.append(
            Step(
                index=i,
                screenshot_before=names[i],
                screenshot_after=names[i + 1],
                response=f"Action: step {i}.",
                actions=actions,
                parse_error=None,
                code=code,
                timings=StepTimings(policy_s=1.5, act_s=0.5, screenshot_s=0.2),
            )
        )
    return tuple(steps)


def build_eval_run(
    run_dir: Path,
    scores: Scores,
    *,
    n_steps: int = 2,
    setup_failed: Sequence[str] = (),
    manifest: Mapping[str, Any] | None = None,
) -> Path:
    """An evaluation run of `scores`; the tasks of `setup_failed` (also in `scores`,
    with no score) failed their setup in run 0; `manifest` is written beside."""
    store = RunStore(run_dir)
    store.save_config({"policy": {"model": "stored-model"}})
    started = time.time() - 3600
    seed = 0
    for task_id, (domain, runs) in scores.items():
        v = variant(task_id, domain)
        store.add_variant(v)
        if task_id in setup_failed:
            store.save_trajectory(
                Trajectory(
                    id=f"{task_id}-setup",
                    variant_id=v.variant_id,
                    steps=(),
                    status=TrajectoryStatus.SETUP_FAILED,
                ),
                group_id=task_run_id(task_id, 0),
                error="launch failed",
            )
            continue
        for k, score in enumerate(runs):
            seed += 10
            status = TrajectoryStatus.FINISHED if score > 0 else TrajectoryStatus.STEP_LIMIT
            store.save_trajectory(
                Trajectory(
                    id=f"{task_id}-{k}",
                    variant_id=v.variant_id,
                    steps=_steps(store, seed, n_steps, score > 0),
                    status=status,
                    score=float(score),
                    screen=(64, 36),
                ),
                group_id=task_run_id(task_id, k),
                started_at=started + seed,
            )
    store.close()
    if manifest is not None:
        write_manifest(run_dir, manifest)
    return run_dir


def manifest_of(
    model: str = "org/model-a",
    quick_id: str = "q-a",
    commit: str = "c1",
    provider: str = "docker",
    runs: int = 2,
    **agent: Any,
) -> dict[str, Any]:
    """A manifest with the keys comparisons read (the shape `build_manifest` writes)."""
    return {
        "schema": 1,
        "kind": "eval",
        "model": {
            "name": model,
            "engine": {"engine": "vllm", "vllm": "0.11.0"},
            "identity": {"quick_id": quick_id, "weights": []},
        },
        "agent": {
            "prompt_hash": "p1",
            "history_images": 3,
            "screenshot_format": "jpeg",
            "sampling": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 4096},
            **agent,
        },
        "desktops": {"provider": provider, "count": 4, "network": True, "image": {}},
        "tasks": {"source": "osworld:/data/OSWorld", "split": "osworld-verified"},
        "run": {
            "code": {"commit": commit, "dirty": False},
            "seeds": {},
            "runs": runs,
            "started_at": "2026-12-01T10:00:00+0000",
            "ended_at": None,
        },
        "config": {},
    }
