"""An OSWorld results folder (ours from `cua-rl eval`, or anyone's published
trajectories) opened by the viewer as if it were a run store.

The folder is read once into an in-memory SQLite database with the run store's
schema, so every page and query of the viewer works unchanged: one trajectory
per task folder (its steps from traj.jsonl, its score from result.txt), grouped
per task and run index as an evaluation groups them. Nothing in the folder is
written. Screenshots and recordings are served only from files found while
reading it: a screenshot's name is a hash of its path, looked up in a table, so a
request can never name a file of its own choosing.

Other harnesses write other things into traj.jsonl: an `action` that is a dict, a
`response` missing. Each line is taken as it is (non-strings shown as JSON); a line
that is not a JSON object is skipped and named in the trajectory's error, and a
folder without result.txt is listed as not finished.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from PIL import Image

from cua_rl.store.schema import SCHEMA
from cua_rl.tasks.osworld_results import (
    RECORDING_FILE,
    RESULT_FILE,
    TIMESTAMP_FORMATS,
    ExampleResult,
    read_results,
    read_trajectory,
)

RUN_ID = "osworld-results"
FIRST_SCREENS = ("step_0.png", "initial_state.png")
"""The screen before the first action, where a harness saved it."""
NO_TIMINGS = json.dumps({"policy_s": 0.0, "act_s": 0.0, "screenshot_s": 0.0})
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _time(stamp: Any) -> float | None:
    for fmt in TIMESTAMP_FORMATS:
        try:
            return datetime.strptime(str(stamp), fmt).timestamp()
        except ValueError:
            continue
    return None


class OsworldFolder:
    """The folder's files the viewer may serve, and its database."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.shots: dict[str, Path] = {}
        """Screenshot name (hash of its path + extension) -> file."""
        self.recordings: dict[str, Path] = {}
        """Trajectory id -> its recording.mp4."""

    def _shot(self, folder: Path, name: Any) -> str:
        """The name under which `folder/name` is served ("" when it is not a file in
        the folder)."""
        if not isinstance(name, str) or not name:
            return ""
        path = (folder / name).resolve()
        if not path.is_relative_to(self.root) or not path.is_file():
            return ""
        ext = {".png": "png", ".jpg": "jpg", ".jpeg": "jpg"}.get(path.suffix.lower(), "bin")
        key = f"{hashlib.sha1(str(path).encode()).hexdigest()}.{ext}"
        self.shots[key] = path
        return key

    def _trajectory_id(self, example: ExampleResult, taken: set[str]) -> str:
        base = _UNSAFE.sub("_", f"{example.model}:{example.task_id}:{example.run_index}")[:190]
        tid, n = base, 1
        while tid in taken:
            n += 1
            tid = f"{base}.{n}"
        taken.add(tid)
        return tid

    def _screen(self, shot: str) -> tuple[int, int]:
        try:
            with Image.open(self.shots[shot]) as img:
                return img.size
        except (KeyError, OSError):
            return (0, 0)

    def connect(self) -> sqlite3.Connection:
        """Read the folder into a new in-memory database (call on the thread that uses
        it; the viewer's database thread)."""
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        conn.executescript(SCHEMA)
        conn.execute("INSERT INTO runs VALUES (?, ?, ?)", (RUN_ID, time.time(), "{}"))
        taken: set[str] = set()
        folder = read_results(self.root)
        for example in folder.examples:
            self._add(conn, example, self._trajectory_id(example, taken))
        conn.commit()
        conn.execute("PRAGMA query_only = 1")
        return conn

    def _add(self, conn: sqlite3.Connection, example: ExampleResult, tid: str) -> None:
        lines, problems = read_trajectory(example.folder)
        instruction = next(
            (
                str(line["instruction"])
                for line in lines
                if isinstance(line.get("instruction"), str)
            ),
            "",
        )
        variant = f"{example.task_id}:osworld"
        conn.execute(
            "INSERT OR IGNORE INTO variants VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (variant, RUN_ID, example.task_id, example.domain, "osworld", instruction, "{}", 0.0),
        )
        steps = [line for line in lines if "step_num" in line or "action" in line]
        before = next((s for s in (self._shot(example.folder, n) for n in FIRST_SCREENS) if s), "")
        rows, times = [], []
        for index, line in enumerate(steps):
            after = self._shot(example.folder, line.get("screenshot_file"))
            rows.append(
                (
                    tid,
                    index,
                    RUN_ID,
                    before or after,
                    after,
                    _text(line.get("response")),
                    "[]",
                    None,
                    _text(line.get("action")),
                    "[]",
                    "[]",
                    0,
                    NO_TIMINGS,
                )
            )
            before = after or before
            if (t := _time(line.get("action_timestamp"))) is not None:
                times.append(t)
        conn.executemany(
            "INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
        )
        result = example.folder / RESULT_FILE
        mtime = result.stat().st_mtime if result.is_file() else time.time()
        if example.score is None:
            problems.insert(0, "no result.txt: the run did not finish")
        if example.problem:
            problems.insert(0, example.problem)
        screen = self._screen(rows[0][4]) if rows and rows[0][4] else (0, 0)
        score = example.score
        conn.execute(
            "INSERT OR REPLACE INTO trajectories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                tid,
                RUN_ID,
                variant,
                f"{example.task_id}#{example.run_index}",
                "finished" if score is not None else "aborted",
                score,
                None if score is None else (1 if score > 0 else -1),
                0,
                len(rows),
                *screen,
                "; ".join(problems)[:2000],
                min(times, default=mtime),
                max(times, default=mtime),
            ),
        )
        recording = example.folder / RECORDING_FILE
        if recording.is_file() and recording.resolve().is_relative_to(self.root):
            self.recordings[tid] = recording.resolve()
