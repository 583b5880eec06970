"""Fixtures for task loading tests: the shared OSWorld/Open-AgentRL test data
(read in place beside the repo, never copied) and small task trees in tmp_path."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cua_rl.cli import cli

SHARED = Path(__file__).resolve().parents[3].parent / "shared"

TEST_METRIC = "cua_rl_test_equal"
TEST_GETTER = "cua_rl_test_value"

VALID_EVALUATOR: dict[str, Any] = {
    "func": TEST_METRIC,
    "result": {"type": TEST_GETTER, "value": "hi"},
    "expected": {"type": TEST_GETTER, "value": "hi"},
}

VALID_TASK: dict[str, Any] = {
    "id": "00000000-0000-0000-0000-000000000001",
    "snapshot": "os",
    "instruction": "Print hi in a terminal.",
    "source": "test",
    "config": [{"type": "execute", "parameters": {"command": ["true"]}}],
    "related_apps": ["os"],
    "evaluator": VALID_EVALUATOR,
}


@pytest.fixture
def osworld_dir() -> Path:
    """The shared OSWorld evaluation_examples folder (skip when absent)."""
    path = SHARED / "osworld"
    if not (path / "examples").is_dir():
        pytest.skip(f"OSWorld test data not found at {path} (../shared/osworld beside the repo)")
    return path


@pytest.fixture
def openagentrl_dir() -> Path:
    """The shared Open-AgentRL release folder (skip when absent)."""
    path = SHARED / "openagentrl"
    if not (path / "new_examples").is_dir():
        pytest.skip(f"Open-AgentRL test data not found at {path} (../shared/openagentrl)")
    return path


@pytest.fixture
def write_json() -> Callable[[Path, Any], Path]:
    def write(path: Path, data: Any) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
        return path

    return write


@pytest.fixture
def test_metric_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the metric and getter the fixtures use, through the registry's
    public decorators, on copies of its tables (so nothing leaks across tests).
    Without the registry (not written yet) names are simply not checked."""
    try:
        from cua_rl.evaluation import registry
    except ModuleNotFoundError:
        return
    monkeypatch.setattr(registry, "METRICS", dict(registry.METRICS))
    monkeypatch.setattr(registry, "GETTERS", dict(registry.GETTERS))

    @registry.metric(TEST_METRIC)
    def equal(result: Any, expected: Any) -> float:
        return float(result == expected)

    @registry.getter(TEST_GETTER, required=("value",))
    async def value(ctx: Any, config: dict[str, Any]) -> Any:
        return config["value"]


@pytest.fixture
def valid_task(test_metric_registered: None) -> dict[str, Any]:
    return copy.deepcopy(VALID_TASK)


@pytest.fixture
def valid_evaluator(test_metric_registered: None) -> dict[str, Any]:
    return copy.deepcopy(VALID_EVALUATOR)


@pytest.fixture
def invoke() -> Callable[..., Result]:
    """Run `cua-rl ARGS...` in-process; output is stdout (problem lines) only."""

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return run


@pytest.fixture
def problem_lines() -> Callable[[Result], list[str]]:
    """The problem lines of a command's stdout (summary and notes go to stderr)."""

    def lines(result: Result) -> list[str]:
        return [line for line in result.stdout.splitlines() if line.strip()]

    return lines


@pytest.fixture
def registry_available() -> None:
    """Skip tests of metric-name checks until cua_rl.evaluation.registry exists."""
    pytest.importorskip(
        "cua_rl.evaluation.registry", reason="cua_rl.evaluation.registry is not written yet"
    )
