"""`cua-rl experiment` on a 2-arm x 2-seed file with the stub cell runner
(tests_support/stub_cells.py): table.json against hand-computed means and t
intervals, curves.png, --list, and a SIGTERM mid-grid followed by a rerun that
does no finished step again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cua_rl.cli.root import cli

T_975_DF1 = 12.706204736174707
"""Student's t quantile at 0.975 with 1 degree of freedom (2 seeds)."""
STUB = "tests_support.stub_cells:StubCells"
TESTS = Path(__file__).resolve().parents[2]

FILE = """
name: stub-grid
description: two arms, two seeds, the stub runner's known figures
seeds: [1, 2]
baseline: policy
common: [episode.max_steps=2]
arms:
  - name: policy
    preset: quickstart
    overrides: [train.prm.enabled=false, adapt.enabled=false]
  - name: reward
    label: "+ reward"
    preset: quickstart
    overrides: [adapt.enabled=false]
eval:
  versions: [1, 2]
  rollouts: 4
  sets:
    in_domain: ["tasks.ids=[48e34106-14b8-569b-87fd-ddb8b69036bc]"]
    out_of_domain: ["tasks.ids=[6ec4f2e8-415a-5392-93bd-c67409b13983]"]
prm_eval:
  tasks: ["tasks.ids=[6ec4f2e8-415a-5392-93bd-c67409b13983]"]
  rollouts: 4
"""


def t_entry(a: float, b: float) -> tuple[float, float, float]:
    """Mean and 95 % t interval of two values, by hand: half-width t * s / sqrt(2),
    with s = |a - b| / sqrt(2), so the half-width is t * |a - b| / 2."""
    mean, half = (a + b) / 2, T_975_DF1 * abs(a - b) / 2
    return mean, mean - half, mean + half


def check(entry: dict, a: float, b: float) -> None:
    mean, low, high = t_entry(a, b)
    assert entry["n"] == 2 and entry["method"] == "t"
    assert entry["estimate"] == pytest.approx(mean)
    assert entry["low"] == pytest.approx(low) and entry["high"] == pytest.approx(high)


@pytest.fixture()
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(FILE)
    return path


def calls(out: Path) -> list[str]:
    log = out / "stub-calls.log"
    return log.read_text().splitlines() if log.is_file() else []


def test_table_json_holds_the_hand_computed_means_and_intervals(
    spec_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "exp"
    result = CliRunner().invoke(
        cli, ["experiment", str(spec_file), "--out", str(out), "--runner", STUB, "--json"]
    )
    assert result.exit_code == 0, result.output
    table = json.loads((out / "table.json").read_text())
    rows = {row["arm"]: row for row in table["rows"]}
    assert list(rows) == ["before", "policy", "reward"]
    assert table["columns"] == [
        "in_domain",
        "out_of_domain",
        "process_accuracy",
        "outcome_accuracy",
    ]
    check(rows["before"]["cells"]["in_domain"], 0.125, 0.25)
    check(rows["before"]["cells"]["out_of_domain"], 0.0, 0.125)
    check(rows["policy"]["cells"]["in_domain"], 0.25, 0.5)
    check(rows["policy"]["cells"]["out_of_domain"], 0.125, 0.375)
    check(rows["reward"]["cells"]["in_domain"], 0.5, 1.0)
    check(rows["reward"]["cells"]["outcome_accuracy"], 0.6, 0.7)
    check(rows["reward"]["cells"]["process_accuracy"], 0.8, 0.9)
    # the policy arm trains no reward model: no accuracy, n = 0
    assert rows["policy"]["cells"]["process_accuracy"]["n"] == 0
    assert rows["policy"]["cells"]["process_accuracy"]["estimate"] is None
    # reward minus policy, paired by seed: differences 0.25 and 0.5
    (comp,) = table["comparisons"]
    assert comp["arm"] == "reward" and comp["baseline"] == "policy"
    assert comp["columns"]["in_domain"]["differences"] == {"1": 0.25, "2": 0.5}
    check(comp["columns"]["in_domain"]["interval"], 0.25, 0.5)
    assert "process_accuracy" not in comp["columns"]
    # the curve: version 0 is the before row, version 1 half of the final success
    reward_curve = table["curves"]["reward"]["in_domain"]
    assert [p["version"] for p in reward_curve] == [0, 1, 2]
    assert reward_curve[1]["estimate"] == pytest.approx((0.25 + 0.5) / 2)
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "table.md").read_text()
    assert "| + reward | 2 | 0.750 [" in md and "(n=2, t)" in md
    # every cell listed with its seed, wall time and figures
    listed = {c["cell"]: c for c in table["cells"]}
    assert listed["reward-s1"]["figures"]["eval@2:in_domain"] == {"success": 0.5, "n": 8}
    assert listed["reward-s1"]["runs_show"] == {"trajectories": 8}
    assert listed["policy-s2"]["seed"] == 2 and listed["policy-s2"]["state"] == "done"
    assert "| reward-s2 | 2 | done |" in md
    # every cell is an ordinary directory of its own
    assert (out / "cells" / "reward-s2" / "run").is_dir()


