"""The experiment files shipped in experiments/ are valid (every arm's config resolves,
`--list` lays them out), and a bad file is refused in one line naming the problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cua_rl.cli.root import cli

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = sorted((ROOT / "experiments").glob("*.yaml"))


def test_the_paper_and_miniature_files_are_shipped() -> None:
    assert {p.stem for p in SHIPPED} >= {
        "figure4-paper",
        "figure6a-paper",
        "table2-paper",
        "figure4-miniature",
        "figure6a-miniature",
    }


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_each_shipped_file_lists_its_cells(path: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["experiment", str(path), "--out", str(tmp_path), "--list", "--json"]
    )
    assert result.exit_code == 0, result.output
    cells = json.loads(result.output)["cells"]
    arms = {c["arm"] for c in cells} - {"before", "held-out"}
    assert len(arms) >= 3 and {c["state"] for c in cells} == {"pending"}
    seeds = {c["seed"] for c in cells if c["arm"] != "held-out"}
    assert len(seeds) == 3  # three seeds per arm, fixed in the file


def test_figure6a_runs_the_reward_model_only_arm_after_the_arm_it_takes_from(
    tmp_path: Path,
) -> None:
    path = ROOT / "experiments" / "figure6a-miniature.yaml"
    result = CliRunner().invoke(
        cli, ["experiment", str(path), "--out", str(tmp_path), "--list", "--json"]
    )
    names = [c["cell"] for c in json.loads(result.output)["cells"]]
    assert names.index("integrated-s11") < names.index("prm-only-s11")
    steps = {c["cell"]: c["steps"] for c in json.loads(result.output)["cells"]}
    assert steps["prm-only-s11"][0] == "model_from"
    assert "prm@8" not in steps["prm-only-s11"]  # a frozen reward model: no accuracy
    assert "prm@8" not in steps["outcome-s11"] and "prm@8" in steps["integrated-s11"]


BASE = """
name: bad
seeds: [1, 2]
baseline: a
arms:
  - {name: a, preset: quickstart}
  - {name: b, preset: quickstart, overrides: [OVERRIDE]}
eval: {versions: [1], sets: {in_domain: ["tasks.ids=[x]"]}}
"""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("baseline: a", "baseline: c"), "baseline 'c' is not an arm"),
        (("seeds: [1, 2]", "seeds: [1, 1]"), "seeds must be a non-empty list of distinct"),
        (("versions: [1]", "versions: [2, 1]"), "ascending order"),
        (("OVERRIDE", "train.max_polcy_updates=3"), "arm 'b'"),
        (
            (
                "- {name: a, preset: quickstart}",
                "- {name: a, preset: quickstart, model_from: {arm: b}}\n  - {name: c, preset: "
                "quickstart, model_from: {arm: a}}",
            ),
            None,
        ),
    ],
)
def test_a_bad_file_is_refused_in_one_line(
    tmp_path: Path, change: tuple[str, str], message: str | None
) -> None:
    text = BASE.replace(*change).replace("OVERRIDE", "seed=3")
    if message is None:  # a -> b is fine; make b take from a as well: a cycle
        text = text.replace("overrides: [seed=3]", "model_from: {arm: a}")
        message = "model_from forms a cycle"
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = CliRunner().invoke(cli, ["experiment", str(path), "--list"])
    assert result.exit_code == 1
    assert message in result.output and str(path) in result.output
    assert "Traceback" not in result.output
