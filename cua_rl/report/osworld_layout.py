"""Our evaluation in OSWorld's results layout (`cua_rl.tasks.osworld_results`), so
OSWorld's own result scripts, viewers of published trajectories and leaderboard
submissions can read it:

    osworld-results/run-<k>/pyautogui/screenshot/<model>/<domain>/<task_id>/

one result_dir per run index; inside, as OSWorld's `lib_run_single.py` writes them:
`result.txt` (the score and a newline), `traj.jsonl` (one line per executed action:
the pyautogui code, or `DONE`/`FAIL` for a declared end, with the model's response)
and `step_<n>_<timestamp>.png` (the screen after step n), and `recording.mp4`
where the episode was recorded. `cua-rl.json` beside them names the trajectory
(and lets a later write skip the folder).

The store keeps no clock per step: a step's timestamp is the trajectory's start
plus the time its earlier steps took. Screenshots the agent saw as JPEG are
written as PNG (OSWorld's format) of those same pixels. A task run without a score
(setup failed, unsupported, not run) gets no folder, as in OSWorld, whose
show_result.py counts only folders with a result.txt.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from cua_rl.agent.pyautogui_code import terminal_status
from cua_rl.store.run_store import RunStore
from cua_rl.tasks.osworld_results import RECORDING_FILE, RESULT_FILE, TRAJ_FILE
from cua_rl.types import Step

LAYOUT_DIR = "osworld-results"
ACTION_SPACE = "pyautogui"
OBSERVATION_TYPE = "screenshot"
MARK_FILE = "cua-rl.json"
TIMESTAMP = "%Y%m%d@%H%M%S"
RECORDINGS_DIR = "recordings"


def model_folder_name(model: str) -> str:
    """The `<model>` folder: the checkpoint folder's or hub id's last part, with only
    characters safe in a path."""
    last = model.rstrip("/").rsplit("/", 1)[-1] or "model"
    return re.sub(r"[^A-Za-z0-9._-]", "_", last)


@dataclass
class LayoutResult:
    root: Path
    written: int = 0
    kept: int = 0
    """Task folders already there for the same trajectory (not written again)."""
    missing_screenshots: int = 0
    folders: list[Path] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.root),
            "written": self.written,
            "kept": self.kept,
            "missing_screenshots": self.missing_screenshots,
        }


def _png(data: bytes) -> bytes:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return data
    out = io.BytesIO()
    with Image.open(io.BytesIO(data)) as img:
        img.save(out, format="PNG", compress_level=1)
    return out.getvalue()


def _actions(step: Step) -> list[str]:
    """What OSWorld's loop would have executed for this step, in order."""
    out = [step.code] if step.code else []
    status = terminal_status(step.actions)
    if status is not None:
        out.append("DONE" if status == "success" else "FAIL")
    return out or [""]


def _write_example(
    store: RunStore,
    trajectory_id: str,
    score: float,
    started_at: float,
    folder: Path,
    result: LayoutResult,
) -> None:
    """One task folder, built beside its place and renamed into it."""
    traj = store.load_trajectory(trajectory_id)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    clock = started_at or time.time()
    lines = []
    for step in traj.steps:
        t = step.timings
        clock += t.policy_s + t.act_s + t.screenshot_s
        stamp = time.strftime(TIMESTAMP, time.localtime(clock))
        shot = f"step_{step.index + 1}_{stamp}.png"
        source = store.screenshot_path(step.screenshot_after)
        if source.is_file():
            (tmp / shot).write_bytes(_png(source.read_bytes()))
        else:  # deleted by retention, or never written
            result.missing_screenshots += 1
        actions = _actions(step)
        for i, action in enumerate(actions):
            done = i == len(actions) - 1 and action in ("DONE", "FAIL")
            lines.append(
                json.dumps(
                    {
                        "step_num": step.index + 1,
                        "action_timestamp": stamp,
                        "action": action,
                        "response": step.response,
                        "reward": 0,
                        "done": done,
                        "info": {},
                        "screenshot_file": shot,
                    },
                    ensure_ascii=False,
                )
            )
    (tmp / TRAJ_FILE).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    (tmp / RESULT_FILE).write_text(f"{float(score)}\n", encoding="utf-8")
    recording = store.run_dir / RECORDINGS_DIR / f"{trajectory_id}.mp4"
    if recording.is_file():
        shutil.copyfile(recording, tmp / RECORDING_FILE)
    (tmp / MARK_FILE).write_text(
        json.dumps({"trajectory_id": trajectory_id, "run_dir": str(store.run_dir)}) + "\n"
    )
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def _written_for(folder: Path) -> str | None:
    try:
        return json.loads((folder / MARK_FILE).read_text()).get("trajectory_id")
    except (OSError, ValueError, AttributeError):
        return None


def write_osworld_results(
    store: RunStore, report: Mapping[str, Any], out: Path, model: str
) -> LayoutResult:
    """Every scored task run of `report` (from `store`) under `out` (see the module
    docstring); folders already written for the same trajectory are kept."""
    started = {r["trajectory_id"]: r["started_at"] or 0.0 for r in store.trajectory_records()}
    result = LayoutResult(out)
    name = model_folder_name(model)
    for task_id, row in report["tasks"].items():
        for run in row["runs"]:
            folder = (
                out
                / f"run-{run['run']}"
                / ACTION_SPACE
                / OBSERVATION_TYPE
                / name
                / row["domain"]
                / task_id
            )
            result.folders.append(folder)
            if _written_for(folder) == run["trajectory_id"] and (folder / RESULT_FILE).is_file():
                result.kept += 1
                continue
            folder.parent.mkdir(parents=True, exist_ok=True)
            _write_example(
                store,
                run["trajectory_id"],
                run["score"],
                started.get(run["trajectory_id"], 0.0),
                folder,
                result,
            )
            result.written += 1
    return result
