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
    assert set(result.written) == {
        "success_rate",
        "step_reward",
        "prm_agreement",
        "staleness",
        "throughput",
    }
    assert result.skipped == {}
    for path in result.written.values():
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 2000


def test_missing_series_are_skipped_with_a_reason(tmp_path: Path) -> None:
    RunStore(tmp_path / "empty").close()
    result = write_curves(tmp_path / "empty", tmp_path / "plots")
    assert result.written == {}
    assert set(result.skipped) == {
        "success_rate",
        "step_reward",
        "prm_agreement",
        "staleness",
        "throughput",
    }
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


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_legends_name_the_window_and_never_say_rolling_mean_of_one() -> None:
    from cua_rl.report.curves import default_window, series_figure

    assert [default_window(n) for n in (1, 9, 10, 24, 240, 5000)] == [1, 1, 5, 5, 24, 100]
    short = series_figure([1.0, -1.0, 0.5, None, 2.0], "t", "y")
    assert _legend(short) == ["per trajectory"]  # window 1: no line at all
    rate = series_figure([1.0, 0.0, 1.0], "t", "success", ylim=(0, 1), cumulative_when_short=True)
    assert _legend(rate) == [
        "per trajectory (jittered ±0.15 to show overlaps)",
        "mean of all trajectories so far",
    ]
    long = series_figure([float(i % 2) for i in range(240)], "t", "success", ylim=(0, 1))
    assert _legend(long)[1] == "mean of the last 24 trajectories"
    ticks = long.axes[0].get_yticks()
    assert ticks.min() >= 0 and ticks.max() <= 1  # no tick in the jitter margin
    assert long.axes[0].get_xlabel() == "trajectory # (in finishing order)"
    smooth = series_figure([i / 7 for i in range(50)], "t", "reward")
    assert _legend(smooth)[0] == "per trajectory"  # many distinct values: no jitter


def test_jitter_spreads_discrete_values_only() -> None:
    from cua_rl.report.plots import jitter, point_style

    y = np.array([0.0, 1.0] * 50)
    shown, half = jitter(y)
    assert half == pytest.approx(0.15) and np.all(np.abs(shown - y) <= half)
    assert len(np.unique(shown)) == 100 and np.array_equal(jitter(y)[0], shown)  # seeded
    many = np.linspace(0, 1, 40)
    assert jitter(many)[1] == 0.0 and np.array_equal(jitter(many)[0], many)
    assert point_style(20)["alpha"] > point_style(5000)["alpha"] >= 0.12
