"""`runs show` counts good work and lost work apart and says why work was lost."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.store.run_events import GAVE_UP, JUDGE_FAILURE, SET_ASIDE, run_lifecycle
from cua_rl.store.run_store import RunStore
from cua_rl.store.run_summary import reason_key
from cua_rl.types import Step, StepVerdict, Trajectory, TrajectoryStatus, Vote


def _traj(
    tid: str, status: TrajectoryStatus, *, score: float | None = 1.0, n: int = 2, version: int = 0
) -> Trajectory:
    steps = tuple(
        Step(
            index=i,
            screenshot_before="a.png",
            response="r",
            actions=(),
            parse_error=None,
            code="",
            screenshot_after="b.png",
        )
        for i in range(n)
    )
    return Trajectory(
        id=tid,
        variant_id="t1:v",
        steps=steps,
        status=status,
        score=score,
        policy_version_at_start=version,
    )


def _show(run_dir: Path) -> dict:
    result = CliRunner().invoke(cli, ["runs", "show", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_aborted_work_is_counted_apart_with_reasons(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.save_trajectory(_traj("good", TrajectoryStatus.FINISHED, version=0))
    store.save_trajectory(_traj("late", TrajectoryStatus.STEP_LIMIT, score=0.0, version=2))
    for k, port in enumerate((8001, 8002)):
        store.save_trajectory(
            _traj(f"bad{k}", TrajectoryStatus.ABORTED, score=None, n=3),
            error=f"InferenceUnavailable: http://127.0.0.1:{port}/v1: gone",
        )
    store.save_verdicts(
        [
            StepVerdict("good", 0, (Vote(1, "ok"),)),
            StepVerdict("bad0", 0, (Vote(1, "ok"),)),
            StepVerdict("bad0", 1, (Vote(1, "ok"),)),
        ]
    )
    store.add_event(JUDGE_FAILURE, "good", {"step_index": 1, "reason": "no votes"})
    store.add_event(GAVE_UP, "t1:v", {"reason": "t1:v: desktop died", "attempts": 3})
    store.add_event(SET_ASIDE, "t1:v", {"reason": "t1:v: desktop died"})
    store.close()
    data = _show(tmp_path)
    assert (data["trajectories"], data["steps"], data["verdicts"]) == (2, 4, 1)
    assert (data["aborted"], data["aborted_steps"], data["aborted_verdicts"]) == (2, 6, 2)
    assert data["judge_failures"] == 1 and data["gave_up"] == 1
    assert data["set_aside"] == {"t1:v": "t1:v: desktop died"}
    aborts = data["reasons"]["abort"]
    assert len(aborts) == 1  # two replicas, one reason
    (entry,) = aborts.values()
    assert entry["count"] == 2 and entry["examples"][0]["subject"] == "bad0"
    assert data["reasons"]["judge_failure"]["no votes"]["count"] == 1
    assert [
        (v["policy_version"], v["mean_score"], v["success_rate"]) for v in data["versions"]
    ] == [(0, 1.0, 1.0), (2, 0.0, 0.0)]
    assert data["kind"] == "unknown" and data["finished"] is None
    text = CliRunner().invoke(cli, ["runs", "show", str(tmp_path)])
    assert text.exit_code == 0 and "InferenceUnavailable" in text.output
    assert "set aside: t1:v" in text.output


def test_lifecycle_records_kind_end_and_wall_time(tmp_path: Path) -> None:
    with run_lifecycle(tmp_path, "rollout"):
        pass
    data = _show(tmp_path)
    assert data["kind"] == "rollout" and data["finished"] is True and data["end"] == "finished"
    with pytest.raises(click.ClickException), run_lifecycle(tmp_path, "rollout"):
        raise click.ClickException("boom")
    data = _show(tmp_path)
    assert data["finished"] is False and data["end"] == "failed"
    assert "boom" in data["end_reason"] and data["invocations"] == 2


def test_a_run_killed_midway_is_not_finished(tmp_path: Path) -> None:
    from cua_rl.store.run_events import STARTED

    store = RunStore(tmp_path)
    store.add_event(STARTED, store.run_id, {"kind": "train"})
    store.close()
    data = _show(tmp_path)
    assert data["kind"] == "train" and data["finished"] is False and data["end"] is None


def test_reason_key_masks_particulars() -> None:
    assert reason_key(
        "GuestUnavailable: http://127.0.0.1:5001/act: timed out after 30.0 s"
    ) == reason_key("GuestUnavailable: http://127.0.0.1:6002/act: timed out after 12.5 s")
    assert reason_key("") == "(no reason recorded)"


def test_a_run_that_never_started_leaves_no_run_dir(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(click.ClickException), run_lifecycle(run_dir, "eval"):
        raise click.ClickException("expected an OSWorld checkout")
    assert not run_dir.exists()


@pytest.mark.parametrize("enabled", [False, True])
def test_a_training_run_says_whether_it_replayed_successes(tmp_path: Path, enabled: bool) -> None:
    from cua_rl.config import RunConfig

    store = RunStore(tmp_path)
    cfg = RunConfig()
    cfg.train.replay.enabled = enabled
    store.save_config(cfg.model_dump(mode="json"))
    store.incr("policy_steps")
    store.incr("replay_groups", 3)
    store.close()
    data = _show(tmp_path)
    if enabled:
        assert data["replay"] == "on (per_task 2, max_lag 8)" and data["replay_groups"] == 3
    else:
        assert data["replay"] == "off" and "replay_groups" not in data
    human = CliRunner().invoke(cli, ["runs", "show", str(tmp_path)])
    assert "replay" in human.output and ("on (per_task" in human.output) == enabled


def test_the_opt_in_switches_a_run_had_on_are_shown(tmp_path: Path) -> None:
    plain, switched = tmp_path / "plain", tmp_path / "switched"
    RunStore(plain).close()  # no saved config: nothing on
    store = RunStore(switched)
    store.save_config(
        {
            "train": {
                "policy": {"entropy_top_fraction": 0.5, "lr": 1e-6},
                "prm": {"entropy_top_fraction": None, "enabled": False},
                "reward": {"outcome_weight": 0.0, "policy_lam": 1.0, "prm_lam": 4.0},
            },
            "seed": 3,
        }
    )
    store.close()
    assert _show(plain)["switches"] == {}
    data = _show(switched)
    assert data["switches"] == {
        "train.policy.entropy_top_fraction": 0.5,
        "train.prm.enabled": False,
        "train.reward.outcome_weight": 0.0,
        "train.reward.prm_lam": 4.0,
    }
    assert data["seed"] == 3
    text = CliRunner().invoke(cli, ["runs", "show", str(switched)]).output
    assert (
        "switches away from the paper: train.policy.entropy_top_fraction=0.5, "
        "train.prm.enabled=False, train.reward.outcome_weight=0.0"
    ) in text
    assert (
        "away from the paper: none" in CliRunner().invoke(cli, ["runs", "show", str(plain)]).output
    )


def test_runs_show_prints_the_weight_sync_switch_from_the_saved_config(tmp_path: Path) -> None:
    from cua_rl.config import RunConfig

    plain = tmp_path / "plain"
    RunStore(plain).close()
    assert "train.sync.staggered" not in _show(plain)  # no saved config: not guessed
    for staggered in (True, False):
        run_dir = tmp_path / f"staggered-{staggered}"
        store = RunStore(run_dir)
        cfg = RunConfig.model_validate({"train": {"sync": {"staggered": staggered}}})
        store.save_config(cfg.model_dump(mode="json"))
        store.close()
        assert _show(run_dir)["train.sync.staggered"] is staggered
        text = CliRunner().invoke(cli, ["runs", "show", str(run_dir)]).output
        assert "train.sync.staggered" in text


def test_runs_show_says_whether_the_run_recorded_spans(tmp_path: Path) -> None:
    from cua_rl.config import RunConfig

    for on in (True, False):
        run_dir = tmp_path / f"spans-{on}"
        store = RunStore(run_dir)
        cfg = RunConfig.model_validate({"metrics": {"spans": on}})
        store.save_config(cfg.model_dump(mode="json"))
        store.close()
        assert _show(run_dir)["metrics.spans"] is on
        assert "metrics.spans" in CliRunner().invoke(cli, ["runs", "show", str(run_dir)]).output
