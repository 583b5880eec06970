"""check_evaluator_spec: structure errors vs unimplemented names, and the OSWorld corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cua_rl.evaluation import METRICS, check_evaluator_spec, get_metric, metric

RULE = {"type": "rule", "rules": {"expected": "x"}}
OSWORLD = Path(__file__).resolve().parents[3].parent / "shared" / "osworld" / "examples"


def test_valid_single_and_list_specs_have_no_findings() -> None:
    single = {"func": "exact_match", "result": RULE, "expected": RULE}
    listed = {
        "func": ["exact_match", "check_include_exclude"],
        "conj": "or",
        "result": [RULE, RULE],
        "expected": [RULE, RULE],
        "options": [{}, None],
    }
    assert check_evaluator_spec(single, "t: $.evaluator").ok
    assert check_evaluator_spec(listed, "t: $.evaluator").ok
    assert check_evaluator_spec({"func": "infeasible"}, "t: $.evaluator").ok


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        ({"result": RULE}, "$.evaluator.func", "metric name"),
        ({"func": ["exact_match", 3], "result": [RULE, RULE]}, "$.evaluator.func", "metric"),
        (
            {"func": "exact_match", "conj": "xor", "result": RULE, "expected": RULE},
            "$.evaluator.conj",
            "'and' or 'or'",
        ),
        (
            {"func": ["exact_match", "exact_match"], "result": [RULE], "expected": [RULE, RULE]},
            "$.evaluator.result",
            "2 entries",
        ),
        (
            {"func": ["exact_match", "exact_match"], "result": [RULE, RULE], "expected": RULE},
            "$.evaluator.expected",
            "aligned with func",
        ),
        (
            {"func": "exact_match", "result": [RULE], "expected": RULE},
            "$.evaluator.result",
            "single metric",
        ),
        ({"func": "exact_match", "expected": RULE}, "$.evaluator.result", "getter object"),
        (
            {"func": "exact_match", "result": {"rules": {}}, "expected": RULE},
            "$.evaluator.result.type",
            "getter type",
        ),
        (
            {"func": "exact_match", "result": {"type": "vm_file", "path": "/a"}, "expected": RULE},
            "$.evaluator.result.dest",
            "requires 'dest'",
        ),
        (
            {
                "func": "exact_match",
                "result": {"type": "vm_file", "path": "/a", "dest": "../x"},
                "expected": RULE,
            },
            "$.evaluator.result.dest",
            "bare file name",
        ),
        ({"func": "exact_match", "result": RULE}, "$.evaluator.expected", "an 'expected' getter"),
        (
            {"func": "exact_match", "result": RULE, "expected": RULE, "options": {"fuzzy": 1}},
            "$.evaluator.options",
            "unexpected keyword",
        ),
        (
            {
                "func": ["exact_match", "exact_match"],
                "result": [RULE, RULE],
                "expected": [RULE, RULE],
                "options": [{}, {"x": 1}],
            },
            "$.evaluator.options[1]",
            "exact_match",
        ),
        (
            {
                "func": "compare_table",
                "result": RULE,
                "options": {"rules": [{"type": "check_cell"}]},
            },
            "$.evaluator.options.rules[0].sheet_idx",
            "requires",
        ),
        (
            {"func": "exact_match", "result": RULE, "expected": RULE, "optoins": {}},
            "$.evaluator.optoins",
            "one of",
        ),
    ],
)
def test_malformed_specs_name_path_and_expectation(spec: dict, path: str, words: str) -> None:
    report = check_evaluator_spec(spec, "tasks/a.json: $.evaluator")
    assert report.errors, spec
    assert any(e.startswith(f"tasks/a.json: {path}") and words in e for e in report.errors), (
        report.errors
    )


def test_unregistered_names_are_unimplemented_not_errors() -> None:
    spec = {
        "func": ["no_such_metric", "exact_match"],
        "result": [{"type": "no_such_getter"}, RULE],
        "expected": [None, RULE],
        "options": [{}, {}],
    }
    report = check_evaluator_spec(spec, "w")
    assert report.errors == []
    assert report.unimplemented == ["no_such_getter", "no_such_metric"]
    table = {
        "func": "compare_table",
        "result": RULE,
        "options": {"rules": [{"type": "hologram", "sheet_idx0": 0, "sheet_idx1": "EI0"}]},
    }
    assert check_evaluator_spec(table, "w").unimplemented == ["compare_table(hologram)"]


def test_user_registered_metric_is_checked_by_signature() -> None:
    @metric("test_only_ratio")
    def ratio(result: float, *, scale: float = 1.0) -> float:
        return result * scale

    try:
        assert get_metric("test_only_ratio").func is ratio
        ok = {"func": "test_only_ratio", "result": RULE, "options": {"scale": 2}}
        bad = {"func": "test_only_ratio", "result": RULE, "options": {"scael": 2}}
        assert check_evaluator_spec(ok, "w").ok
        assert check_evaluator_spec(bad, "w").errors
    finally:
        METRICS.pop("test_only_ratio")


@pytest.mark.shared
@pytest.mark.skipif(not OSWORLD.is_dir(), reason=f"OSWorld task files not found at {OSWORLD}")
def test_every_osworld_task_is_well_formed() -> None:
    files = sorted(OSWORLD.glob("*/*.json"))
    assert len(files) == 369
    errors: list[str] = []
    for file in files:
        spec = json.loads(file.read_text())["evaluator"]
        errors += check_evaluator_spec(spec, f"{file.name}: $.evaluator").errors
    assert errors == []
