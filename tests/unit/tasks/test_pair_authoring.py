"""Pair authoring from any folder: `templates new` and `templates validate --root DIR`
(rule and option keys, "did you mean", goldens and difficulty under DIR)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cua_rl.tasks.authoring import AuthoringRoot, difficulty_problems
from cua_rl.tasks.sources import LOCAL_SUITE

pytestmark = pytest.mark.usefixtures("registry_available")

LOCAL_TASK = "30923cac-13e9-5aec-a479-c00895993601"
"""A local-suite task (os domain): a pair for it needs no task file under DIR."""


def _spec(**over: Any) -> dict[str, Any]:
    spec = {
        "func": "check_include_exclude",
        "result": {"type": "vm_command_line", "command": "cat /tmp/x", "shell": True},
        "expected": {"type": "rule", "rules": {"include": ["a"], "exclude": ["b"]}},
    }
    return {**spec, **over}


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_rule_keys_are_read_from_the_metric_source() -> None:
    import cua_rl.evaluation.metrics  # noqa: F401 (registers the metrics)
    from cua_rl.evaluation.registry import METRICS
    from cua_rl.tasks.rule_keys import free_option_keys, rule_keys

    assert rule_keys(METRICS["check_include_exclude"].func) == {"include", "exclude"}
    assert rule_keys(METRICS["exact_match"].func) == {"expected"}
    # followed into the module-level helper the rule is passed to
    assert "type" in rule_keys(METRICS["is_expected_bookmarks"].func)
    assert free_option_keys(METRICS["compare_htmls"].func) == {"ignore_sdnum"}

    def opaque(result: Any, rules: Any) -> float:
        return float(all(k in result for k in rules))  # iterates: keys unknowable

    assert rule_keys(opaque) is None


def test_typos_in_rule_and_option_keys_fail_with_did_you_mean(
    tmp_path, invoke, problem_lines
) -> None:
    root = tmp_path / "dir"
    _write(root / "templates" / "t1.json", {"a": "Do a.", "b": "Do b.", "c": "Do c."})
    _write(
        root / "evaluators" / "t1" / "a.json",
        _spec(
            expected={
                "type": "rule",
                "rules": {"include": ["a"], "exlude": ["b"], "_note": "comment"},
            }
        ),
    )
    _write(
        root / "evaluators" / "t1" / "b.json",
        {
            "func": "compare_htmls",
            "result": {"type": "vm_file", "path": "/a", "dest": "a"},
            "expected": {"type": "vm_file", "path": "/b", "dest": "b"},
            "options": {"ignore_sdnun": True},
        },
    )
    _write(root / "evaluators" / "t1" / "c.json", _spec())
    result = invoke("templates", "validate", "--root", root)
    assert result.exit_code == 1
    a, b = (str(root / "evaluators" / "t1" / f"{n}.json") for n in "ab")
    assert problem_lines(result) == [
        f"{a}: $.expected.rules.exlude: expected a rule key metric 'check_include_exclude' "
        "reads (exclude, include), not 'exlude' (did you mean 'exclude'?)",
        f"{b}: $.options.ignore_sdnun: expected an option metric 'compare_htmls' reads "
        "(ignore_sdnum), not 'ignore_sdnun' (did you mean 'ignore_sdnum'?)",
    ]


def test_unknown_names_get_did_you_mean(tmp_path, invoke, problem_lines) -> None:
    root = tmp_path / "dir"
    _write(root / "templates" / "t1.json", {"a": "Do a."})
    _write(
        root / "evaluators" / "t1" / "a.json",
        {
            "func": "check_include_exclud",
            "result": {"type": "vm_command_lin", "command": "true"},
            "expected": {"type": "rule", "rules": {"include": []}},
            "postconfig": [{"type": "sleeep", "parameters": {"seconds": 1}}],
        },
    )
    lines = problem_lines(invoke("templates", "validate", "--root", root))
    assert any(
        "$.func: unknown metric 'check_include_exclud' (did you mean "
        "'check_include_exclude'?)" in line
        for line in lines
    ), lines
    assert any(
        "unknown getter 'vm_command_lin' (did you mean 'vm_command_line'?)" in line
        for line in lines
    ), lines
    assert any(
        "$.postconfig[0].type: unknown setup step 'sleeep' (did you mean 'sleep'?)" in line
        for line in lines
    ), lines


def test_new_scaffolds_a_pair_that_validates(tmp_path, invoke, problem_lines) -> None:
    root = tmp_path / "authoring"
    result = invoke("templates", "new", "my-task", "--root", root, "--instruction", "Mark it.")
    assert result.exit_code == 0, result.output
    for path in (
        "tasks/os/my-task.json",
        "templates/my-task.json",
        "evaluators/my-task/default.json",
        "golden/os/my-task.json",
        "difficulty.json",
    ):
        assert f"wrote {root / path}" in result.stdout
    assert json.loads((root / "templates" / "my-task.json").read_text()) == {"default": "Mark it."}
    assert json.loads((root / "difficulty.json").read_text()) == {"my-task": ["default"]}
    # a pair for a task of the project's local suite: no task file, the task's evaluator
    result = invoke("templates", "new", LOCAL_TASK, "--root", root)
    assert result.exit_code == 0, result.output
    assert not (root / "tasks" / "os" / f"{LOCAL_TASK}.json").exists()
    own = json.loads(next(LOCAL_SUITE.glob(f"*/{LOCAL_TASK}.json")).read_text())["evaluator"]
    assert json.loads((root / "evaluators" / LOCAL_TASK / "default.json").read_text()) == own
    result = invoke("templates", "validate", "--root", root)
    assert result.exit_code == 0 and problem_lines(result) == []
    assert "checked 2 task(s): 2 valid variant(s), 0 problem(s)" in result.stderr
    again = invoke("templates", "new", "my-task", "--root", root)
    assert again.exit_code == 1 and "exists already" in again.output
    bad = invoke("templates", "new", "../escape", "--root", root)
    assert bad.exit_code == 1 and "becomes a file name" in bad.output


def test_golden_and_difficulty_under_the_root_are_checked(tmp_path, invoke, problem_lines) -> None:
    root = tmp_path / "authoring"
    assert invoke("templates", "new", "my-task", "--root", root).exit_code == 0
    _write(root / "templates" / "my-task.json", {"default": "A.", "more": "B."})
    _write(root / "evaluators" / "my-task" / "more.json", _spec())
    _write(root / "golden" / "os" / "my-task.json", {"default": [{"sleep": 99}]})
    lines = problem_lines(invoke("templates", "validate", "--root", root))
    golden, difficulty = root / "golden" / "os" / "my-task.json", root / "difficulty.json"
    assert lines == [
        f"{golden}: $.more: expected golden steps for this variant",
        f"{golden}: $.default[0]: expected pyautogui (code string), execute (setup-step "
        "parameters) or sleep (0-30 s), got sleep=99",
        f'{difficulty}: $["my-task"]: expected'
        f" exactly the template's names ['default', 'more'],"
        " got ['default']",
    ]


def test_difficulty_entries(tmp_path) -> None:
    path = _write(
        tmp_path / "difficulty.json", {"t1": ["a", "b"], "t2": {"order": ["x"]}, "t3": "a"}
    )
    assert difficulty_problems(path, {"t1": ["b", "a"], "t2": ["x"]}) == []
    lines = [str(p) for p in difficulty_problems(path, {"t3": ["a"], "t4": ["a"]})]
    assert lines == [
        f"{path}: $.t3: expected an array of variant names (or an object with 'order'), got string",
        f"{path}: $.t4: expected an entry for task t4 listing its variants easiest first: ['a']",
    ]
    assert difficulty_problems(tmp_path / "none.json", {"t1": ["a"]}) == []


def test_the_project_is_an_authoring_root_of_its_own() -> None:
    layout = AuthoringRoot.of(None)
    assert layout.suite == LOCAL_SUITE and layout.difficulty == LOCAL_SUITE / "difficulty.json"
    other = AuthoringRoot.of(Path("/somewhere"))
    assert other.golden_file("os", "t") == Path("/somewhere/golden/os/t.json")
