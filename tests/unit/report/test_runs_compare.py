"""`cua-rl runs compare A B` on stored evaluations: exactly the known flips, the
manifest differences beyond the model first, a run against itself is no difference,
an OSWorld results folder is a side, and a clear difference is called beyond noise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests_support.eval_runs import build_eval_run, manifest_of

from cua_rl.cli import cli

A_SCORES = {
    "t1": ("os", [1.0, 1.0]),
    "t2": ("os", [0.0, 0.0]),
    "t3": ("libreoffice_calc", [1.0, 0.0]),
    "t4": ("libreoffice_calc", [0.0, 0.0]),
    "t6": ("gimp", [0.0, 1.0]),
}
B_SCORES = {
    "t1": ("os", [1.0, 1.0]),
    "t2": ("os", [1.0, 1.0]),  # gained
    "t3": ("libreoffice_calc", [0.0, 0.0]),  # lost (a mean of 0.5 was solved)
    "t4": ("libreoffice_calc", [0.0, 0.0]),
    "t6": ("gimp", [1.0, 0.0]),  # no flip
    "t5": ("os", [1.0, 1.0]),
}  # B only


def _compare(*args: str) -> dict:
    result = CliRunner().invoke(cli, ["runs", "compare", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    a = build_eval_run(
        tmp_path / "a",
        A_SCORES,
        manifest=manifest_of(model="org/model-a", quick_id="qa", commit="c1", provider="docker"),
    )
    b = build_eval_run(
        tmp_path / "b",
        B_SCORES,
        manifest=manifest_of(model="org/model-b", quick_id="qb", commit="c2", provider="qemu"),
    )
    return a, b


def test_compare_lists_exactly_the_flips_and_what_differs_beyond_the_model(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = runs
    got = _compare(str(a), str(b), "--png", str(tmp_path / "diff.png"))
    assert got["flips"] == {"gained": ["t2"], "lost": ["t3"]}
    assert got["common_tasks"] == 5 and got["only_b"] == ["t5"] and got["only_a"] == []
    assert {d["key"] for d in got["manifest"]["beyond_model"]} == {
        "run.code.commit",
        "desktops.provider",
    }
    assert {d["key"] for d in got["manifest"]["model"]} == {"model.name", "model.identity.quick_id"}
    # B - A per task: t2 +1, t3 -0.5, t6 0; over 5 tasks
    assert got["difference"]["difference"]["estimate"] == pytest.approx((1 - 0.5) / 5)
    assert got["tasks"]["t3"] == {"a": 0.5, "b": 0.0, "difference": -0.5}
    assert got["mcnemar"]["a_only"] == 1 and got["mcnemar"]["b_only"] == 1
    assert got["mcnemar"]["p_value"] == 1.0 and "within noise" in got["verdict"]
    assert (tmp_path / "diff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    text = CliRunner().invoke(cli, ["runs", "compare", str(a), str(b)]).output
    assert (
        text.index("What differs beyond the model:")
        < text.index("run.code.commit")
        < text.index("The model:")
        < text.index("model.identity.quick_id")
    )
    assert "Gained (solved on B only): t2" in text and "Lost (solved on A only): t3" in text


def test_a_run_compared_with_itself_is_no_difference(runs: tuple[Path, Path]) -> None:
    a, _ = runs
    got = _compare(str(a), str(a))
    assert got["flips"] == {"gained": [], "lost": []}
    difference = got["difference"]["difference"]
    assert (difference["estimate"], difference["low"], difference["high"]) == (0.0, 0.0, 0.0)
    assert got["manifest"]["beyond_model"] == [] and got["manifest"]["model"] == []
    assert got["verdict"].startswith("B scores the same as A") and "0 flips" in got["verdict"]


def test_an_osworld_results_folder_is_a_side(runs: tuple[Path, Path]) -> None:
    a, _ = runs
    exported = CliRunner().invoke(cli, ["export", "osworld-results", str(a)])
    assert exported.exit_code == 0, exported.output
    got = _compare(str(a), str(a / "osworld-results"))
    assert got["b"]["kind"] == "OSWorld results folder" and got["b"]["model"] == "model-a"
    assert got["common_tasks"] == 5 and got["flips"] == {"gained": [], "lost": []}
    assert got["difference"]["difference"]["estimate"] == 0.0
    assert any(
        "B has no manifest (an OSWorld results folder" in n for n in got["manifest"]["notes"]
    )


def test_a_clear_difference_is_beyond_noise(tmp_path: Path) -> None:
    tasks = {f"t{i}": ("os", [0.0]) for i in range(15)}
    better = {t: ("os", [1.0 if i < 12 else 0.0]) for i, t in enumerate(tasks)}
    a = build_eval_run(tmp_path / "a", tasks, n_steps=1)
    b = build_eval_run(tmp_path / "b", better, n_steps=1)
    got = _compare(str(a), str(b))
    assert got["mcnemar"]["p_value"] == pytest.approx(2 * 0.5**12)
    assert got["verdict"].startswith("B is 80.0 points higher than A on 15 common tasks")
    assert "beyond noise" in got["verdict"]
    assert any("a run made before manifests" in n for n in got["manifest"]["notes"])


def test_a_folder_that_is_neither_is_refused(tmp_path: Path, runs: tuple[Path, Path]) -> None:
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(cli, ["runs", "compare", str(runs[0]), str(tmp_path / "empty")])
    assert result.exit_code == 1
    assert "neither a `cua-rl eval` run directory" in result.output
