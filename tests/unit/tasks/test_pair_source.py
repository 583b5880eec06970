"""A pair folder a user wrote (`cua-rl templates new`) is a task source of its own:
its tasks, its variants and its difficulty.json, never the project's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.config import RunConfig, load_config
from cua_rl.errors import TaskFormatError
from cua_rl.runtime.run_selector import task_templates
from cua_rl.tasks.sources import LOCAL_SUITE, difficulty_file, load_task_set

TASK = "marker-task"


@pytest.fixture
def pair_dir(tmp_path: Path) -> Path:
    """`templates new`, then a second, harder variant ordered by difficulty.json."""
    root = tmp_path / "pairs"
    result = CliRunner().invoke(
        cli,
        [
            "templates",
            "new",
            TASK,
            "--root",
            str(root),
            "--instruction",
            "Write done into /tmp/marker",
        ],
    )
    assert result.exit_code == 0, result.output
    template = json.loads((root / "templates" / f"{TASK}.json").read_text())
    template["loud"] = "Write DONE into /tmp/marker"
    (root / "templates" / f"{TASK}.json").write_text(json.dumps(template))
    spec = json.loads((root / "evaluators" / TASK / "default.json").read_text())
    spec["expected"]["rules"]["expected"] = "DONE\n"
    (root / "evaluators" / TASK / "loud.json").write_text(json.dumps(spec))
    (root / "difficulty.json").write_text(json.dumps({TASK: ["loud", "default"]}))
    return root


def test_a_pair_folder_is_a_task_source_with_its_own_difficulty(pair_dir: Path) -> None:
    task_set = load_task_set(f"pairs:{pair_dir}")
    assert [[v.evaluator_name for v in variants] for variants in task_set] == [["default", "loud"]]
    assert difficulty_file(f"pairs:{pair_dir}", None) == pair_dir.resolve() / "difficulty.json"
    cfg = load_config(RunConfig, overrides=[f"tasks.source=pairs:{pair_dir}"])
    templates, start = task_templates(cfg, task_set)
    assert templates[TASK].order == ["loud", "default"]  # the folder's order, not the project's
    assert start[TASK].evaluator_name == "default"


def test_a_templates_root_brings_its_difficulty_too(pair_dir: Path) -> None:
    assert difficulty_file("local", pair_dir) == pair_dir / "difficulty.json"
    assert difficulty_file("local", None) == LOCAL_SUITE / "difficulty.json"


def test_the_task_commands_read_a_pair_folder(pair_dir: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(cli, ["tasks", "list", "--source", f"pairs:{pair_dir}", "--json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == [
        {
            "id": TASK,
            "domain": "os",
            "instruction": "Write done into /tmp/marker",
            "variants": ["default", "loud"],
        }
    ]
    valid = runner.invoke(cli, ["tasks", "validate", "--source", f"pairs:{pair_dir}", "--json"])
    assert valid.exit_code == 0, valid.output
    assert json.loads(valid.stdout)["variants"] == 2


def test_a_pair_without_a_base_task_is_one_problem(pair_dir: Path) -> None:
    (pair_dir / "tasks" / "os" / f"{TASK}.json").unlink()
    with pytest.raises(TaskFormatError, match=f"a base task .*{TASK}.json"):
        load_task_set(f"pairs:{pair_dir}")
    with pytest.raises(TaskFormatError, match="no templates/ folder"):
        load_task_set(f"pairs:{pair_dir / 'nothing'}")


def test_the_pairs_flag_is_the_source_and_clears_a_presets_ids(pair_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["config", "show", "--preset", "quickstart", "--json"])
    assert json.loads(result.stdout)["tasks"]["ids"]  # quickstart names two local tasks
    from cua_rl.runtime.run_config import flag_overrides

    cfg = load_config(RunConfig, preset="quickstart", overrides=flag_overrides(pairs=pair_dir))
    assert (cfg.tasks.source, cfg.tasks.ids) == (f"pairs:{pair_dir}", [])
    evaluation = CliRunner().invoke(
        cli, ["config", "show", "--for", "eval", "--pairs", str(pair_dir), "--json"]
    )
    assert json.loads(evaluation.stdout)["tasks"]["split"] is None  # not osworld-verified
