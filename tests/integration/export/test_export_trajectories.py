"""`cua-rl export trajectories` read by the tiny Qwen3-VL processor, on a run store
written through `RunStore` as a run writes it (seconds; the quickstart run's test in
runtime/test_train_local.py makes the same checks on a real run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support.viewer_runs import add_failed_trajectories, build_run

pytest.importorskip("transformers")

from tests_support.trajectory_export import check_export  # noqa: E402

pytestmark = pytest.mark.model


def test_export_is_what_the_policy_saw_and_the_processor_reads_it(
    tmp_path: Path, primed_tiny_model_dir: Path
) -> None:
    build_run(tmp_path / "run", n_trajectories=2, n_steps=4)
    add_failed_trajectories(tmp_path / "run")
    records = check_export(tmp_path / "run", primed_tiny_model_dir, tmp_path / "out.jsonl")
    assert len(records) == 2 and all(len(r["steps"]) == 4 for r in records)