def test_list_prints_every_cell_and_its_state(spec_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "exp"
    listed = CliRunner().invoke(
        cli, ["experiment", str(spec_file), "--out", str(out), "--list", "--json"]
    )
    assert listed.exit_code == 0, listed.output
    cells = {c["cell"]: c for c in json.loads(listed.output)["cells"]}
    # seed by seed: a grid cut short still has whole seeds to compare the arms on
    assert list(cells) == [
        "held-out",
        "before-s1",
        "policy-s1",
        "reward-s1",
        "before-s2",
        "policy-s2",
        "reward-s2",
    ]
    assert {c["state"] for c in cells.values()} == {"pending"}
    assert cells["reward-s1"]["steps"] == [
        "train@1",
        "eval@1:in_domain",
        "eval@1:out_of_domain",
        "prm@1",
        "train@2",
        "eval@2:in_domain",
        "eval@2:out_of_domain",
        "prm@2",
        "summary",
    ]
    assert "prm@1" not in cells["policy-s1"]["steps"]
    text = CliRunner().invoke(cli, ["experiment", str(spec_file), "--out", str(out), "--list"])
    assert "policy-s2" in text.output and "pending" in text.output


def test_a_sigterm_mid_grid_and_a_rerun_redo_no_finished_step(
    spec_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "exp"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "CUA_RL_STUB_DELAY_S": "0.2",
    }
    command = [
        sys.executable,
        "-m",
        "cua_rl.cli",
        "experiment",
        str(spec_file),
        "--out",
        str(out),
        "--runner",
        STUB,
    ]
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while sum(line.startswith("end ") for line in calls(out)) < 8:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, calls(out)
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 1, err
    assert b"rerun the same command to continue" in err
    first = calls(out)
    finished = {line.split(" ", 1)[1] for line in first if line.startswith("end ")}
    assert 8 <= len(finished) < 30
    env["CUA_RL_STUB_DELAY_S"] = "0"
    rerun = subprocess.run(command, env=env, capture_output=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr
    second = [
        line.split(" ", 1)[1] for line in calls(out)[len(first) :] if line.startswith("start ")
    ]
    assert not finished & set(second), "a finished step ran again"
    everything = finished | set(second)
    assert len(everything) == 1 + 2 * 3 + 2 * 9 + 2 * 7  # held-out, before, reward, policy
    table = json.loads((out / "table.json").read_text())
    check(table["rows"][2]["cells"]["in_domain"], 0.5, 1.0)


def test_a_changed_file_is_refused_on_a_folder_it_did_not_start(
    spec_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "exp"
    first = CliRunner().invoke(
        cli, ["experiment", str(spec_file), "--out", str(out), "--runner", STUB]
    )
    assert first.exit_code == 0, first.output
    spec_file.write_text(
        FILE.replace("rollouts: 4\n  sets", "rollouts: 8\n  sets").replace(
            "description: two", "description: still two"
        )
    )
    again = CliRunner().invoke(
        cli, ["experiment", str(spec_file), "--out", str(out), "--runner", STUB]
    )
    assert again.exit_code == 1
    assert "differs from the experiment" in again.output and "(eval)" in again.output
    spec_file.write_text(FILE.replace("description: two", "description: still two"))
    same = CliRunner().invoke(
        cli, ["experiment", str(spec_file), "--out", str(out), "--runner", STUB, "--json"]
    )
    assert same.exit_code == 0 and json.loads(same.stdout)["steps_run"] == 0
