"""`eval-prm`'s run on a stored run, with scripted reward models on 127.0.0.1 answering
known votes per step: the accuracies equal hand-computed values, the prompt is the
streaming judge's, answers are cached, and a broken answer costs its step only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests_support.fake_answers import GARBAGE, NOT_JSON, votes
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer
from tests_support.held_out_runs import build_held_out_run, marker, response

from cua_rl.agent import prm_messages
from cua_rl.agent.images import encode_image
from cua_rl.runtime.prm_accuracy import Voter, evaluate_reward_model, write_report
from cua_rl.runtime.vote_sources import ModelSpec, VoteSettings, connect, identify
from cua_rl.store.step_labels import write_step_labels

JUDGE_VOTES: dict[str, list[int | str] | str] = {
    marker("ta1", 0): [1, 1, -1],  # +1, ta1 succeeded: right
    marker("ta1", 1): [-1, -1, 1],  # -1: wrong
    marker("ta1", 2): [1, -1, GARBAGE],  # tie: wrong
    marker("ta2", 0): [-1, -1, -1],  # -1, ta2 failed: right
    marker("ta2", 1): [1, 1, 1],  # +1: wrong
    marker("tb1", 0): [1, GARBAGE, GARBAGE],  # +1, tb1 succeeded: right
    marker("tb1", 1): NOT_JSON,  # lost
}
"""Outcome accuracy: 3 right of 6 judged steps; per variant a: 2/5, b: 1/1."""

LABEL_VOTES: dict[str, list[int | str] | str] = {
    marker("ta1", 0): [1, 1, 1, -1, -1],  # +1 (verdict +1: right)
    marker("ta1", 1): [1, 1, -1, -1, GARBAGE],  # tie: no label
    marker("ta1", 2): [-1, -1, -1, GARBAGE, GARBAGE],  # -1 (verdict tie: wrong)
    marker("ta2", 0): [1, 1, 1, 1, 1],  # +1 (verdict -1: wrong)
    marker("ta2", 1): [-1, -1, -1, -1, 1],  # -1 (verdict +1: wrong)
    marker("tb1", 0): [GARBAGE] * 5,  # no label
    marker("tb1", 1): [1, 1, 1, 1, 1],  # judge lost this step
}
"""Process accuracy against the labelling judge: 1 right of 4 labelled; 2 ties."""

M3 = VoteSettings(votes=3, temperature=0.8, max_tokens=64)
M5 = VoteSettings(votes=5, temperature=0.6, max_tokens=32)


@pytest.fixture
async def judge_server() -> AsyncIterator[FakeModelServer]:
    server = FakeModelServer(FakeModelConfig(answer=votes(JUDGE_VOTES)))
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def label_server() -> AsyncIterator[FakeModelServer]:
    server = FakeModelServer(FakeModelConfig(answer=votes(LABEL_VOTES)))
    await server.start()
    yield server
    await server.stop()


async def _voter(role: str, url: str, name: str, settings: VoteSettings, out: Path) -> Voter:
    spec = ModelSpec(url=url, served_name=name)
    return Voter(
        role,
        settings,
        await identify(spec),
        lambda: connect(spec, log_dir=out, request_timeout_s=10, name=role),
    )


async def _evaluate(
    run_dir: Path,
    out: Path,
    judge_url: str,
    label_url: str | None = None,
    settings: VoteSettings = M3,
) -> dict[str, Any]:
    judge = await _voter("judge", judge_url, "scripted-prm", settings, out)
    labeller = (
        None
        if label_url is None
        else await _voter("labeller", label_url, "scripted-labeller", M5, out)
    )
    return await evaluate_reward_model(run_dir, out, judge, labeller, concurrency=2)


async def test_accuracies_against_stored_labels_are_the_hand_computed_ones(
    tmp_path: Path, judge_server: FakeModelServer
) -> None:
    store = build_held_out_run(tmp_path / "run")
    write_step_labels(store, "ta1", [1, -1, None], "person:ann")
    write_step_labels(store, "ta2", [-1, -1], "person:ann")
    write_step_labels(store, "tb1", [None, 1], "golden-path")
    store.close()
    report = await _evaluate(tmp_path / "run", tmp_path / "out", judge_server.url)
    o = report["overall"]
    assert o["outcome_accuracy"] == pytest.approx(3 / 6) and o["steps"] == 6
    # labelled judged steps: ta1/0 right, ta1/1 right, ta2/0 right, ta2/1 wrong
    assert o["process_accuracy"] == pytest.approx(3 / 4)
    assert (o["labelled"], o["unlabelled"], o["ties"]) == (4, 2, 1)
    assert (o["trajectories"], o["failed_requests"], o["unparseable_votes"]) == (3, 1, 3)
    a, b = report["variants"]["a:default"], report["variants"]["b:default"]
    assert a["outcome_accuracy"] == pytest.approx(2 / 5) and a["task_id"] == "a"
    assert b["outcome_accuracy"] == 1.0 and b["failed_requests"] == 1
    assert report["skipped_trajectories"] == {"aborted": 1}
    assert report["labels"]["source"] == "stored"
    assert report["labels"]["labellers"] == {"person:ann": 2, "golden-path": 1}
    (lost,) = report["failures"]
    assert (lost["who"], lost["trajectory_id"], lost["step_index"]) == ("judge", "tb1", 1)
    assert judge_server.url in lost["reason"] and "expected" in lost["reason"]
    assert report["failures_total"] == 1
    # the m votes were asked in one request per step, text only, under the served name
    body = judge_server.bodies[0]
    assert body["n"] == 3 and body["temperature"] == 0.8 and body["max_tokens"] == 64
    assert body["model"] == "scripted-prm" and "logprobs" not in body


async def test_the_prompt_is_the_streaming_judges(
    tmp_path: Path, judge_server: FakeModelServer
) -> None:
    store = build_held_out_run(tmp_path / "run")
    traj = store.load_trajectory("ta1")
    store.close()
    await _evaluate(tmp_path / "run", tmp_path / "out", judge_server.url)
    step = traj.steps[2]

    def url(name: str) -> str:
        data = store.screenshot_path(name).read_bytes()
        return encode_image(data, min_pixels=4096, max_pixels=65536)

    expected = prm_messages(
        "Do a with default",
        ["Click the button.", "Click the button."],
        url(step.screenshot_before),
        response("ta1", 2),
        url(step.screenshot_after),
    )
    (sent,) = [m for m in judge_server.messages if marker("ta1", 2) in str(m)]
    assert sent == expected


async def test_a_labelling_judge_gives_the_majority_and_a_rerun_asks_nothing(
    tmp_path: Path, judge_server: FakeModelServer, label_server: FakeModelServer
) -> None:
    build_held_out_run(tmp_path / "run").close()
    report = await _evaluate(tmp_path / "run", tmp_path / "out", judge_server.url, label_server.url)
    o = report["overall"]
    assert o["outcome_accuracy"] == pytest.approx(3 / 6)
    assert o["process_accuracy"] == pytest.approx(1 / 4)
    assert (o["labelled"], o["unlabelled"], o["label_ties"]) == (4, 2, 2)
    assert report["labels"]["source"] == "judge"
    assert report["labels"]["identity"]["votes"] == 5
    assert sum(label_server.asked.values()) == 7 and label_server.bodies[0]["n"] == 5
    assert sum(judge_server.asked.values()) == 7

    # a rerun reads every answered step from the cache; only the lost one is asked again
    rerun = await _evaluate(tmp_path / "run", tmp_path / "out", judge_server.url, label_server.url)
    assert sum(label_server.asked.values()) == 7
    assert judge_server.asked[marker("tb1", 1)] == 2 and sum(judge_server.asked.values()) == 8
    assert rerun["overall"] == o
    assert rerun["judge"]["cached_steps"] == 6 and rerun["labels"]["cached_steps"] == 7

    # another vote setting is another voter: nothing of the cache is reused for it
    other = await _evaluate(
        tmp_path / "run",
        tmp_path / "out",
        judge_server.url,
        settings=VoteSettings(votes=3, temperature=0.8, max_tokens=65),
    )
    assert other["judge"]["cached_steps"] == 0 and sum(judge_server.asked.values()) == 15


async def test_a_voter_with_everything_cached_is_never_started(
    tmp_path: Path, judge_server: FakeModelServer
) -> None:
    build_held_out_run(tmp_path / "run").close()
    all_answered = {**JUDGE_VOTES, marker("tb1", 1): [1, 1, 1]}
    judge_server.config.answer = votes(all_answered)
    await _evaluate(tmp_path / "run", tmp_path / "out", judge_server.url)
    opened: list[str] = []

    def never() -> Any:
        opened.append("judge")
        raise AssertionError("started although every step is cached")

    judge = Voter("judge", M3, {"served_name": "scripted-prm"}, never)
    report = await evaluate_reward_model(tmp_path / "run", tmp_path / "out", judge)
    assert opened == [] and report["judge"]["requests"] == 0
    assert report["judge"]["cached_steps"] == 7 and report["overall"]["steps"] == 7


async def test_the_report_files_say_the_numbers(
    tmp_path: Path, judge_server: FakeModelServer
) -> None:
    build_held_out_run(tmp_path / "run").close()
    report = await _evaluate(tmp_path / "run", tmp_path / "out", judge_server.url)
    paths = write_report(report, tmp_path / "out")
    assert [p.name for p in paths] == ["report.json", "report.md", "report.png"]
    text = paths[1].read_text()
    assert "**Outcome accuracy 50.0%** over 6 steps of 3 trajectories" in text
    assert "process accuracy n/a" in text and "| judge | tb1 | 1 |" in text
    assert "1 aborted" in text
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
