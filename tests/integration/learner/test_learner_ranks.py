"""A learner of two DeepSpeed rank processes behind one engine (ZeRO-2, CPU, gloo).

The unit-level two-rank check of issue 27: the run starts the ranks itself
(`build_engine` with `ranks: 2`), the driver splits a fixed batch by tokens, and
the update must equal one process's on the whole batch (loss and weights within
float32 tolerance); both ranks end with identical weights; a checkpoint resumes on
two ranks and is refused, in one line, on another count; the rank processes end
with `close`, when one of them dies (the call fails in one line) and when their
driver is SIGKILLed. (ZeRO-3 runs in the train tests.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("deepspeed")

from cua_rl.errors import ConfigError, LearnerRankError  # noqa: E402
from cua_rl.learner.config import DeepSpeedEngineConfig, LearnerConfig  # noqa: E402
from cua_rl.learner.engines import build_engine  # noqa: E402
from cua_rl.types import StepSample  # noqa: E402

pytestmark = pytest.mark.model
LR = 1e-3


def batch(step: int = 0) -> list[StepSample]:
    """Five text samples of different lengths, two trajectories."""
    return [
        StepSample(
            ({"role": "user", "content": f"Step {step}: open menu {i} " * (1 + i)},),
            tuple(range(100 + 3 * i, 108 + 5 * i)),
            tuple([-8.3] * (8 + 2 * i)),
            0,
            advantage=1.0 - 2.0 * ((i + step) % 2),
            trajectory_id=f"t{i % 2}",
        )
        for i in range(5)
    ]


def config(ranks: int) -> LearnerConfig:
    engine = DeepSpeedEngineConfig(zero_stage=2) if ranks > 1 else {"type": "torch"}
    return LearnerConfig(
        engine=engine,
        ranks=ranks,
        lr=LR,
        micro_batch_tokens=64,
        rank_timeout_s=600,
        loss={"kl_beta": 0.01},
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_two_ranks_equal_one_process_and_resume_on_two(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    torch.set_num_threads(1)
    single = build_engine(config(1), tiny_model_dir)
    expected = single.train_step(batch())
    want = dict(single.named_parameters())

    group = build_engine(config(2), tiny_model_dir, name="policy", log_dir=tmp_path / "logs")
    pids = group._ranks.pids()  # type: ignore[attr-defined]
    try:
        shares = group.shares(batch())  # type: ignore[attr-defined]
        metrics = group.train_step(batch())
        assert metrics["ranks"] == 2
        assert [metrics["rank0_tokens"], metrics["rank1_tokens"]] == [s.tokens for s in shares]
        assert all(s.samples for s in shares)
        assert metrics["loss"] == pytest.approx(expected["loss"], rel=1e-4, abs=1e-6)
        assert metrics["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-4)
        assert metrics["response_tokens"] == expected["response_tokens"]
        got = dict(group.named_parameters())
        assert got.keys() == want.keys()
        for name, tensor in want.items():
            torch.testing.assert_close(got[name], tensor, atol=1e-5, rtol=1e-4)
        digests = group._all("weights_digest")  # type: ignore[attr-defined]
        assert digests[0] == digests[1]

        group.save_checkpoint(tmp_path / "ckpt")
        group.train_step(batch(1))
        continued = dict(group.named_parameters())
        group.load_checkpoint(tmp_path / "ckpt")
        assert group.version == 1
        group.train_step(batch(1))
        for name, tensor in group.named_parameters():
            torch.testing.assert_close(tensor, continued[name], atol=1e-6, rtol=0)
        with pytest.raises(ConfigError, match=r"saved by 2 learner rank\(s\) but this run has 1"):
            single.load_checkpoint(tmp_path / "ckpt")

        os.kill(pids[1], signal.SIGKILL)  # a rank dies: the next call fails in one line
        with pytest.raises(LearnerRankError, match=r"policy rank 1 exited .* \(log: .*rank1"):
            group.train_step(batch(2))
        assert wait_gone(pids, 30) == []  # and the group is stopped
    finally:
        group.close()
    assert wait_gone(pids, 30) == []


DRIVER = """
import sys, time
from cua_rl.learner.config import LearnerConfig
from cua_rl.learner.engines import build_engine
from pathlib import Path
cfg = LearnerConfig(engine={"type": "deepspeed"}, ranks=2, rank_timeout_s=600)
engine = build_engine(cfg, sys.argv[1], name="policy", log_dir=Path(sys.argv[2]))
print(" ".join(str(p) for p in engine._ranks.pids()), flush=True)
time.sleep(600)
"""


def test_rank_processes_die_with_a_sigkilled_driver(tiny_model_dir: Path, tmp_path: Path) -> None:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tiny_model_dir), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = driver.stdout.readline()  # type: ignore[union-attr]
        assert line.strip(), "the driver ended before its ranks started"
        pids = [int(p) for p in line.split()]
        assert all(alive(p) for p in pids)
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
        assert wait_gone(pids, 30) == []
    finally:
        if driver.poll() is None:
            driver.kill()
