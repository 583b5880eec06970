"""The learning demo's pure parts: its preset, its config check, the series it reports."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from cua_rl.config import RunConfig, load_config
from cua_rl.errors import ConfigError
from cua_rl.report.learn_demo_curves import DemoSeries
from cua_rl.runtime.learn_demo import check_demo_config

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "cua_rl" / "tasks" / "data"
TASK = "3f721143-4ecd-5578-b3c7-538ff7573b16"


def test_preset_runs_the_demo_from_the_easiest_click_variant() -> None:
    cfg = load_config(RunConfig, preset="learn-demo")
    assert cfg.demo.eval_rollouts >= 32  # the minimum per pass
    assert cfg.tasks.ids == [TASK]
    assert cfg.judge.enabled and cfg.adapt.enabled and cfg.adapt.rewriter.type == "rules"
    check_demo_config(cfg)
    order = json.loads((DATA / "local/difficulty.json").read_text())[TASK]
    task = json.loads((DATA / f"local/os/{TASK}.json").read_text())
    easiest = json.loads((DATA / f"evaluators/{TASK}/{order[0]}.json").read_text())
    assert task["evaluator"] == easiest  # runs start from the original = easiest variant


def test_demo_needs_checkpoint_weight_sync() -> None:
    cfg = load_config(RunConfig, preset="learn-demo", overrides=["train.sync.mode=collective"])
    with pytest.raises(ConfigError, match="train.sync.mode=checkpoint"):
        check_demo_config(cfg)
    assert load_config(RunConfig).demo.eval_rollouts == 0  # off unless asked for


def test_series_first_and_last_agreement_and_harder_variants() -> None:
    series = DemoSeries(
        agreement_by_version={0: (3, 6), 2: (5, 10), 5: (9, 10), 6: (0, 2)},
        served=[
            (0.0, "easy", 0),
            (5.0, "easy", 0),
            (9.0, "hard", 2),
            (12.0, "mid", 1),
            (14.0, "hard", 2),
        ],
    )
    # versions with fewer than min_votes votes are passed over when others have enough
    assert series.agreement("first", min_votes=10) == 0.5
    assert series.agreement("last", min_votes=10) == 0.9
    assert series.agreement("first", min_votes=50) == 0.5  # none large enough: all
    assert series.agreement("last", min_votes=50) == 0.0
    assert series.harder_served(0) == ["hard", "mid"]
    assert series.harder_served(1) == ["hard"]
    assert DemoSeries().agreement("first") is None


def _drawn_regions(task: dict) -> list[tuple[float, ...]]:
    """The rectangles the task's setup program draws, in drawing order."""
    program = task["config"][0]["parameters"]["command"][4]
    line = next(x for x in program.splitlines() if x.startswith("REGIONS = "))
    return [tuple(region) for _, region in ast.literal_eval(line.split("=", 1)[1].strip())]


def test_click_ladder_nests_inside_the_right_half_and_matches_the_canvas() -> None:
    """Each harder target lies inside the easier one (so a policy's hit rate can only
    fall along the ladder, and Algorithm 2's harder-acceptance acc(q') < acc(q) is
    reachable); all are on the right, where the primed policy clicks; each evaluator
    checks exactly the rectangle the canvas draws for it, drawn easiest first."""
    order = json.loads((DATA / "local/difficulty.json").read_text())[TASK]
    task = json.loads((DATA / f"local/os/{TASK}.json").read_text())
    checked = []
    for name in order:
        spec = json.loads((DATA / f"evaluators/{TASK}/{name}.json").read_text())
        checked.append(tuple(float(v) for v in spec["result"]["command"][-4:]))
    assert checked == _drawn_regions(task)
    assert checked[0] == (0.5, 0.0, 1.0, 1.0)
    areas = [(x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in checked]
    assert areas == sorted(areas, reverse=True) and len(set(areas)) == len(areas), areas
    for (ox0, oy0, ox1, oy1), (ix0, iy0, ix1, iy1) in zip(checked, checked[1:], strict=False):
        assert ox0 <= ix0 < ix1 <= ox1 and oy0 <= iy0 < iy1 <= oy1, (checked, order)
    golden = json.loads((DATA / f"local/golden/os/{TASK}.json").read_text())
    for name, (x0, y0, x1, y1) in zip(order, checked, strict=True):
        # each golden clicks its own target's centre (inside every easier target too)
        code = golden[name][0]["pyautogui"]
        assert f"w * {(x0 + x1) / 2:.3f}" in code and f"h * {(y0 + y1) / 2:.3f}" in code, name


def test_series_reads_algorithm_2_decisions_with_variant_names(tmp_path: Path) -> None:
    from cua_rl.report.learn_demo_curves import read_demo_series
    from cua_rl.store.run_store import RunStore
    from cua_rl.types import TaskVariant

    store = RunStore(tmp_path)
    easy, hard = (
        TaskVariant(
            task_id="t", domain="os", evaluator_name=name, instruction=name, config=(), evaluator={}
        )
        for name in ("easy", "hard")
    )
    for variant in (easy, hard):
        store.add_variant(variant)
    store.add_event(
        "adapt_decision",
        "t",
        {
            "accepted": False,
            "direction": "harder",
            "parent": easy.variant_id,
            "candidate": hard.variant_id,
            "acc_parent": 0.75,
            "acc_candidate": 0.125,
        },
    )
    store.close()
    series = read_demo_series(tmp_path, ["easy", "hard"])
    assert series.decisions == [
        {
            "candidate": "hard",
            "parent": "easy",
            "direction": "harder",
            "acc_parent": 0.75,
            "acc_candidate": 0.125,
            "accepted": False,
        }
    ]
