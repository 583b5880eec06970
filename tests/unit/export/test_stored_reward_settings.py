"""A run stored before `train.lam` was split keeps its meaning: the export, the viewer
and the learning curves read its rewards with that lambda in Eq. 1, exactly as for a
run stored with the new keys; the outcome weight reaches them too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests_support.viewer_runs import build_run

from cua_rl.cli import cli
from cua_rl.report.curves import load_series
from cua_rl.store.run_store import RunStore
from cua_rl.viewer.queries import open_readonly
from cua_rl.viewer.trajectory_detail import trajectory_detail


def _run(path: Path, config: dict) -> Path:
    build_run(path)
    store = RunStore(path)
    store.save_config(config)
    store.close()
    return path


def _read(run: Path, out: Path) -> tuple[list, list, list]:
    """(exported step rewards of traj-0, the viewer's, the curves' mean rewards)."""
    done = CliRunner().invoke(cli, ["export", "trajectories", str(run), "--out", str(out)])
    assert done.exit_code == 0, done.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    exported = next(x["step_rewards"] for x in lines if x["trajectory_id"] == "traj-0")
    conn = open_readonly(run)
    try:
        detail = trajectory_detail(conn, "traj-0")
        series = load_series(conn)
    finally:
        conn.close()
    assert detail is not None
    return exported, [s["reward"] for s in detail["steps"]], series.mean_rewards


def test_a_run_stored_with_the_old_key_reads_back_the_same_rewards(tmp_path: Path) -> None:
    old = _read(_run(tmp_path / "old", {"train": {"lam": 0.5}}), tmp_path / "old.jsonl")
    new = _read(
        _run(tmp_path / "new", {"train": {"reward": {"policy_lam": 0.5, "prm_lam": 2.0}}}),
        tmp_path / "new.jsonl",
    )
    assert old == new
    # traj-0 succeeded (O = 1); its votes cycle (1, 1, -1), (-1, -1, 0), (1, 1, 1), ...
    # so with lambda 0.5: R = 1 + 0.5/3, 1 - 0.5 * 2/3, 1 + 0.5, 1 + 0.5/3
    assert old[0] == pytest.approx([7 / 6, 2 / 3, 1.5, 7 / 6])
    assert old[1] == pytest.approx(old[0])


def test_the_outcome_weight_reaches_every_reader(tmp_path: Path) -> None:
    votes_only = _read(
        _run(tmp_path / "w0", {"train": {"reward": {"outcome_weight": 0.0}}}), tmp_path / "w0.jsonl"
    )
    # w = 0, lambda 1: R = mean of the votes alone
    assert votes_only[0] == pytest.approx([1 / 3, -2 / 3, 1.0, 1 / 3])
    assert votes_only[1] == pytest.approx(votes_only[0])
