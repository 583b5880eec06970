"""The paper's switches on real runs of the quickstart (docs/algorithms.md, "The paper's
comparisons as switches" and "The run's seed"): a frozen reward model judges every step
from its starting weights and never trains; the run's `seed` makes the first requests
of two runs identical and another seed changes them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests_support.fake_answers import by_role
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer

from cua_rl.store.run_store import RunStore

pytestmark = [pytest.mark.desktop, pytest.mark.model]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "cua_rl.cli", *args]


def test_a_frozen_reward_model_judges_every_step_and_never_trains(
    tmp_path: Path, primed_tiny_model_dir: Path, local_desktops: None
) -> None:
    run = tmp_path / "run"
    subprocess.run(
        _cli(
            "train",
            "--preset",
            "quickstart",
            "--out",
            str(run),
            f"tiny_model_dir={primed_tiny_model_dir}",
            f"desktops.provider.state_dir={tmp_path / 'state'}",
            "metrics.live=false",
            "train.prm.enabled=false",
        ),
        check=True,
        timeout=900,
    )
    store = RunStore.read_only(run)
    try:
        counters = store.counters()
        updates = store.events("update")
        scored = [
            store.load_trajectory(r["trajectory_id"])
            for r in store.trajectory_records()
            if r["score"] is not None
        ]
        judged = {(t.id, v.step_index): v for t in scored for v in store.load_verdicts(t.id)}
        steps = [(t.id, s.index) for t in scored for s in t.steps]
    finally:
        store.close()
    # the policy trained as usual; nothing of the reward model did
    assert counters.get("policy_updates") == 2, counters
    assert not counters.get("prm_updates") and not counters.get("prm_samples_collected")
    assert {e["subject"] for e in updates} == {"policy"}, updates
    assert not list((run / "checkpoints").glob("prm*")), list((run / "checkpoints").iterdir())
    # it voted on every step of every scored trajectory, all from its starting weights,
    # also on the steps taken after the policy's updates
    assert steps and set(steps) <= set(judged), sorted(set(steps) - set(judged))[:5]
    assert {v.prm_version for v in judged.values()} == {0}
    assert max(s.policy_version for t in scored for s in t.steps) >= 1
    summary = json.loads(
        subprocess.run(
            _cli("runs", "show", str(run), "--json"), check=True, capture_output=True, text=True
        ).stdout
    )
    assert summary["switches"] == {"train.prm.enabled": False}, summary["switches"]


async def _first_requests(
    tmp_path: Path, seed: int, server: FakeModelServer, name: str
) -> tuple[dict, dict]:
    """(first policy request, first reward-model request) of a one-actor quickstart
    rollout whose pools are the recording server."""
    before = len(server.params)
    proc = await asyncio.create_subprocess_exec(
        *_cli(
            "rollout",
            "--preset",
            "quickstart",
            "--out",
            str(tmp_path / name),
            f"desktops.provider.state_dir={tmp_path / 'state'}",
            "metrics.live=false",
            f"seed={seed}",
            "fleet.actors=1",
            "desktops.count=1",
            "fleet.max_groups=1",
            "episode.max_steps=1",
            f"policy.urls=[{server.url}]",
            f"prm.urls=[{server.url}]",
        )
    )
    assert await asyncio.wait_for(proc.wait(), 600) == 0
    sent = server.params[before:]
    policy = [p for p in sent if p.get("n", 1) == 1]
    prm = [p for p in sent if p.get("n", 1) == 3]  # the quickstart's m = 3 votes
    assert policy and prm, sent
    return policy[0], prm[0]


async def test_the_runs_seed_decides_its_first_requests(
    tmp_path: Path, local_desktops: None
) -> None:
    server = FakeModelServer(FakeModelConfig(answer=by_role(["default"])))
    await server.start()
    try:
        first = await _first_requests(tmp_path, 7, server, "a")
        again = await _first_requests(tmp_path, 7, server, "b")
        other = await _first_requests(tmp_path, 8, server, "c")
    finally:
        await server.stop()
    assert first == again  # every sampling parameter, the seed included
    assert all(isinstance(request["seed"], int) for request in first)
    assert [r["seed"] for r in other] != [r["seed"] for r in first]
    assert {k: v for k, v in other[0].items() if k != "seed"} == {
        k: v for k, v in first[0].items() if k != "seed"
    }
