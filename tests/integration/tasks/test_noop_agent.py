"""The no-op agent check on real local desktops (issue 18's acceptance, on a sample):
after each task's setup, an agent that declares success at once must score 0
(metrics really run) and one that declares failure must score 1 on exactly the
infeasible tasks. The sample is a stratified cover (every domain and setup-step
kind it reaches in 6 tasks) plus the known false-pass candidates (the lock-screen
task, VLC settings tasks) and infeasible tasks; `cua-rl tasks check --on-desktop
--noop-agent` does the same for every runnable task (docs/osworld-local.md)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from tests_support.asset_files import standin_cache
from tests_support.desktops import local_desktops_unavailable

from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.provider import LocalProvider
from cua_rl.tasks.noop_check import noop_report
from cua_rl.tasks.preflight import local_capabilities, preflight
from cua_rl.tasks.setup_check import check_setups, stratified_sample
from cua_rl.tasks.sources import load_source

pytestmark = [pytest.mark.desktop, pytest.mark.shared]

OSWORLD = Path(__file__).resolve().parents[3].parent / "shared" / "osworld"
LOCK_SCREEN = "a4d98375-215b-4a4d-aee9-3d4370fccc41"
"""Passed falsely while `gsettings set` could not persist without a D-Bus session."""
FALSE_PASS_CANDIDATES = (
    LOCK_SCREEN,
    "5ac2891a-eacd-4954-b339-98abba077adb",  # vlc: play-and-exit setting
    "8ba5ae7a-5ae5-4eab-9fcc-5dd4fe3abf89",  # vlc: recordings folder
    "937087b6-f668-4ba6-9110-60682ee33441",  # VLC was the only (so default) video player
    "99146c54-4f37-4ab8-9327-5f3291665e1e",  # Chromium's migration marker read as a setting
    "5203d847-2572-4150-912a-03f062254390",  # postconfig closes a dialog never opened
)
INFEASIBLE = (
    "b3d4a89c-53f2-4d6b-8b6a-541fb5d205fa",  # os: Bluetooth
    "c288e301-e626-4b98-a1ab-159dcb162af5",  # os: Python 4
    "3720f614-37fd-4d04-8a6b-76f54f8c222d",  # chrome: a language that does not exist
)
KNOWN_EVALUATION_GAPS: dict[str, str] = {}
"""Tasks whose evaluation fails on local desktops today (docs/osworld-local.md)."""


def test_noop_agent_scores_0_and_declared_failure_scores_infeasible_only(tmp_path: Path) -> None:
    if not (OSWORLD / "examples").is_dir():
        pytest.skip(f"OSWorld task files not found at {OSWORLD} (the ../shared test data)")
    if (reason := local_desktops_unavailable()) is not None:
        pytest.skip(reason)
    began = time.monotonic()
    load = load_source(f"osworld:{OSWORLD}")
    cache = standin_cache(load.tasks, tmp_path)
    runnable_ids = set(preflight(load.tasks, local_capabilities(), cache).runnable)
    runnable = [t for t in load.tasks if t.task_id in runnable_ids]
    by_id = {t.task_id: t for t in runnable}
    fixed = [by_id[i] for i in (*FALSE_PASS_CANDIDATES, *INFEASIBLE)]
    sample = list({t.task_id: t for t in [*stratified_sample(runnable, 6), *fixed]}.values())

    async def run() -> list:
        provider = LocalProvider(LocalProviderConfig(state_dir=tmp_path / "state"))
        try:
            return await check_setups(
                sample, provider, cache, desktops=2, score_noop=True, settle_max_s=30.0
            )
        finally:
            await provider.close()

    outcomes = asyncio.run(run())
    assert not {o.task_id: o.error for o in outcomes if o.error}
    results = {o.task_id: o.noop for o in outcomes}
    report = noop_report(list(results.values()))
    assert set(report["offenders"]) <= set(KNOWN_EVALUATION_GAPS), report["offenders"]
    infeasible = {i for i, r in results.items() if r.infeasible}
    assert set(INFEASIBLE) <= infeasible
    assert set(report["failure_run_scored_1"]) == infeasible - set(report["offenders"])
    for task_id in (*FALSE_PASS_CANDIDATES, *INFEASIBLE):
        r = results[task_id]
        assert (r.error, r.success_score) == ("", 0.0), r  # the metrics ran and gave 0
    # A pass on the untouched desktop is tolerated only where the expected file is
    # itself a generated stand-in (it may equal the task's input).
    assert all(results[i].standin_expected for i in report["standin_expected"])
    scored = [
        r for r in results.values() if not r.infeasible and not r.standin_expected and not r.error
    ]
    assert len(scored) >= 4 and all(r.success_score == 0.0 for r in scored)
    assert time.monotonic() - began < 150, "keep this sample under ~2 minutes"
