import pytest

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.osworld import load_task_file
from cua_rl.tasks.pairs import (
    evaluator_file_stem,
    evaluator_name_from_stem,
    evaluator_path,
    load_variants,
    write_pair,
)

TASK_ID = "00000000-0000-0000-0000-000000000001"


@pytest.mark.parametrize("name", ["evaluator1", "a/b", ".hidden", "..", "é x%2F", "a%b", "~x"])
def test_evaluator_file_names_are_safe_and_invertible(name):
    stem = evaluator_file_stem(name)
    assert "/" not in stem and not stem.startswith(".")
    assert evaluator_name_from_stem(stem) == name
    assert evaluator_file_stem("evaluator1") == "evaluator1"


@pytest.fixture
def pair_root(tmp_path, valid_evaluator):
    """A root with one task whose template has two evaluator variants."""
    root = tmp_path / "pairs"
    harder = dict(valid_evaluator, expected={**valid_evaluator["expected"], "value": "hi hi"})
    write_pair(
        root,
        TASK_ID,
        {"evaluator1": "Print hi.", "evaluator2": "Print hi twice."},
        {"evaluator1": valid_evaluator, "evaluator2": harder},
    )
    return root


@pytest.fixture
def task(tmp_path, write_json, valid_task):
    return load_task_file(write_json(tmp_path / "examples" / "os" / f"{TASK_ID}.json", valid_task))


def test_load_variants(task, pair_root, tmp_path):
    assert load_variants(task, tmp_path / "empty") == [task]
    assert load_variants(task, None) == [task]
    variants = load_variants(task, pair_root)
    assert [v.variant_id for v in variants] == [f"{TASK_ID}:evaluator1", f"{TASK_ID}:evaluator2"]
    assert variants[1].instruction == "Print hi twice." and variants[1].config == task.config
    evaluator_path(pair_root, TASK_ID, "evaluator2").unlink()
    with pytest.raises(TaskFormatError, match=r"\$\.evaluator2: expected an evaluator file"):
        load_variants(task, pair_root)


def test_valid_pairs_have_no_problem(pair_root, invoke, problem_lines):
    result = invoke("templates", "validate", "--root", pair_root)
    assert problem_lines(result) == [] and result.exit_code == 0, result.output
    assert "1 task(s): 2 valid variant(s)" in result.stderr


def _template(root):
    return root / "templates" / f"{TASK_ID}.json"


def _evaluator(root, name="evaluator2"):
    return root / "evaluators" / TASK_ID / f"{name}.json"


@pytest.mark.parametrize(
    ("how", "file", "path"),
    [
        ("missing key", _evaluator, "$.func"),
        ("wrong type", _template, "$.evaluator2"),
        ("template name without evaluator file", _template, "$.evaluator2"),
        ("evaluator file without template name", lambda r: _evaluator(r, "extra"), "$"),
        ("bad json in evaluator", _evaluator, "$"),
        ("bad json in template", _template, "$"),
    ],
)
def test_templates_validate_one_line_per_problem(
    pair_root, write_json, valid_evaluator, invoke, problem_lines, how, file, path
):
    template = {"evaluator1": "Print hi.", "evaluator2": "Print hi twice."}
    if how == "missing key":
        del valid_evaluator["func"]
        write_json(_evaluator(pair_root), valid_evaluator)
    elif how == "wrong type":
        write_json(_template(pair_root), dict(template, evaluator2=3))
    elif how == "template name without evaluator file":
        _evaluator(pair_root).unlink()
    elif how == "evaluator file without template name":
        write_json(_evaluator(pair_root, "extra"), valid_evaluator)
    elif how == "bad json in evaluator":
        write_json(_evaluator(pair_root), '{"func": }')
    else:
        write_json(_template(pair_root), '{"evaluator1": "x",}')
    result = invoke("templates", "validate", "--root", pair_root)
    assert result.exit_code == 1
    [line] = problem_lines(result)
    assert line.startswith(f"{file(pair_root)}: {path}: "), line


def test_unknown_metric_is_a_templates_problem(
    pair_root, write_json, valid_evaluator, invoke, problem_lines, registry_available
):
    write_json(_evaluator(pair_root), dict(valid_evaluator, func="no_such_metric_xyz"))
    result = invoke("templates", "validate", "--root", pair_root)
    assert result.exit_code == 1
    [line] = problem_lines(result)
    assert line.startswith(f"{_evaluator(pair_root)}: $.func: ") and "no_such_metric_xyz" in line


def test_templates_validate_paths(pair_root, invoke, problem_lines):
    for target in (
        _template(pair_root),
        _evaluator(pair_root),
        _evaluator(pair_root).parent,
        pair_root,
    ):
        result = invoke("templates", "validate", target)
        assert result.exit_code == 0, result.output
        assert "checked 1 task(s)" in result.stderr
    assert invoke("templates", "validate", "--root", pair_root, TASK_ID).exit_code == 0
    result = invoke("templates", "validate", pair_root / "nowhere")
    assert result.exit_code == 2 and "expected templates/<id>.json" in result.output


def test_templates_validate_nothing_to_check_and_on_desktop(tmp_path, pair_root, invoke):
    result = invoke("templates", "validate", "--root", tmp_path / "empty")
    assert result.exit_code == 0 and "nothing to check" in result.output
    # --on-desktop needs a base task (ROOT/tasks/ or the local suite); an id found in
    # neither fails before any desktop starts (the desktop run: tests/integration/tasks).
    result = invoke("templates", "validate", "--root", pair_root, "--on-desktop", TASK_ID)
    assert result.exit_code == 1 and f"no base task for {TASK_ID} under" in result.output
    assert str(pair_root.resolve() / "tasks") in result.output
