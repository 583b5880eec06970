"""The status snapshot of a run, and where log records go (stderr, run.log)."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cua_rl.run_logging import configure, run_log
from cua_rl.runtime.telemetry.progress import RunProgress


@dataclass
class _Fleet:
    counts: Counter[str] = field(default_factory=Counter)


@dataclass
class _Learner:
    role: str
    version: int = 0


def test_snapshot_rates_rewards_and_eta_from_the_sooner_end() -> None:
    fleet, policy = _Fleet(), _Learner("policy")
    progress = RunProgress(
        fleet, [policy, _Learner("prm")], max_updates=4, max_groups=10, started=0.0
    )
    assert progress.snapshot().eta_s is None  # nothing measured yet
    fleet.counts.update(groups=2, episodes=4, steps=12, successes=1)
    progress.observe_group({"step_reward_mean": 0.5})
    progress.observe_group({"step_reward_mean": -0.1})
    policy.version = 1
    snap = progress.snapshot()
    assert snap.success_rate == 0.25
    assert abs(snap.step_reward_mean - 0.2) < 1e-9
    # updates: 1 of 4 -> 3x elapsed left; groups: 2 of 10 -> 4x elapsed left
    assert abs(snap.eta_s - 3 * snap.elapsed_s) < 1e-3 * snap.elapsed_s
    line = snap.line()
    for part in (
        "[training]",
        "episodes=4",
        "policy_updates=1/4",
        "prm_updates=0",
        "success=0.25",
        "step_reward=+0.20",
        "steps/s",
        "eta=",
    ):
        assert part in line, (part, line)


def test_run_log_keeps_info_when_stderr_asks_for_warnings(tmp_path: Path, capsys) -> None:
    configure("WARNING")
    try:
        own = logging.getLogger("cua_rl.runtime.test")
        with run_log(tmp_path) as path:
            own.info("only in the file")
            own.warning("in both")
            logging.getLogger("some.library").info("library chatter")
        text = path.read_text()
        assert "only in the file" in text and "in both" in text
        assert "library chatter" not in text
        err = capsys.readouterr().err
        assert "in both" in err and "only in the file" not in err
    finally:
        configure("INFO")


def test_eval_progress_off_a_terminal_logs_a_line_per_scored_task_run(caplog) -> None:
    import io

    from rich.console import Console

    from cua_rl.runtime.telemetry.eval_progress import ProgressBar

    bar = ProgressBar(Console(file=io.StringIO()))  # a file: not a terminal
    with caplog.at_level(logging.INFO, logger="cua_rl.status"), bar.progress:
        bar.start(4, [1.0])  # one task run scored before (a resumed evaluation)
        bar.advance("t#0", 0.0)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "cua_rl.status"]
    assert line.startswith("[eval] 2/4 task runs scored, mean score 0.500") and "eta=" in line


def test_live_table_shows_rates_rewards_and_eta() -> None:
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from cua_rl.runtime.telemetry.live import _table

    fleet, policy = (
        _Fleet(),
        SimpleNamespace(
            role="policy", version=1, samples_used=4, samples_collected=6, stale_dropped=0
        ),
    )
    fleet.counts.update(groups=2, episodes=4, steps=12, successes=2)
    progress = RunProgress(fleet, [policy], max_updates=2, started=0.0)
    progress.observe_group({"step_reward_mean": 0.25})
    out = io.StringIO()
    Console(file=out, width=120).print(
        _table(progress.snapshot(), [policy], SimpleNamespace(pending={}))
    )
    text = out.getvalue()
    for part in (
        "episodes/min",
        "steps/s",
        "success rate",
        "0.50",
        "+0.250",
        "policy version",
        "1 / 2",
        "elapsed / ETA",
    ):
        assert part in text, (part, text)
