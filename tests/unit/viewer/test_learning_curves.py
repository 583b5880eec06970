from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from tests_support.viewer_runs import build_run

from cua_rl.cli import cli
from cua_rl.report.curves import rolling_mean, spread_steps, write_curves
from cua_rl.store.run_store import RunStore

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_rolling_mean_starts_at_the_first_point() -> None:
    assert np.allclose(rolling_mean([1, 0, 1, 1], 2), [1.0, 0.5, 0.5, 1.0])


def test_steps_are_spread_over_each_episode() -> None:
    edges = np.array([0.0, 10.0, 20.0, 30.0])
    assert np.allclose(spread_steps([(5.0, 25.0, 4), (30.0, 30.0, 2)], edges), [1, 2, 3])


def test_every_curve_is_written_as_png(tmp_path: Path) -> None:
    build_run(tmp_path / "run", n_trajectories=6, policy_version=1)
    result = write_curves(tmp_path / "run", tmp_path / "plots")
    assert set(result.written) == {"success_rate", "step_reward", "prm_agreement",
                                   "staleness", "throughput"}
    assert result.skipped == {}
    for path in result.written.values():
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 2000


def test_missing_series_are_skipped_with_a_reason(tmp_path: Path) -> None:
    RunStore(tmp_path / "empty").close()
    result = write_curves(tmp_path / "empty", tmp_path / "plots")
    assert result.written == {}
    assert set(result.skipped) == {"success_rate", "step_reward", "prm_agreement",
                                   "staleness", "throughput"}
    assert not list((tmp_path / "plots").glob("*.png"))
    build_run(tmp_path / "v0")  # all policy versions 0 except steps >= 2 -> version 1
    assert "staleness" in write_curves(tmp_path / "v0", tmp_path / "p2").written


def test_plot_command(tmp_path: Path) -> None:
    build_run(tmp_path / "run")
    res = CliRunner().invoke(cli, ["plot", str(tmp_path / "run"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "wrote success_rate" in res.output
    assert (tmp_path / "o" / "throughput.png").read_bytes().startswith(PNG_MAGIC)
    missing = CliRunner().invoke(cli, ["plot", str(tmp_path), "--out", str(tmp_path / "o")])
    assert missing.exit_code != 0 and "no run store" in missing.output


@pytest.mark.parametrize("args", [["view", "--help"], ["plot", "--help"]])
def test_commands_are_registered(args: list[str]) -> None:
    assert CliRunner().invoke(cli, args).exit_code == 0
