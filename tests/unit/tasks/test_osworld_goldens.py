"""The project's golden solutions for OSWorld tasks and its two lists of tasks set apart
(`needs_real_assets.json`, `local_gaps.json`) are well formed and name real tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cua_rl.tasks.golden_files import check_golden_step
from cua_rl.tasks.preflight import local_gaps
from cua_rl.tasks.verify import GOLDEN_ROOT, needs_real_assets

OSWORLD = Path(__file__).resolve().parents[3].parent / "shared" / "osworld"
GOLDENS = sorted((GOLDEN_ROOT / "golden").glob("*/*.json"))


def test_every_golden_is_one_default_solution_of_valid_steps() -> None:
    assert len(GOLDENS) >= 60
    for path in GOLDENS:
        data = json.loads(path.read_text())
        assert list(data) == ["default"], path
        assert data["default"], path
        for i, step in enumerate(data["default"]):
            check_golden_step(step, f"{path}: $.default[{i}]")


def test_goldens_and_lists_name_tasks_of_the_osworld_set() -> None:
    if not (OSWORLD / "examples").is_dir():
        pytest.skip(f"OSWorld task files not found at {OSWORLD} (the ../shared test data)")
    domains = {p.stem: p.parent.name for p in (OSWORLD / "examples").glob("*/*.json")}
    for path in GOLDENS:
        assert domains.get(path.stem) == path.parent.name, f"{path}: no such task in its domain"
    apart, gaps = needs_real_assets(), local_gaps()
    assert set(apart) <= set(domains) and set(gaps) <= set(domains)
    assert not set(apart) & set(gaps), "a task is either set apart or not runnable, not both"
