"""Faults injected into real short runs (local desktops, the tiny model, hf engines),
as `cua-rl bench faults` does: the run finishes by itself, no finished trajectory
is lost or duplicated, no update is duplicated or skipped, at most the affected
episodes abort, and nothing is left running.

Faults that do not interfere share one run: a rollout gets a malformed policy
answer (a proxy in front of a real replica), a truncated screenshot (the guest's
fault hook) and a killed guest server. A training run SIGKILLed and resumed is
test_train_local.py's (its children, rank processes included, must stop by
themselves), the 10 s stop goal after SIGTERM `cua-rl bench faults` (sigterm). A
rollout whose policy server is dead gives every episode up, sets the
variants aside and exits 1 with one line.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from cua_rl.bench.faults.cases import FaultBench, model_server, wait_for_progress
from cua_rl.bench.faults.proxy import FaultProxy
from cua_rl.bench.faults.watched_run import FAULT_HOOKS_ENV, store_summary

pytestmark = [pytest.mark.desktop, pytest.mark.model]

DEADLINE_S = 300.0


def _nothing_left(run) -> None:
    left = run.leftovers()
    assert left == {"processes": {}, "desktops": []}, left


def test_rollout_survives_bad_answer_corrupt_screenshots_and_a_killed_guest(
    tmp_path: Path, tiny_model_dir: Path, local_desktops: None
) -> None:
    bench = FaultBench(tmp_path, DEADLINE_S, log=print, tiny_dir=tiny_model_dir)
    with model_server(tiny_model_dir, tmp_path / "server.log") as upstream:
        proxy = FaultProxy(upstream).start()
        try:
            proxy.arm("malformed", 1)
            run = bench.run(
                "shared",
                "rollout",
                ["fleet.max_groups=3", f"policy.urls=[{proxy.url}]", "judge.enabled=false"],
                env=FAULT_HOOKS_ENV,
            )
            assert wait_for_progress(run, DEADLINE_S) is not None, run.error_lines()
            assert run.corrupt_a_screenshot(60)
            guests = run.find(r"-m cua_guest(\s|$)")
            assert guests
            run.signal_pid(guests[0], signal.SIGKILL)
            code = run.wait(DEADLINE_S)
        finally:
            proxy.stop()
    assert code == 0, run.error_lines()
    assert proxy.injected == 1
    summary = store_summary(run.run_dir)
    assert summary is not None and summary["finished"] is True
    # every slot of the 3 groups of 2 completed exactly once: nothing lost or doubled
    assert summary["trajectories"] == 6 == (run.summary() or {}).get("episodes")
    assert summary["gave_up"] == 0
    # the bad answer, the cut screenshot (both desktops may take one before the
    # other trigger is removed) and the killed guest: at most these episodes abort
    assert 2 <= summary["aborted"] <= 4, summary["reasons"]
    reasons = " ".join(summary["reasons"]["abort"])
    assert "ModelResponseError" in reasons and "CorruptImageError" in reasons, reasons
    _nothing_left(run)


def test_rollout_whose_every_episode_is_given_up_fails_with_one_line(
    tmp_path: Path, tiny_model_dir: Path, local_desktops: None
) -> None:
    from cua_rl.desktop.providers.local.state import free_port

    bench = FaultBench(tmp_path, DEADLINE_S, log=print, tiny_dir=tiny_model_dir)
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    run = bench.run(
        "dead",
        "rollout",
        [
            "fleet.max_groups=2",
            f"policy.urls=[{dead}]",
            "policy.requests.wait_for_replica_s=1",
            "judge.enabled=false",
            "policy.requests.max_attempts=1",
            "fleet.set_aside_after=2",
        ],
    )
    assert run.wait(DEADLINE_S) == 1
    errors = run.error_lines()
    assert len(errors) == 1 and "every episode was given up" in errors[0], errors
    summary = store_summary(run.run_dir)
    assert summary is not None and summary["trajectories"] == 0
    assert summary["gave_up"] == 4 and summary["end"] == "failed"
    assert len(summary["set_aside"]) == 2  # both task variants, with their reason
    assert all(dead in reason for reason in summary["set_aside"].values())
    _nothing_left(run)
