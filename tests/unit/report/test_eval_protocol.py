"""`eval` keeps the OSWorld protocol whatever --preset or CONFIG says, and takes
desktops and model from the user's config or flags."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.report.eval_protocol import protocol


def _show(*args: str) -> dict:
    result = CliRunner().invoke(cli, ["config", "show", "--for", "eval", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_training_preset_cannot_drop_the_protocol() -> None:
    cfg = _show("--preset", "quickstart")
    assert (
        cfg["episode"]["max_steps"],
        cfg["episode"]["temperature"],
        cfg["episode"]["wait_after_action_s"],
    ) == (50, 0.0, 5.0)
    assert not cfg["judge"]["enabled"] and cfg["fleet"]["group_size"] == 1
    assert cfg["desktops"]["count"] == 2  # the preset's desktops are kept
    assert protocol()["episode.max_steps"] == 50


def test_the_paper_config_is_evaluated_with_its_model_and_desktops_under_the_protocol() -> None:
    paper = Path(__file__).resolve().parents[3] / "cua_rl" / "configs" / "rlanything-osworld.yaml"
    cfg = _show(str(paper))
    assert cfg["policy"]["model"] == "Qwen/Qwen3-VL-8B-Thinking"
    assert cfg["desktops"]["provider"]["type"] == "docker"
    assert (cfg["episode"]["max_steps"], cfg["episode"]["temperature"]) == (50, 0.0)
    assert cfg["episode"]["max_tokens"] == 4096


def test_flags_set_model_provider_and_tasks_and_the_budget_suits_thinking_models() -> None:
    cfg = _show(
        "--model", "Qwen/Qwen3-VL-8B-Thinking", "--provider", "docker", "--osworld", "/data/OSWorld"
    )
    assert cfg["policy"]["model"] == "Qwen/Qwen3-VL-8B-Thinking"
    assert cfg["desktops"]["provider"]["type"] == "docker"
    assert cfg["tasks"]["source"] == "osworld:/data/OSWorld"
    assert cfg["tasks"]["split"] == "osworld-verified"
    assert cfg["episode"]["max_tokens"] == 4096
    assert _show("episode.max_steps=2")["episode"]["max_steps"] == 2  # an override still wins


def test_eval_names_what_the_protocol_replaced_and_each_deviation(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump({"episode": {"temperature": 0.7}}))
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(config),
            "--preset",
            "quickstart",
            "--osworld",
            str(tmp_path / "nope"),
            "--out",
            str(tmp_path / "run"),
            "episode.wait_after_action_s=1",
        ],
    )
    assert result.exit_code == 1 and "expected an OSWorld checkout" in result.output
    lines = result.stderr.splitlines()
    assert (
        "eval: the OSWorld protocol replaces episode.max_steps 3 -> 50, "
        "episode.temperature 0.7 -> 0.0, fleet.group_size 2 -> 1"
    ) in lines
    assert "eval: NOT the OSWorld protocol (by override): episode.wait_after_action_s=1" in lines
