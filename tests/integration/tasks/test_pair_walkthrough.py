"""docs/pair-authoring.md's walk-through, from `templates new` to a training run on
the new pair, run as written: the command blocks of its last section verbatim,
with only the substitutions tabled on the page."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs" / "pair-authoring.md"
SECTION = "## From a new pair to a training run"


def _section() -> str:
    text = PAGE.read_text()
    return text[text.index(SECTION) :]


def _blocks(section: str) -> tuple[list[str], str]:
    """The command lines of the plain blocks and the template of the ```json block."""
    commands, template = [], ""
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", section, re.S):
        if lang == "json":
            template = body
        else:
            commands += [line.strip() for line in body.splitlines() if line.strip()]
    return commands, template


def _run(line: str, pairs: Path, run_dir: Path) -> subprocess.CompletedProcess[str]:
    line = line.replace("$HOME/pairs", str(pairs)).replace("~/pairs", str(pairs))
    line = line.replace("runs/my-pairs", str(run_dir))
    words = shlex.split(line)
    assert words[0] == "cua-rl", line
    if words[1] == "train":
        words += ["train.max_policy_updates=1", "fleet.max_groups=2"]
    done = subprocess.run(
        [sys.executable, "-m", "cua_rl.cli", *words[1:]],
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    assert done.returncode == 0, f"{line}\n{done.stdout[-1500:]}\n{done.stderr[-3000:]}"
    return done


def _step_two(pairs: Path, section: str, template: str) -> None:
    """Step 2's edits, with the JSON the page shows."""
    task = "marker-task"
    (pairs / "templates" / f"{task}.json").write_text(template)
    spec = json.loads((pairs / "evaluators" / task / "default.json").read_text())
    spec["expected"]["rules"]["expected"] = "DONE\n"
    (pairs / "evaluators" / task / "loud.json").write_text(json.dumps(spec))
    golden = pairs / "golden" / "os" / f"{task}.json"
    steps = json.loads(golden.read_text())
    steps["loud"] = [{"execute": {"command": f"echo DONE > /tmp/{task}.done", "shell": True}}]
    golden.write_text(json.dumps(steps))
    difficulty = re.search(r'`(\{"marker-task": \[.*?\]\})`', section)
    assert difficulty is not None, "step 2's difficulty.json entry is not on the page"
    (pairs / "difficulty.json").write_text(difficulty.group(1))


@pytest.mark.desktop
@pytest.mark.model
def test_the_pair_walkthrough_runs_as_written(tmp_path: Path, local_desktops: None) -> None:
    section = _section()
    commands, template = _blocks(section)
    assert [c.split()[1] for c in commands] == [
        "templates",
        "templates",
        "templates",
        "tasks",
        "train",
        "runs",
    ]
    pairs, run_dir = tmp_path / "pairs", tmp_path / "run"
    started = time.monotonic()
    _run(commands[0], pairs, run_dir)
    _step_two(pairs, section, template)
    for line in commands[1:3]:
        _run(line, pairs, run_dir)
    listed = json.loads(_run(commands[3], pairs, run_dir).stdout)
    assert listed[0]["variants"] == ["default", "loud"]
    _run(commands[4], pairs, run_dir)
    _run(commands[5], pairs, run_dir)
    summary = json.loads(_run(f"{commands[5]} --json", pairs, run_dir).stdout)
    assert summary["policy_updates"] == 1 and summary["trajectories"] >= 2
    assert summary["kind"] == "train"
    print(f"pair walk-through: {time.monotonic() - started:.0f} s")


@pytest.mark.parametrize(
    "needle", ["templates new marker-task --root ~/pairs", "--pairs ~/pairs --out runs/my-pairs"]
)
def test_the_page_still_shows_the_commands_this_test_substitutes(needle: str) -> None:
    assert needle in _section()
