import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cua_rl.cli.tasks import coverage_command

OSWORLD = Path(__file__).resolve().parents[3].parent / "shared" / "osworld"


@pytest.mark.skipif(not OSWORLD.is_dir(), reason="../shared/osworld (test data) is absent")
def test_every_osworld_verified_task_is_resolved() -> None:
    result = CliRunner().invoke(coverage_command, ["--osworld", str(OSWORLD), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["total"] == data["resolved"] == 369
    assert data["missing"] == {} and data["malformed"] == 0
    assert sum(d["total"] for d in data["per_domain"].values()) == 369
    assert data["per_domain"]["chrome"] == {"total": 46, "resolved": 46}


def test_missing_names_are_counted(tmp_path: Path) -> None:
    folder = tmp_path / "examples" / "os"
    folder.mkdir(parents=True)
    task = {
        "id": "t1",
        "instruction": "x",
        "config": [],
        "snapshot": "os",
        "related_apps": [],
        "evaluator": {
            "func": "no_such_metric",
            "result": {"type": "vm_file", "path": "/a", "dest": "a"},
            "expected": {"type": "rule", "rules": {"x": 1}},
        },
    }
    (folder / "t1.json").write_text(json.dumps(task))
    result = CliRunner().invoke(coverage_command, ["--osworld", str(tmp_path), "--json"])
    data = json.loads(result.output)
    assert (data["total"], data["resolved"]) == (1, 0)
    assert data["missing"] == {"no_such_metric": 1}
