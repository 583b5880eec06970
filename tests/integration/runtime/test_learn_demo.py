"""`cua-rl train --preset learn-demo`, shortened: both evaluation passes, the training
run between them, learn_demo.json and the PNGs. Checks the pipeline's counters and
files, not the learning outcome (that takes the full run; docs/learn-demo.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cua_rl.store.run_store import RunStore

pytestmark = [pytest.mark.desktop, pytest.mark.model]

ROLLOUTS = 4


def test_short_learn_demo_writes_its_result_and_curves(
    tmp_path: Path, primed_tiny_model_dir: Path, local_desktops: None
) -> None:
    run = tmp_path / "run"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "cua_rl.cli",
            "train",
            "--preset",
            "learn-demo",
            "--out",
            str(run),
            f"tiny_model_dir={primed_tiny_model_dir}",
            f"desktops.provider.state_dir={tmp_path / 'state'}",
            f"demo.eval_rollouts={ROLLOUTS}",
            "fleet.group_size=2",
            "train.max_policy_updates=1",
            "episode.max_tokens=48",
        ],
        check=True,
        timeout=600,
    )
    result = json.loads((run / "learn_demo.json").read_text())
    for key in ("success_first", "success_last", "prm_agreement_first", "prm_agreement_last"):
        assert 0.0 <= result[key] <= 1.0, (key, result)
    assert isinstance(result["harder_variants_served"], int)
    assert result["harder_variants_served"] == len(result["harder_variants"])
    # Algorithm 2's decisions as the store recorded them (a 2-rollout group may or
    # may not propose a variant), and the demo's own wall time
    stored_decisions = RunStore(run).events("adapt_decision")
    assert len(result["adapt_decisions"]) == len(stored_decisions), result["adapt_decisions"]
    for decision in result["adapt_decisions"]:
        assert isinstance(decision["accepted"], bool) and decision["candidate"], decision
    assert result["wall_s"] > 0
    # each pass scored every rollout on the starting variant, at one temperature
    for name in ("eval_initial", "eval_final"):
        assert result[name]["scored"] == ROLLOUTS, result[name]
        stored = RunStore(run / name).summary()
        assert stored["trajectories"] == ROLLOUTS and stored["verdicts"] == 0, stored
        assert list(stored["tasks"]) == ["3f721143-4ecd-5578-b3c7-538ff7573b16:click_blue_half"], (
            stored
        )
    assert result["eval_initial"]["temperature"] == result["eval_final"]["temperature"]
    # the final pass served the learner's export of its last version
    assert result["policy_version"] == 1
    assert (run / "exports" / "policy" / "v000001").is_dir()
    train = RunStore(run).summary()
    assert train["policy_updates"] == 1, train
    # the reward model took the policy's steps, and updated on those with samples
    assert train["prm_steps"] == train["policy_steps"] >= 1, train
    assert train["prm_updates"] + train["prm_steps_empty"] == train["prm_steps"], train
    assert result["prm_agreement_by_version"], result
    for png in result["plots"].values():
        assert (run / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
