import pytest

NOT_IMPLEMENTED = "is not implemented"


@pytest.mark.shared
@pytest.mark.parametrize("level", ["new_examples", "."])
def test_import_yields_pairs_that_validate(openagentrl_dir, tmp_path, invoke, level):
    out = tmp_path / "out"
    result = invoke("templates", "import-openagentrl", openagentrl_dir / level, "--out", out)
    assert result.exit_code == 0, result.output
    assert len(list((out / "templates").glob("*.json"))) == 223
    assert len(list((out / "evaluators").glob("*/*.json"))) == 295
    result = invoke("templates", "validate", "--root", out)
    # Metric/getter names the evaluation registry does not implement yet are
    # coverage work, not structural errors of the import.
    structural = [line for line in result.stdout.splitlines() if NOT_IMPLEMENTED not in line]
    assert structural == []


def test_import_rejects_mismatched_names(tmp_path, write_json, valid_task, invoke):
    task = dict(valid_task, task_template={"evaluator1": "x"}, evaluator_list={"other": {}})
    file = write_json(tmp_path / "new_examples" / "os" / f"{valid_task['id']}.json", task)
    result = invoke("templates", "import-openagentrl", tmp_path, "--out", tmp_path / "out")
    assert result.exit_code == 1
    assert f"{file}: $.evaluator_list: expected the same names as $.task_template" in result.output
