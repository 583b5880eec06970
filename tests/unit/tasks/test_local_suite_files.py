"""The local task suite (cua_rl/tasks/data/local) and its pairs, checked without a desktop.

What a desktop run proves (golden 1, initial state 0) is in
tests/integration/tasks/test_local_suite.py; here: every file loads, the suite
is as large and as broad as promised, and every variant has a golden solution.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from cua_rl.tasks.check_jobs import plan_jobs, suite_groups
from cua_rl.tasks.golden_files import read_golden
from cua_rl.tasks.osworld import load_tasks
from cua_rl.tasks.sources import DATA_ROOT, LOCAL_SUITE

SUITE, REPO = LOCAL_SUITE, DATA_ROOT  # the suite and its pairs' root

MIN_PER_DOMAIN = {
    "libreoffice_calc": 5,
    "libreoffice_writer": 3,
    "libreoffice_impress": 3,
    "os": 5,
    "text_editor": 3,
}
HEAVY_APP_DOMAINS = ("gimp", "vlc", "thunderbird", "chrome")


@pytest.fixture(scope="module")
def groups():
    return suite_groups(SUITE, REPO)


def test_every_task_loads_and_ids_match_the_split():
    load = load_tasks(SUITE)
    assert not load.problems, "\n".join(map(str, load.problems))
    assert not load.unimplemented, load.unimplemented
    assert len(load.tasks) >= 24
    split = json.loads((SUITE / "tasks.json").read_text())
    assert {d: sorted(ids) for d, ids in split.items()} == {
        d: sorted(t.task_id for t in load.tasks if t.domain == d)
        for d in {t.domain for t in load.tasks}
    }


def test_domain_coverage():
    counts = Counter(t.domain for t in load_tasks(SUITE).tasks)
    for domain, minimum in MIN_PER_DOMAIN.items():
        assert counts[domain] >= minimum, (domain, counts)
    assert sum(counts[d] for d in HEAVY_APP_DOMAINS) >= 1, counts


def test_variants_and_difficulty_order(groups):
    with_variants = {t.task_id: [v.evaluator_name for v in vs] for t, vs in groups if len(vs) > 1}
    assert len(with_variants) >= 8
    assert all(2 <= len(names) <= 4 for names in with_variants.values()), with_variants
    order = json.loads((SUITE / "difficulty.json").read_text())
    assert set(order) == set(with_variants)
    for task_id, names in order.items():
        assert sorted(names) == sorted(with_variants[task_id]), task_id


def test_every_variant_has_a_golden_solution(groups):
    for task, variants in groups:
        golden = read_golden(task)
        assert sorted(golden) == sorted(v.evaluator_name for v in variants), task.task_id
    jobs, missing = plan_jobs(groups)
    assert not missing, [m.line() for m in missing]
    variants = sum(len(vs) for _, vs in groups)
    assert len(jobs) == len(groups) + variants  # one initial-state job per task


def test_templates_validate_passes_for_the_repo(invoke):
    result = invoke("templates", "validate")
    assert result.exit_code == 0, result.output
    result = invoke("tasks", "validate", "--source", "local")
    assert result.exit_code == 0, result.output
