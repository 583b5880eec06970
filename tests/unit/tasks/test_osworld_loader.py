import json
from collections import Counter

import pytest

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.osworld import DEFAULT_EVALUATOR, examples_dir, load_osworld, load_task_file

TASK_ID = "00000000-0000-0000-0000-000000000001"


@pytest.mark.shared
def test_every_osworld_verified_task_loads(osworld_dir):
    load = load_osworld(osworld_dir)
    assert [str(p) for p in load.problems] == []
    assert len(load.tasks) == 369
    assert Counter(t.domain for t in load.tasks) == {
        "chrome": 46,
        "gimp": 26,
        "libreoffice_calc": 47,
        "libreoffice_impress": 47,
        "libreoffice_writer": 23,
        "multi_apps": 101,
        "os": 24,
        "thunderbird": 15,
        "vlc": 17,
        "vs_code": 23,
    }
    by_id = {t.task_id: t for t in load.tasks}
    # the one task without `config` (infeasible) loads with no setup steps
    assert by_id["c288e301-e626-4b98-a1ab-159dcb162af5"].config == ()
    assert all(t.evaluator_name == DEFAULT_EVALUATOR and t.source_path for t in load.tasks)


def test_checkout_root_or_evaluation_examples_folder(tmp_path, write_json, valid_task):
    write_json(tmp_path / "evaluation_examples" / "examples" / "os" / f"{TASK_ID}.json", valid_task)
    assert examples_dir(tmp_path) == tmp_path / "evaluation_examples"
    assert examples_dir(tmp_path / "evaluation_examples") == tmp_path / "evaluation_examples"
    [task] = load_osworld(tmp_path).tasks
    assert (task.task_id, task.domain, task.snapshot) == (TASK_ID, "os", "os")
    assert task.config == tuple(valid_task["config"])
    with pytest.raises(TaskFormatError, match="expected an OSWorld checkout"):
        examples_dir(tmp_path / "evaluation_examples" / "examples")


def test_load_task_file_raises_naming_file_and_path(tmp_path, write_json, valid_task):
    del valid_task["instruction"]
    file = write_json(tmp_path / "os" / f"{TASK_ID}.json", valid_task)
    with pytest.raises(TaskFormatError) as err:
        load_task_file(file)
    assert f"{file}: $.instruction: expected a string (key 'instruction' is missing)" in str(
        err.value
    )


def _break(task, how):
    if how == "missing key":
        del task["evaluator"]["func"]
    elif how == "missing instruction":
        del task["instruction"]
    elif how == "wrong type":
        task["related_apps"] = "os"
    elif how == "wrong id":
        task["id"] = "another-id"
    elif how == "config not a list":
        task["config"] = {"type": "execute"}
    elif how == "step without type":
        task["config"][0] = {"parameters": {}}
    return task


@pytest.mark.parametrize(
    ("how", "path"),
    [
        ("missing key", "$.evaluator.func"),
        ("missing instruction", "$.instruction"),
        ("wrong type", "$.related_apps"),
        ("wrong id", "$.id"),
        ("config not a list", "$.config"),
        ("step without type", "$.config[0]"),
        ("bad json", "$"),
    ],
)
def test_tasks_validate_one_line_per_malformed_task(
    tmp_path, write_json, valid_task, invoke, problem_lines, how, path
):
    good = dict(valid_task, id="00000000-0000-0000-0000-000000000002")
    write_json(tmp_path / "examples" / "os" / f"{good['id']}.json", good)
    content = '{"id": "x",' if how == "bad json" else _break(valid_task, how)
    bad = write_json(tmp_path / "examples" / "os" / f"{TASK_ID}.json", content)
    result = invoke(
        "tasks", "validate", "--source", f"osworld:{tmp_path}", "--templates-root", tmp_path
    )
    assert result.exit_code == 1
    [line] = problem_lines(result)
    assert line.startswith(f"{bad}: {path}"), line
    assert "1 tasks loaded" in result.stderr


