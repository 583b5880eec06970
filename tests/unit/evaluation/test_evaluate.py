"""evaluate() semantics with `rule` getters (no desktop): conj math, short-circuit,
list alignment, infeasible and declared failure, missing files, malformed specs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.setup_steps import SetupContext
from cua_rl.errors import TaskFormatError
from cua_rl.evaluation import GETTERS, METRICS, evaluate, getter, metric
from cua_rl.types import Action, TaskVariant

CALLS: list[float] = []
FAIL = Action(kind="terminate", status="failure")
DONE = Action(kind="terminate", status="success")


@pytest.fixture(autouse=True)
def scoring_metric() -> Iterator[None]:
    """`score` returns its rule value and records the call, to observe short-circuits;
    `missing_file` behaves like a vm_file whose file is absent."""

    @metric("test_score")
    def score(result: float) -> float:
        CALLS.append(result)
        return result

    @getter("test_missing_file")
    async def missing_file(ctx: Any, config: dict[str, Any]) -> str:
        raise FileNotFoundError("/home/user/gone.txt")

    @getter("test_none")
    async def nothing(ctx: Any, config: dict[str, Any]) -> None:
        return None

    CALLS.clear()
    yield
    METRICS.pop("test_score")
    GETTERS.pop("test_missing_file")
    GETTERS.pop("test_none")


@pytest.fixture
async def client() -> AsyncIterator[GuestClient]:
    # rule getters never call the desktop; nothing listens at this address
    async with GuestClient("http://127.0.0.1:9", timeout=1.0) as c:
        yield c


def variant(evaluator: dict[str, Any]) -> TaskVariant:
    return TaskVariant(
        task_id="t1",
        domain="os",
        evaluator_name="default",
        instruction="do",
        config=(),
        evaluator=evaluator,
        source_path="examples/os/t1.json",
    )


def scores(*values: float) -> dict[str, Any]:
    return {
        "func": ["test_score"] * len(values),
        "result": [{"type": "rule", "rules": v} for v in values],
    }


async def score_of(
    client: GuestClient, tmp_path: Path, evaluator: dict[str, Any], last: Action | None = DONE
) -> float:
    return await evaluate(
        variant(evaluator),
        client,
        cache=FileCache(tmp_path / "cache"),
        context=SetupContext(1920, 1080),
        last_action=last,
        cache_dir=tmp_path / "traj",
    )


async def test_and_is_mean_and_stops_at_zero(client: GuestClient, tmp_path: Path) -> None:
    assert await score_of(client, tmp_path, scores(1.0, 0.5)) == 0.75
    CALLS.clear()
    assert await score_of(client, tmp_path, {**scores(0.5, 0.0, 1.0), "conj": "and"}) == 0.0
    assert CALLS == [0.5, 0.0]


async def test_or_is_max_and_stops_at_one(client: GuestClient, tmp_path: Path) -> None:
    assert await score_of(client, tmp_path, {**scores(0.2, 0.6), "conj": "or"}) == 0.6
    CALLS.clear()
    assert await score_of(client, tmp_path, {**scores(0.0, 1.0, 0.3), "conj": "or"}) == 1.0
    assert CALLS == [0.0, 1.0]


async def test_aligned_expected_and_options(client: GuestClient, tmp_path: Path) -> None:
    rule = {"type": "rule", "rules": {"expected": "b"}}
    spec = {
        "func": ["exact_match", "literal_match"],
        "conj": "and",
        "result": [{"type": "rule", "rules": "b"}, {"type": "rule", "rules": "B"}],
        "expected": [rule, {"type": "rule", "rules": "b"}],
        "options": [{}, {"ignore_case": True}],
    }
    assert await score_of(client, tmp_path, spec) == 1.0
    spec["options"] = [{}, {}]
    assert await score_of(client, tmp_path, spec) == 0.0


async def test_infeasible_needs_declared_failure(client: GuestClient, tmp_path: Path) -> None:
    assert await score_of(client, tmp_path, {"func": "infeasible"}, FAIL) == 1.0
    assert await score_of(client, tmp_path, {"func": "infeasible"}, DONE) == 0.0
    assert await score_of(client, tmp_path, {"func": "infeasible"}, None) == 0.0


async def test_declared_failure_scores_zero(client: GuestClient, tmp_path: Path) -> None:
    assert await score_of(client, tmp_path, scores(1.0), FAIL) == 0.0
    assert CALLS == []
    assert await score_of(client, tmp_path, scores(1.0), None) == 1.0


async def test_missing_file_scores_zero(client: GuestClient, tmp_path: Path) -> None:
    single = {"func": "test_score", "result": {"type": "test_missing_file"}}
    assert await score_of(client, tmp_path, single) == 0.0
    both = {
        "func": ["test_score", "test_score"],
        "conj": "or",
        "result": [{"type": "test_missing_file"}, {"type": "rule", "rules": 0.4}],
    }
    assert await score_of(client, tmp_path, both) == 0.4


async def test_a_failed_getter_never_reuses_the_previous_result(
    client: GuestClient, tmp_path: Path
) -> None:
    # OSWorld keeps the result of the metric before when a getter raises
    # FileNotFoundError under "or": the second exact_match would then compare
    # the first result "b" with "b" and score 1.
    spec = {
        "func": ["exact_match", "exact_match"],
        "conj": "or",
        "result": [{"type": "rule", "rules": "b"}, {"type": "test_missing_file"}],
        "expected": [
            {"type": "rule", "rules": {"expected": "a"}},
            {"type": "rule", "rules": {"expected": "b"}},
        ],
    }
    assert await score_of(client, tmp_path, spec) == 0.0


async def test_missing_or_empty_expected_value(client: GuestClient, tmp_path: Path) -> None:
    # OSWorld raises on a missing expected file (its getter is outside the try)
    spec = {
        "func": "exact_match",
        "result": {"type": "rule", "rules": "b"},
        "expected": {"type": "test_missing_file"},
    }
    assert await score_of(client, tmp_path, spec) == 0.0
    # OSWorld calls the metric without an expected None (a TypeError for
    # two-argument metrics); here the metric receives None and scores it 0
    answer = tmp_path / "answer.txt"
    answer.write_text("42\n")
    spec = {
        "func": "compare_text_file",
        "result": {"type": "rule", "rules": str(answer)},
        "expected": {"type": "test_none"},
    }
    assert await score_of(client, tmp_path, spec) == 0.0


async def test_malformed_spec_raises_naming_task_and_path(
    client: GuestClient, tmp_path: Path
) -> None:
    spec = {**scores(1.0, 1.0), "conj": "both"}
    with pytest.raises(TaskFormatError, match=r"examples/os/t1\.json\): \$\.evaluator\.conj"):
        await score_of(client, tmp_path, spec)
    with pytest.raises(TaskFormatError, match="not implemented: nope"):
        await score_of(client, tmp_path, {"func": "nope", "result": {"type": "rule", "rules": 1}})
