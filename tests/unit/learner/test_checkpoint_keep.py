"""Which learner checkpoints a run keeps (issue 50): the last K, every N-th, the
versions a config lists and the ones pinned while the run goes; through the learner
service's own checkpointing with a recording engine."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from tests_support.recording_engine import RecordingEngine

from cua_rl.errors import RunDirError
from cua_rl.export.checkpoint import available_versions, find_checkpoint
from cua_rl.learner.checkpoint_keep import Keeping, describe, pin_version, pinned, prune
from cua_rl.learner.config import LearnerConfig, LearnerLoopConfig
from cua_rl.learner.service import LearnerService, latest_checkpoint
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import StepSample


def _steps(root: Path, versions: range) -> None:
    for v in versions:
        (root / f"step-{v:06d}").mkdir(parents=True)


def test_the_last_k_every_nth_listed_and_pinned_versions_stay(tmp_path: Path) -> None:
    _steps(tmp_path, range(1, 11))
    (tmp_path / "step-000004-not-a-step").mkdir()
    pin_version(tmp_path.parent, tmp_path.name, 7)
    gone = prune(tmp_path, Keeping(every=4, last=2, versions=frozenset({3})))
    assert gone == [1, 2, 5, 6]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "step-000003",
        "step-000004",
        "step-000004-not-a-step",
        "step-000007",
        "step-000008",
        "step-000009",
        "step-000010",
    ]
    assert prune(tmp_path, Keeping(last=1)) == [3, 4, 8, 9]  # a stricter rule later
    assert pinned(tmp_path) == {7} and json.loads((tmp_path / "keep.json").read_text()) == {
        "versions": [7]
    }


def test_a_pin_file_that_cannot_be_read_stops_the_removal(tmp_path: Path) -> None:
    _steps(tmp_path, range(1, 4))
    (tmp_path / "keep.json").write_text('{"versions": ["seven"]}')
    with pytest.raises(RunDirError, match="keep.json"):
        prune(tmp_path, Keeping())
    assert len(list(tmp_path.glob("step-*"))) == 3


def test_config_keys_and_what_train_says() -> None:
    cfg = LearnerConfig(keep_every=10, keep_last=3, keep_versions=[40])
    assert cfg.keeping() == Keeping(every=10, last=3, versions=frozenset({40}))
    line = describe("policy", LearnerConfig().keeping())
    assert line.startswith("policy checkpoints kept: the last 2") and "keep_every=N" in line
    assert "every 10th version, versions 40" in describe("policy", cfg.keeping())
    with pytest.raises(ValueError):
        LearnerConfig(keep_last=0)


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    store = AsyncRunStore.open(tmp_path / "run")
    yield store
    await store.close()


async def test_a_learner_with_keep_every_1_keeps_every_version(store: Any, tmp_path: Path) -> None:
    ckpt = tmp_path / "run" / "checkpoints"
    runs = {}
    for name, keeping in (("default", None), ("every", Keeping(every=1, last=1))):
        service = LearnerService(
            "policy",
            RecordingEngine(),
            store,  # type: ignore[arg-type]
            LearnerLoopConfig(),
            checkpoint_dir=ckpt / name,
            keeping=keeping,
        )
        run = asyncio.create_task(service.run(max_updates=4))
        for k in range(4):
            await service.submit([StepSample((), (1,), (-0.1,), k, 1.0)], f"{name}-{k}")
        await service.finish()
        await run
        runs[name] = available_versions(ckpt / name / "policy")
    assert runs == {"default": [3, 4], "every": [1, 2, 3, 4]}
    assert latest_checkpoint(ckpt / "every", "policy") == (
        ckpt / "every" / "policy" / "step-000004",
        4,
    )
    # what `export model --version 1` says of the default run: gone, and what is kept
    with pytest.raises(RunDirError, match="keeps versions 3, 4"):
        find_checkpoint_in(ckpt / "default", 1)


def find_checkpoint_in(checkpoints: Path, version: int) -> Any:
    """What `export model --version` finds in a run whose checkpoints are `checkpoints`."""
    run = checkpoints.parent / f"run-of-{checkpoints.name}"
    run.mkdir(exist_ok=True)
    (run / "config.yaml").write_text("{}")
    if not (run / "checkpoints").exists():
        (run / "checkpoints").symlink_to(checkpoints)
    return find_checkpoint(run, "policy", version)
