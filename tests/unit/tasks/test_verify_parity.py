"""`cua-rl tasks parity`: verify runs of several providers side by side (issue 50)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cua_rl.cli import cli


def _run(folder: Path, provider: str | None, verdicts: list[tuple[str, str, str, bool]]) -> Path:
    folder.mkdir(parents=True)
    data = {
        "verdicts": [
            {
                "task_id": t,
                "domain": d,
                "status": s,
                "ok": ok,
                "reason": "" if s in ("pass", "infeasible") and ok else f"why {t}",
            }
            for t, d, s, ok in verdicts
        ]
    }
    if provider is not None:
        data = {"provider": provider, "image": f"img-{provider}", **data}
    (folder / "verify.json").write_text(json.dumps(data))
    return folder


def test_the_table_counts_each_provider_and_lists_every_difference(tmp_path: Path) -> None:
    local = _run(
        tmp_path / "local",
        None,
        [  # a run from before providers: local
            ("a", "os", "pass", True),
            ("b", "os", "pass", True),
            ("c", "chrome", "pass", True),
            ("i", "os", "infeasible", True),
            ("n", "os", "not_runnable", True),
        ],
    )
    container = _run(
        tmp_path / "container",
        "container",
        [
            ("a", "os", "pass", True),
            ("b", "os", "error", True),
            ("c", "chrome", "pass", True),
            ("i", "os", "infeasible", False),
            ("n", "os", "not_runnable", True),
        ],
    )
    out = tmp_path / "report"
    done = CliRunner().invoke(
        cli, ["tasks", "parity", str(local), str(container), "--out", str(out), "--json"]
    )
    assert done.exit_code == 1, done.output  # b passes on local only
    result = json.loads(done.stdout)
    assert result["providers"] == ["local", "container"]
    assert result["images"] == {"local": "host", "container": "img-container"}
    assert result["per_domain"]["os"]["local"] == {
        "tasks": 4,
        "attempted": 2,
        "pass": 2,
        "infeasible_ok": 1,
    }
    assert result["per_domain"]["os"]["container"]["pass"] == 1
    assert [d["task_id"] for d in result["differences"]] == ["b", "i"]
    assert result["passing_on_reference_only"] == ["b", "i"]
    page = (out / "parity.md").read_text()
    assert "| os | 2 / 2 (1) | 1 / 2 (0) |" in page and "| **all** | **3 / 3 (1)** |" in page
    assert "- `os/b`: local: pass; container: error (why b)" in page
    assert (out / "parity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_same_verdicts_exit_0_and_a_missing_run_is_one_line(tmp_path: Path) -> None:
    one = _run(tmp_path / "one", "local", [("a", "os", "pass", True)])
    two = _run(tmp_path / "two", "container", [("a", "os", "pass", True)])
    done = CliRunner().invoke(
        cli, ["tasks", "parity", str(one), str(two), "--out", str(tmp_path / "r")]
    )
    assert done.exit_code == 0 and "0 task(s) whose verdict differs" in done.output
    (tmp_path / "empty").mkdir()
    done = CliRunner().invoke(cli, ["tasks", "parity", str(one), str(tmp_path / "empty")])
    assert done.exit_code == 1 and "verify.json: missing" in done.output
