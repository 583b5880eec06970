"""The setups of a stratified sample of OSWorld tasks (every domain and every
setup-step kind of the tasks runnable here, at most 40) on real local desktops,
with a cache seeded from generated stand-in assets: none may fail, none may
leave a blank first screen. Then the untouched desktop is scored for a no-op
agent: 0 on feasible tasks (metrics really run; tasks whose expected file is a
generated stand-in are reported apart), 1 on infeasible ones when it declares
failure. `cua-rl tasks check --on-desktop` does the setup part for all tasks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests_support.asset_files import standin_cache
from tests_support.desktops import local_desktops_unavailable

from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.provider import LocalProvider
from cua_rl.tasks.preflight import local_capabilities, preflight
from cua_rl.tasks.setup_check import check_setups, stratified_sample
from cua_rl.tasks.sources import load_source

pytestmark = [pytest.mark.desktop, pytest.mark.shared]

OSWORLD = Path(__file__).resolve().parents[3].parent / "shared" / "osworld"
KNOWN_EVALUATION_GAPS: dict[str, str] = {}
"""Sampled tasks whose evaluation fails on local desktops today (see the report)."""


def test_sampled_setups_run_and_show_something(tmp_path: Path) -> None:
    if not (OSWORLD / "examples").is_dir():
        pytest.skip(f"OSWorld task files not found at {OSWORLD} (the ../shared test data)")
    if (reason := local_desktops_unavailable()) is not None:
        pytest.skip(reason)
    load = load_source(f"osworld:{OSWORLD}")
    cache = standin_cache(load.tasks, tmp_path)
    runnable_ids = set(preflight(load.tasks, local_capabilities(), cache).runnable)
    runnable = [t for t in load.tasks if t.task_id in runnable_ids]
    sample = stratified_sample(runnable, 40)
    assert len(sample) <= 40
    assert {t.domain for t in sample} == {t.domain for t in runnable}
    kinds = lambda tasks: {s["type"] for t in tasks for s in t.config}  # noqa: E731
    assert kinds(sample) == kinds(runnable)

    async def run() -> list:
        provider = LocalProvider(LocalProviderConfig(state_dir=tmp_path / "state"))
        try:
            # settle_max_s: a loaded machine (CI) may take longer to paint an app
            return await check_setups(
                sample, provider, cache, desktops=2, score_noop=True, settle_max_s=30.0
            )
        finally:
            await provider.close()

    outcomes = asyncio.run(run())
    assert [o.task_id for o in outcomes] == [t.task_id for t in sample]
    failed = {o.task_id: o.error for o in outcomes if o.error}
    blank = [o.task_id for o in outcomes if o.blank]
    assert not failed, failed
    assert not blank, blank

    infeasible = [o for o in outcomes if o.noop is not None and o.noop.infeasible]
    assert infeasible and all(o.noop_score == 1.0 for o in infeasible)
    errors = {o.task_id: o.noop.error for o in outcomes if o.noop is not None and o.noop.error}
    assert set(errors) <= set(KNOWN_EVALUATION_GAPS), errors
    feasible = [o for o in outcomes if o.noop is not None and not o.noop.infeasible]
    false_passes = [
        o.task_id for o in feasible if not o.standin_expected and o.noop_score not in (None, 0.0)
    ]
    assert not false_passes, false_passes
    scored = [o for o in feasible if not o.standin_expected and not o.noop.error]
    assert len(scored) >= 3  # the metrics really ran on several feasible tasks