def test_unknown_metric_fails_validate_with_a_suggestion(
    tmp_path, write_json, valid_task, invoke, problem_lines, registry_available
):
    valid_task["evaluator"]["func"] = "exact_mach"  # typo of a registered metric
    valid_task["evaluator"]["result"]["type"] = "no_such_getter_xyz"
    file = write_json(tmp_path / "examples" / "os" / f"{TASK_ID}.json", valid_task)
    result = invoke("tasks", "validate", "--source", f"osworld:{tmp_path}")
    assert result.exit_code == 1, result.output
    assert sorted(problem_lines(result)) == [
        f"{file}: $.evaluator.func: unknown metric 'exact_mach' (did you mean 'exact_match'?)",
        f"{file}: $.evaluator.result.type: unknown getter 'no_such_getter_xyz'",
    ]


def test_unknown_setup_step_fails_validate_and_the_run_start(
    tmp_path, write_json, valid_task, invoke, problem_lines
):
    from cua_rl.errors import UnknownNameError
    from cua_rl.tasks.sources import load_task_set

    valid_task["config"].append({"type": "exeucte", "parameters": {}})
    file = write_json(tmp_path / "examples" / "os" / f"{TASK_ID}.json", valid_task)
    result = invoke("tasks", "validate", "--source", f"osworld:{tmp_path}")
    assert result.exit_code == 1, result.output
    assert problem_lines(result) == [
        f"{file}: $.config[1].type: unknown setup step 'exeucte' (did you mean 'execute'?)"
    ]
    with pytest.raises(UnknownNameError, match="exeucte"):  # train/eval/rollout refuse
        load_task_set(f"osworld:{tmp_path}", templates_root=tmp_path)


def test_unknown_name_in_a_template_variant_names_its_evaluator_file(
    tmp_path, write_json, valid_task, valid_evaluator, invoke, problem_lines
):
    from cua_rl.errors import UnknownNameError
    from cua_rl.tasks.sources import load_task_set

    write_json(tmp_path / "examples" / "os" / f"{TASK_ID}.json", valid_task)
    write_json(tmp_path / "templates" / f"{TASK_ID}.json", {"easy": "a", "hard": "b"})
    write_json(tmp_path / "evaluators" / TASK_ID / "easy.json", valid_evaluator)
    broken = write_json(
        tmp_path / "evaluators" / TASK_ID / "hard.json",
        dict(valid_evaluator, func="no_such_metric_xyz"),
    )
    result = invoke(
        "tasks", "validate", "--source", f"osworld:{tmp_path}", "--templates-root", tmp_path
    )
    assert result.exit_code == 1, result.output
    assert problem_lines(result) == [
        f"{broken}: $.evaluator.func: unknown metric 'no_such_metric_xyz'"
    ]
    with pytest.raises(UnknownNameError, match="hard.json"):
        load_task_set(f"osworld:{tmp_path}", templates_root=tmp_path)


@pytest.mark.shared
def test_tasks_list_and_show(osworld_dir, invoke):
    result = invoke(
        "tasks", "list", "--source", f"osworld:{osworld_dir}", "--split", "rlanything-ood"
    )
    assert result.exit_code == 0
    assert len(result.stdout.split()) == 147
    rows = json.loads(
        invoke(
            "tasks", "list", "--source", f"osworld:{osworld_dir}", "--split", "test_small", "--json"
        ).stdout
    )
    assert rows and set(rows[0]) == {"id", "domain", "instruction", "variants"}
    shown = json.loads(
        invoke("tasks", "show", rows[0]["id"], "--source", f"osworld:{osworld_dir}").stdout
    )
    assert shown["task_id"] == rows[0]["id"] and shown["variants"][0]["name"] == "default"


def test_unknown_source_and_missing_task(tmp_path, invoke, write_json, valid_task):
    write_json(tmp_path / "examples" / "os" / f"{TASK_ID}.json", valid_task)
    result = invoke("tasks", "show", "nope", "--source", f"osworld:{tmp_path}")
    assert result.exit_code != 0 and "task 'nope' not found" in result.output
    result = invoke("tasks", "list", "--source", "somewhere")
    assert result.exit_code != 0 and "expected osworld:PATH, local or pairs:DIR" in result.output


def test_local_source_without_suite_says_so(invoke, tmp_path, monkeypatch):
    """A checkout without the suite (e.g. a trimmed install) gets an error, not a trace."""
    monkeypatch.setattr("cua_rl.tasks.sources.LOCAL_SUITE", tmp_path / "no-suite")
    result = invoke("tasks", "list", "--source", "local")
    assert result.exit_code == 1 and "no local task suite" in result.output
