"""A short `bench learn`: the reward of the primed tiny model rises through the real
server, client, learner service and weight sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.learner.bench_learn import run_bench

pytestmark = pytest.mark.model


async def test_reward_rises_when_training_through_the_real_stack(
    primed_tiny_model_dir: Path, tmp_path: Path
) -> None:
    result = await run_bench(primed_tiny_model_dir, tmp_path, updates=24, group=8, actors=2,
                             lr=3e-4)
    assert result["updates"] == 24
    assert result["rise"] > 0.3, result
