"""`cua-rl train` end to end with both model pools on vLLM (the CPU build), through the
CLI: the run launches its vLLM replicas, syncs both learners' weights into them and
adapts, as it does with hf replicas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests_support.vllm import vllm_unavailable

pytestmark = [pytest.mark.desktop, pytest.mark.model]


@pytest.fixture
def vllm_available() -> None:
    if (reason := vllm_unavailable()) is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must build vLLM (.ci/run runs ./setup.sh --vllm): {reason}")
        pytest.skip(reason)


@pytest.mark.timeout(1800)  # two replica start-ups and the run; the primed model may be built
def test_quickstart_on_vllm_trains_both_models_and_adapts(
    tmp_path: Path, primed_tiny_model_dir: Path, local_desktops: None, vllm_available: None
) -> None:
    run = tmp_path / "run"
    cli = [sys.executable, "-m", "cua_rl.cli"]
    subprocess.run(
        [
            *cli,
            "train",
            "--preset",
            "quickstart",
            "--out",
            str(run),
            "policy.engine=vllm",
            "prm.engine=vllm",
            f"tiny_model_dir={primed_tiny_model_dir}",
            f"desktops.provider.state_dir={tmp_path / 'state'}",
            "metrics.live=false",
        ],
        check=True,
        timeout=1200,
    )
    summary = json.loads(
        subprocess.run(
            [*cli, "runs", "show", str(run), "--json"], check=True, capture_output=True, text=True
        ).stdout
    )
    for key in (
        "trajectories",
        "verdicts",
        "policy_updates",
        "prm_updates",
        "weight_syncs",
        "adapt_proposals",
    ):
        assert summary[key] > 0, (key, summary)
    for name in ("policy-0.log", "prm-0.log"):  # the replicas were vLLM, logging in the run
        assert "vllm" in (run / "logs" / name).read_text(errors="replace").lower()
