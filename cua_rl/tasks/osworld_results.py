"""OSWorld's results layout: the folder tree its `run.py` writes and its
`show_result.py` reads, and published trajectories use.

    <result_dir>/<action_space>/<observation_type>/<model>/<domain>/<task_id>/
        result.txt                      the evaluator's score, e.g. `1.0`
        traj.jsonl                      one JSON object per executed action:
                                        step_num, action_timestamp, action, response,
                                        reward, done, info, screenshot_file
        step_<n>_<timestamp>.png        the screen after action n
        recording.mp4                   the episode's screen recording, when recorded

`show_result.py` counts a task folder only once it holds result.txt and reads the
score as `float(text)`, or `float(bool(text))` when the text is not a number; its
rates are per domain over the counted folders. `read_results` reads a folder the
same way (noting each result.txt that is not a number), from any level of the
tree: a result_dir, a model's folder, or our own `osworld-results/` with one
result_dir per run index (`run-<k>/`).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

RESULT_FILE = "result.txt"
TRAJ_FILE = "traj.jsonl"
RECORDING_FILE = "recording.mp4"
RUN_FOLDER = re.compile(r"^run-(\d+)$")
"""Our folder of run index k (`run-<k>`) above a result_dir, one per `--runs`."""
TIMESTAMP_FORMATS = ("%Y%m%d@%H%M%S%f", "%Y%m%d@%H%M%S")
"""`action_timestamp` as OSWorld's versions write it (with and without microseconds)."""
MAX_EXAMPLES = 100_000
"""Task folders read from one tree at most (OSWorld-Verified has 369 per run)."""
MAX_DEPTH = 8
"""Levels searched below a root: run-<k>/action/observation/model/domain/task is 6."""


@dataclass(frozen=True, slots=True)
class ExampleResult:
    """One task folder of the tree."""

    folder: Path
    domain: str
    task_id: str
    model: str
    action_space: str
    observation_type: str
    run_index: int
    score: float | None
    """As show_result.py reads result.txt; None without one (not finished)."""
    problem: str | None = None


@dataclass
class ResultsFolder:
    """Every task folder under a root, with what could not be read as expected."""

    root: Path
    examples: list[ExampleResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        return sorted({e.model for e in self.examples})

    def scored(self) -> list[ExampleResult]:
        return [e for e in self.examples if e.score is not None]

    def scores(self) -> dict[str, dict[int, float]]:
        """Task id -> run index -> score, over the scored folders."""
        out: dict[str, dict[int, float]] = defaultdict(dict)
        for e in self.scored():
            out[e.task_id].setdefault(e.run_index, e.score)  # type: ignore[arg-type]  # scored() yields only entries with a score
        return dict(out)

    def domains(self) -> dict[str, str]:
        """Task id -> domain."""
        return {e.task_id: e.domain for e in self.examples}


def read_score(path: Path) -> tuple[float, str | None]:
    """(score, problem) of a result.txt as show_result.py reads it."""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        return float(text), None
    except ValueError:
        return float(bool(text)), (
            f"{path}: {text.strip()[:40]!r} is not a number "
            f"(read as {float(bool(text))}, as OSWorld's "
            "show_result.py does)"
        )


def task_folders(root: Path, limit: int = MAX_EXAMPLES) -> list[Path]:
    """Folders holding a result.txt or traj.jsonl, at most `MAX_DEPTH` levels below
    `root` (deeper is not OSWorld's layout) and at most `limit` of them, sorted."""
    found: list[Path] = []
    base = len(root.parts)
    for here, dirs, files in os.walk(root):
        depth = len(Path(here).parts) - base
        if depth >= MAX_DEPTH:
            dirs.clear()
        dirs.sort()
        if depth >= 2 and (RESULT_FILE in files or TRAJ_FILE in files):
            found.append(Path(here))
            if len(found) > limit:
                break
    return sorted(found)


def is_results_folder(root: Path) -> bool:
    """Whether `root` holds at least one OSWorld task folder (a result.txt or
    traj.jsonl two levels or more below it)."""
    return root.is_dir() and bool(task_folders(root, limit=0))


def _example(root: Path, folder: Path) -> ExampleResult | str:
    rel = folder.relative_to(root).parts
    if len(rel) < 2:
        return f"{folder}: a task folder must lie under a domain folder (<domain>/<task_id>/)"
    # the three folders above the domain's, wherever the root lies in the tree
    action_space, observation_type, model = ("", "", "", *root.resolve().parts, *rel[:-2])[-3:]
    run_index = next((int(m.group(1)) for part in rel[:-2] if (m := RUN_FOLDER.match(part))), 0)
    result = folder / RESULT_FILE
    score, problem = None, None
    if result.is_file():
        try:
            score, problem = read_score(result)
        except OSError as exc:
            problem = f"{result}: cannot be read ({exc.strerror})"
    return ExampleResult(
        folder=folder,
        domain=rel[-2],
        task_id=rel[-1],
        model=model,
        action_space=action_space,
        observation_type=observation_type,
        run_index=run_index,
        score=score,
        problem=problem,
    )


def read_results(root: Path) -> ResultsFolder:
    """Every task folder under `root` (see the module docstring); the model, action
    space and observation type are the three folders above a domain's."""
    out = ResultsFolder(root)
    folders = task_folders(root)
    if len(folders) > MAX_EXAMPLES:
        out.problems.append(f"{root}: {len(folders)} task folders; read the first {MAX_EXAMPLES}")
        folders = folders[:MAX_EXAMPLES]
    for folder in folders:
        example = _example(root, folder)
        if isinstance(example, str):
            out.problems.append(example)
            continue
        out.examples.append(example)
        if example.problem:
            out.problems.append(example.problem)
    return out


def read_trajectory(folder: Path, max_lines: int = 1000) -> tuple[list[dict], list[str]]:
    """The objects of a task folder's traj.jsonl, at most `max_lines`, and one problem
    per line that is not a JSON object (skipped: the rest still reads)."""
    import json

    path = folder / TRAJ_FILE
    if not path.is_file():
        return [], []
    lines, problems = [], []
    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if number > max_lines:
                problems.append(f"{path}: more than {max_lines} lines; the rest not read")
                break
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{path} line {number}: not JSON ({exc.msg})")
                continue
            if not isinstance(value, dict):
                problems.append(f"{path} line {number}: expected a JSON object")
                continue
            lines.append(value)
    return lines, problems
