"""Run stores for viewer tests, written through `RunStore` as a real run would."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, ImageDraw

from cua_rl.store.run_store import RunStore
from cua_rl.types import Action, Step, StepVerdict, TaskVariant, Trajectory, TrajectoryStatus, Vote

SCREEN = (1280, 720)
ACTIONS = (
    Action(kind="left_click", coordinate=(320, 180)),
    Action(kind="type", text="hello world"),
    Action(kind="left_click_drag", start=(100, 600), coordinate=(900, 300)),
    Action(kind="key", keys=("ctrl", "s")),
)
"""Action of step i is ACTIONS[i % 4]."""


def tiny_png(seed: int, size: tuple[int, int] = SCREEN) -> bytes:
    """A distinct, recognisable screenshot: a coloured desktop with a window."""
    img = Image.new("RGB", size, ((40 * seed) % 256, 90, (200 - 30 * seed) % 256))
    draw = ImageDraw.Draw(img)
    w, h = size
    draw.rectangle((w // 10, h // 10, w * 7 // 10, h * 7 // 10), fill=(245, 245, 245))
    draw.rectangle((w // 10, h // 10, w * 7 // 10, h // 10 + 24), fill=(60, 60, 80))
    draw.text((w // 10 + 8, h // 10 + 6), f"screen {seed}", fill=(255, 255, 255))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def variant(task_id: str, evaluator: str = "default", revision: int = 0) -> TaskVariant:
    return TaskVariant(
        task_id=task_id,
        domain="os",
        evaluator_name=evaluator,
        instruction=f"Do {task_id} with {evaluator}",
        config=(),
        evaluator={"func": "exact_match"},
        revision=revision,
    )


@dataclass
class BuiltRun:
    run_dir: Path
    trajectory_ids: list[str] = field(default_factory=list)
    """In finishing order (oldest first)."""
    shots: dict[str, list[str]] = field(default_factory=dict)
    """trajectory id -> screenshot-before name of each step."""


def vote_scores(t: int, i: int) -> tuple[int, int, int]:
    return ((1, 1, -1), (-1, -1, 0), (1, 1, 1))[(t + i) % 3]


def build_run(
    run_dir: Path, n_trajectories: int = 3, n_steps: int = 4, policy_version: int = 0
) -> BuiltRun:
    """`n_trajectories` of task t1 in one group (the last one fails), each with
    `n_steps` steps cycling through ACTIONS, 3 votes per step, screenshots, and an
    adaptation proposal + decision for t1."""
    store = RunStore(run_dir)
    store.save_config({"train": {"lam": 1.0}})
    for v in (variant("t1"), variant("t1", "harder", 1), variant("t2")):
        store.add_variant(v)
    built = BuiltRun(run_dir)
    now = time.time() - 600
    for t in range(n_trajectories):
        tid = f"traj-{t}"
        names = [store.put_screenshot(tiny_png(10 * t + i)) for i in range(n_steps + 1)]
        steps = tuple(
            Step(
                index=i,
                screenshot_before=names[i],
                screenshot_after=names[i + 1],
                response=f"<think>step {i} of {tid}</think> {ACTIONS[i % 4].kind}",
                actions=(ACTIONS[i % 4],),
                parse_error=None,
                code=f"pyautogui.step({i})",
                token_ids=(1, 2, 3),
                logprobs=(-0.1, -0.2, -0.3),
                policy_version=policy_version + (i >= 2),
            )
            for i in range(n_steps)
        )
        score = 0.0 if t == n_trajectories - 1 else 1.0
        store.save_trajectory(
            Trajectory(
                id=tid,
                variant_id="t1:default",
                steps=steps,
                status=TrajectoryStatus.FINISHED,
                score=score,
                policy_version_at_start=policy_version,
                screen=SCREEN,
            ),
            group_id="g1",
            started_at=now + 60 * t,
        )
        # finished_at is the store's clock: spread it so paging order is stable.
        store._db.execute(
            "UPDATE trajectories SET finished_at = ? WHERE trajectory_id = ?",
            (now + 60 * t + 30, tid),
        )
        for i in range(n_steps):
            store.save_verdict(
                StepVerdict(
                    tid,
                    i,
                    tuple(
                        Vote(s, f"reasoning {j} on step {i} of {tid} \\boxed{{{s}}}")
                        for j, s in enumerate(vote_scores(t, i))
                    ),
                    prm_version=2,
                )
            )
        built.trajectory_ids.append(tid)
        built.shots[tid] = names[:n_steps]
    store.add_event(
        "adapt_proposal",
        "t1",
        {
            "direction": "harder",
            "acc_parent": 0.9,
            "candidate": "t1:harder@1",
            "instruction": "Do t1 with harder",
            "summaries": ["the agent found the menu fast"],
        },
    )
    store.add_event(
        "adapt_decision",
        "t1",
        {
            "accepted": True,
            "direction": "harder",
            "parent": "t1:default",
            "candidate": "t1:harder@1",
            "acc_parent": 0.9,
            "acc_candidate": 0.5,
            "summaries": ["the agent found the menu fast"],
        },
    )
    store.incr("policy_updates", 2)
    store.close()
    return built


def add_bulk_trajectories(run_dir: Path, n: int) -> None:
    """`n` step-less trajectories in one transaction (a large run's list pages)."""
    store = RunStore(run_dir)
    rows = [
        (
            f"bulk-{i:05d}",
            store.run_id,
            f"t{i % 7}:default",
            f"b{i // 8}",
            "finished",
            float(i % 3 == 0),
            1 if i % 3 == 0 else -1,
            i // 1000,
            0,
            *SCREEN,
            "",
            1000.0 + i,
            1000.5 + i,
        )
        for i in range(n)
    ]
    store._db.execute("BEGIN")
    store._db.executemany(
        "INSERT INTO trajectories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
    )
    store._db.execute("COMMIT")
    store.close()


SETUP_REASON = "setup step 'download' failed: https://example.invalid/a.xlsx is not cached"
ABORT_REASON = "guest did not answer /screenshot within 30 s"


def add_failed_trajectories(run_dir: Path, group_id: str = "g1") -> list[str]:
    """Two step-less trajectories of task t1's group: one whose setup failed and one
    aborted before its first step, each with its reason in the store."""
    store = RunStore(run_dir)
    out = []
    for tid, status, reason in (
        ("setup-failed", TrajectoryStatus.SETUP_FAILED, SETUP_REASON),
        ("aborted-0", TrajectoryStatus.ABORTED, ABORT_REASON),
    ):
        store.save_trajectory(
            Trajectory(
                id=tid, variant_id="t1:default", steps=(), status=status, score=None, screen=SCREEN
            ),
            group_id=group_id,
            error=reason,
        )
        out.append(tid)
    store.close()
    return out


def write_recording(run_dir: Path, trajectory_id: str, seconds: int = 1) -> Path:
    """`RUN_DIR/recordings/<trajectory_id>.mp4` as the rollout store writes it: a
    real MP4 (ffmpeg's test pattern, H.264 if available else MPEG-4 part 2)."""
    import shutil
    import subprocess

    out = run_dir / "recordings" / f"{trajectory_id}.mp4"
    out.parent.mkdir(parents=True, exist_ok=True)
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise RuntimeError("write_recording needs ffmpeg: apt install ffmpeg")
    subprocess.run(
        [
            ffmpeg,
            "-loglevel",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            f"testsrc=size=320x180:rate=5:duration={seconds}",
            "-pix_fmt",
            "yuv420p",
            "-movflags",
            "+faststart",
            str(out),
        ],
        check=True,
        timeout=60,
    )
    return out


def build_training_run(
    run_dir: Path, n_trajectories: int = 240, n_steps: int = 3, seed: int = 0
) -> Path:
    """A run shaped like training (success rising from ~20% to ~70%, votes that
    mostly agree with the outcome, the policy version advancing every 16
    trajectories with some lag): enough points for the learning-curve plots to
    be judged by eye. Steps carry no screenshots the plots do not need."""
    import random

    rng = random.Random(seed)
    store = RunStore(run_dir)
    store.save_config({"train": {"lam": 1.0}})
    store.add_variant(variant("t1"))
    shot = store.put_screenshot(tiny_png(0, (64, 36)))
    t0 = time.time() - 3600
    rows = []
    for t in range(n_trajectories):
        p = 0.2 + 0.5 * t / max(1, n_trajectories - 1)
        score = 1.0 if rng.random() < p else 0.0
        outcome = 1 if score > 0 else -1
        version = max(0, t // 16 - rng.choice((0, 0, 1, 2)))
        steps = tuple(
            Step(
                index=i,
                screenshot_before=shot,
                screenshot_after=shot,
                response="r",
                actions=(ACTIONS[0],),
                parse_error=None,
                code="",
                token_ids=(1,),
                logprobs=(-0.1,),
                policy_version=version,
            )
            for i in range(n_steps)
        )
        tid = f"run-{t:04d}"
        store.save_trajectory(
            Trajectory(
                id=tid,
                variant_id="t1:default",
                steps=steps,
                status=TrajectoryStatus.FINISHED,
                score=score,
                policy_version_at_start=version,
                screen=SCREEN,
            ),
            group_id=f"g{t // 8}",
            started_at=t0 + 12 * t,
        )
        rows.append((t0 + 12 * t + 20 + rng.random() * 10, tid))
        for i in range(n_steps):
            store.save_verdict(
                StepVerdict(
                    tid,
                    i,
                    tuple(
                        Vote(outcome if rng.random() < 0.75 else -outcome, "v") for _ in range(3)
                    ),
                    prm_version=1,
                )
            )
    store._db.executemany("UPDATE trajectories SET finished_at = ? WHERE trajectory_id = ?", rows)
    store.close()
    return run_dir
