"""A two-process DeepSpeed learner step on CPU (gloo), on the tiny model.

The ranks are plain processes given torchrun's environment (MASTER_ADDR/PORT,
RANK, WORLD_SIZE, LOCAL_RANK). The first DeepSpeed run on a machine JIT-compiles
DeepSpeed's shared-memory comm op (~100 s on 2 cores, cached afterwards in
~/.cache/torch_extensions), hence the generous deadline.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests_support.servers import free_port

torch = pytest.importorskip("torch")
pytest.importorskip("deepspeed")

from cua_rl.learner.config import LearnerConfig  # noqa: E402
from cua_rl.learner.engine_torch import TorchTrainEngine  # noqa: E402

pytestmark = pytest.mark.model
WORKER = Path(__file__).parents[2] / "tests_support" / "ds_worker.py"
DEADLINE_S = 500
STAGES = (2, 3)


def run_two_ranks(model_dir: Path, out: Path, stages: str) -> None:
    port = free_port()
    procs = []
    for rank in range(2):
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "OMP_NUM_THREADS": "1",
            "DS_ACCELERATOR": "cpu",
        }
        log = open(out / f"rank{rank}.log", "wb")  # noqa: SIM115 - closed with the process
        procs.append(
            (
                subprocess.Popen(
                    [sys.executable, str(WORKER), str(model_dir), str(out), stages],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                ),
                log,
            )
        )
    try:
        for rank, (proc, log) in enumerate(procs):
            code = proc.wait(DEADLINE_S)
            log.close()
            assert code == 0, (out / f"rank{rank}.log").read_text()[-3000:]
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()


@pytest.fixture(scope="module")
def zero_runs(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("deepspeed")
    run_two_ranks(tiny_model_dir, out, ",".join(str(s) for s in STAGES))
    return out


@pytest.mark.parametrize("stage", STAGES)
def test_two_ranks_end_with_identical_updated_weights(
    stage: int, zero_runs: Path, tiny_model_dir: Path
) -> None:
    from tests_support.ds_worker import LR, rank_samples
    from transformers import AutoModelForImageTextToText

    out = zero_runs / f"stage{stage}"
    ranks = [torch.load(out / f"rank{r}.pt") for r in range(2)]
    r0, r1 = ranks
    for name, tensor in r0["after"].items():
        assert torch.equal(tensor, r1["after"][name]), name
    assert any(not torch.equal(t, r0["before"][n]) for n, t in r0["after"].items())

    # One global token mean: the gradient equals one process's on the union of both shares.
    torch.set_num_threads(1)
    single = TorchTrainEngine(LearnerConfig(lr=LR, loss={"kl_beta": 0.01}), tiny_model_dir)
    metrics = single.train_step(rank_samples(0) + rank_samples(1))
    assert r0["metrics"]["grad_norm"] == pytest.approx(metrics["grad_norm"], rel=1e-4)
    assert r0["metrics"]["loss"] == pytest.approx(metrics["loss"], rel=1e-4, abs=1e-6)
    assert r0["metrics"]["response_tokens"] == metrics["response_tokens"]

    exported = dict(
        AutoModelForImageTextToText.from_pretrained(str(out / "export")).named_parameters()
    )
    for name, tensor in r0["after"].items():
        assert torch.equal(exported[name], tensor), name

    for rank in ranks:
        assert rank["restored_version"] == 1
        for name, tensor in rank["resumed"].items():
            torch.testing.assert_close(tensor, rank["continued"][name], atol=1e-6, rtol=0)


@pytest.mark.parametrize("stage", STAGES)
def test_export_of_the_two_rank_checkpoint_is_the_gathered_weights(
    stage: int, zero_runs: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """`cua-rl export model` (DeepSpeed's own consolidation of both ranks' shards)
    gives exactly the weights the ranks held when they checkpointed."""
    from tests_support.learner_runs import checkpoint_layout, exported, write_run_config

    from cua_rl.export.model import export_model

    run = tmp_path / "run"
    write_run_config(run, tiny_model_dir)
    checkpoint_layout(run, "policy", zero_runs / f"stage{stage}" / "ckpt", 1)
    info = export_model(run, "policy", tmp_path / "out")
    assert (info["engine"], info["dtype"], info["version"]) == ("deepspeed", "float32", 1)
    after = torch.load(zero_runs / f"stage{stage}" / "rank0.pt")["after"]
    weights = exported(tmp_path / "out")
    assert set(weights) == set(after)
    for name, tensor in after.items():
        assert torch.equal(weights[name], tensor), name
