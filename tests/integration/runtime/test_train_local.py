"""`cua-rl train` end to end on local desktops with the tiny model, through the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from cua_rl.desktop.providers.local import state as st
from cua_rl.desktop.providers.local.provider import record_alive
from cua_rl.learner.service import latest_checkpoint
from cua_rl.store.run_store import RunStore

pytestmark = [pytest.mark.desktop, pytest.mark.model]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "cua_rl.cli", *args]


def _overrides(tmp_path: Path, tiny_model_dir: Path) -> list[str]:
    return [
        f"tiny_model_dir={tiny_model_dir}",
        f"desktops.provider.state_dir={tmp_path / 'state'}",
        "metrics.live=false",
    ]


KEEP_EVERY = ("train.policy.keep_every=1", "train.policy.keep_last=1")
"""Every policy version kept (checkpoint_keep), where keep_last=1 alone keeps the last."""
RANKS = [
    f"train.{role}.{key}"
    for role in ("policy", "prm")
    for key in ("ranks=2", "engine.type=deepspeed", "engine.zero_stage=3")
]
"""Both learners as two ZeRO-3 rank processes each (docs/learner-ranks.md)."""


def _rank_pids(proc: subprocess.Popen) -> list[int]:
    """The run's rank processes; a child that exited while they were listed (a zombie
    its parent has not reaped yet, or gone) is none of them."""
    ranks = []
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if "cua_rl.learner.rank_process" in " ".join(child.cmdline()):
                ranks.append(child.pid)
        except psutil.NoSuchProcess:  # ZombieProcess too
            continue
    return ranks


def _summary(run: Path) -> dict:
    out = subprocess.run(
        _cli("runs", "show", str(run), "--json"), check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


def _rollouts_during_updates(run: Path) -> tuple[int, int]:
    """(rollouts whose time on a desktop overlaps a learner's update or the weight sync
    after it, learner updates), from the timestamps the run stored."""
    store = RunStore(run)
    updates = [
        (e["data"]["started_at"], e["data"]["synced_at"] or e["data"]["trained_at"])
        for e in store.events("update")
    ]
    rollouts = [(r["started_at"], r["finished_at"]) for r in store.trajectory_records()]
    overlapping = sum(
        1
        for start, end in rollouts
        if any(start < u_end and u_start < end for u_start, u_end in updates)
    )
    return overlapping, len(updates)


def test_quickstart_trains_both_models_and_adapts(
    tmp_path: Path, primed_tiny_model_dir: Path, local_desktops: None
) -> None:
    run = tmp_path / "run"
    # issue 50: keep_every=1 keeps every version, where keep_last=1 alone would keep one
    subprocess.run(
        _cli(
            "train",
            "--preset",
            "quickstart",
            "--out",
            str(run),
            *_overrides(tmp_path, primed_tiny_model_dir),
            "metrics.spans=true",
            *KEEP_EVERY,
        ),
        check=True,
        timeout=900,
    )
    summary = _summary(run)
    # where its time went (metrics.spans): every episode's wall time accounted for
    from cua_rl.report.loop_profile import load_spans, profile

    loop = profile(load_spans(run))
    assert loop["episodes"] > 0 and loop["breakdown"]["sum_error"] < 0.05, loop
    assert set(loop["learners"]) == {"policy", "prm"} and set(loop["pools"]) == {"policy", "prm"}
    for key in (
        "trajectories",
        "verdicts",
        "policy_updates",
        "prm_updates",
        "weight_syncs",
        "adapt_proposals",
    ):
        assert summary[key] > 0, (key, summary)
    assert summary["policy_updates"] == 2  # train.max_policy_updates of the preset
    assert (run / "metrics.jsonl").stat().st_size > 0
    # asynchronous: the desktops keep working while the learners train and sync
    overlapping, updates = _rollouts_during_updates(run)
    assert updates >= 2 and overlapping > 0, (overlapping, updates)
    # every sample a learner received is accounted for: used, stale or left at the end
    counters = RunStore(run).counters()
    for role in ("policy", "prm"):
        parts = [
            counters.get(f"{role}_{k}", 0)
            for k in ("samples_used", "stale_dropped", "unused_at_end")
        ]
        assert counters.get(f"{role}_samples_collected", 0) == sum(parts), (role, counters)
    updates = [
        json.loads(line)
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if '"scope": "policy"' in line
    ]
    # one task group per update (train.tasks_per_update of the preset), whole
    assert updates and all(u["groups"] == 1 for u in updates), updates
    # `cua-rl export model`: the last checkpoint's weights exactly, not the initial ones
    import torch
    from tests_support.learner_runs import exported

    out = tmp_path / "policy-export"
    subprocess.run(
        _cli("export", "model", str(run), "--role", "policy", "--out", str(out)),
        check=True,
        timeout=300,
    )
    found = latest_checkpoint(run / "checkpoints", "policy")
    assert found is not None and found[1] == 2
    saved = torch.load(found[0] / "train_state.pt", weights_only=True)["model"]
    weights, initial = exported(out), exported(primed_tiny_model_dir)
    assert set(weights) == set(saved)
    assert all(torch.equal(weights[n], t) for n, t in saved.items())
    assert any(not torch.equal(weights[n], initial[n]) for n in saved)
    # every version kept (`train.policy.keep_every=1`), said at the start; version 1
    # exports, loads in transformers and is not version 2
    from transformers import AutoModelForImageTextToText

    from cua_rl.export.checkpoint import available_versions

    assert available_versions(run / "checkpoints" / "policy") == [1, 2]
    assert (
        "policy checkpoints kept: the last 1, every version"
        in (run / "logs" / "run.log").read_text()
    )
    v1 = tmp_path / "policy-v1"
    subprocess.run(
        _cli("export", "model", str(run), "--role", "policy", "--version", "1", "--out", str(v1)),
        check=True,
        timeout=300,
    )
    loaded = AutoModelForImageTextToText.from_pretrained(str(v1)).state_dict()
    assert any(not torch.equal(loaded[n], t) for n, t in saved.items() if n in loaded)
    # `cua-rl export trajectories`: a line per stored trajectory, the stored responses,
    # a loadable image per step, messages the processor's chat template accepts
    from tests_support.trajectory_export import check_export

    check_export(run, primed_tiny_model_dir, tmp_path / "trajectories.jsonl")
    # what it started is what `--dry-run` prints, argument for argument
    launched = _launched(run)
    assert {"driver", "policy replica 0", "prm replica 0"} <= {r["role"] for r in launched}
    assert launched == _dry_run(tmp_path, primed_tiny_model_dir)


def _launched(run: Path) -> list[dict]:
    """The run's launch records (RUN_DIR/launch.jsonl) as the dry run normalizes them."""
    from cua_rl.runtime.launch_records import normalized

    records = [json.loads(line) for line in (run / "launch.jsonl").read_text().splitlines()]
    return sorted((normalized(r) for r in records), key=lambda r: r["role"])


def _dry_run(tmp_path: Path, tiny_model_dir: Path) -> list[dict]:
    out = subprocess.run(
        _cli(
            "train",
            "--preset",
            "quickstart",
            "--dry-run",
            "--json",
            *_overrides(tmp_path, tiny_model_dir),
            "metrics.spans=true",
            *KEEP_EVERY,
        ),
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return sorted(json.loads(out.stdout)["processes"], key=lambda r: r["role"])


def test_sync_mode_starts_no_rollout_before_the_last_batch_is_trained_and_synced(
    tmp_path: Path, primed_tiny_model_dir: Path, local_desktops: None
) -> None:
    """`train.mode=sync`: every rollout of batch k+1 starts after both learners have
    trained on batch k and synced their weights, so no rollout overlaps an update."""
    run = tmp_path / "run"
    subprocess.run(
        _cli(
            "train",
            "--preset",
            "quickstart",
            "--out",
            str(run),
            *_overrides(tmp_path, primed_tiny_model_dir),
            "train.mode=sync",
        ),
        check=True,
        timeout=900,
    )
    summary = _summary(run)
    assert summary["policy_updates"] == 2 and summary["weight_syncs"] >= 4, summary
    overlapping, updates = _rollouts_during_updates(run)
    assert updates >= 4 and overlapping == 0, (overlapping, updates)


def test_killed_run_resumes_without_duplicated_or_missing_updates(
    tmp_path: Path, primed_tiny_model_dir: Path, local_desktops: None
) -> None:
    """Also the learner rank groups' run: both learners on two ZeRO-3 ranks, SIGKILLed
    after a checkpoint (only the main process: its ranks, model replicas and desktops
    stop by themselves) and resumed on two ranks from it."""
    run = tmp_path / "run"
    args = _cli(
        "train",
        "--preset",
        "quickstart",
        "--out",
        str(run),
        *_overrides(tmp_path, primed_tiny_model_dir),
        "train.max_policy_updates=3",
        "fleet.max_groups=40",
        *RANKS,
    )
    proc = subprocess.Popen(args, start_new_session=True)
    deadline = time.monotonic() + 600
    try:
        while True:  # poll the store until the first update is checkpointed
            assert proc.poll() is None, "the run ended before it could be interrupted"
            assert time.monotonic() < deadline, "no policy update within 10 minutes"
            if (run / "run.sqlite").exists() and latest_checkpoint(run / "checkpoints", "policy"):
                break
            time.sleep(0.5)  # poll interval
        before = RunStore(run).summary()
        ranks = _rank_pids(proc)
        assert len(ranks) == 4, ranks  # two per learner
        children = psutil.Process(proc.pid).children(recursive=True)
        os.kill(proc.pid, signal.SIGKILL)  # only the run: its children must notice
        assert proc.wait(120) != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # ranks, model replicas and desktops each watch their owner and stop by themselves
    gone = time.monotonic() + 60
    while _left(children, tmp_path / "state") and time.monotonic() < gone:
        time.sleep(0.2)  # poll interval: they watch their owner's pidfd
    assert _left(children, tmp_path / "state") == ([], [])
    ckpt, _ = latest_checkpoint(run / "checkpoints", "policy")
    assert json.loads((ckpt / "ranks.json").read_text())["ranks"] == 2
    assert 1 <= before["policy_updates"] < 3
    killed = _summary(run)
    assert killed["finished"] is False and killed["end"] is None, killed
    resume = _cli(
        "train", "--resume", str(run), *_overrides(tmp_path, primed_tiny_model_dir), "--json"
    )
    done = subprocess.run(resume, check=True, timeout=900, capture_output=True, text=True)
    assert json.loads(done.stdout)["policy_updates"] == 3, done.stdout  # nothing else on stdout
    after = _summary(run)
    path, version = latest_checkpoint(run / "checkpoints", "policy")
    assert after["policy_updates"] == version == 3
    assert after["finished"] is True and after["invocations"] == 2, after
    assert after["trajectories"] >= before["trajectories"]
    updates = [
        json.loads(line)["step"]
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if '"scope": "policy"' in line
    ]
    # every version 1..3 was reached; one lost between checkpoint and kill may repeat
    assert set(updates) == {1, 2, 3}
    records = [
        json.loads(line)
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if '"scope": "policy"' in line or '"scope": "prm"' in line
    ]
    for record in records:  # every update of both learners, before and after the resume
        assert record["ranks"] == 2, record
        tokens = [record["rank0_tokens"], record["rank1_tokens"]]
        assert max(tokens) - min(tokens) <= 8192, record  # train.*.micro_batch_tokens


def _left(children: list[psutil.Process], state_dir: Path) -> tuple[list[str], list[str]]:
    """(command lines of the run's children still alive, desktops still alive)."""
    alive = []
    for child in children:
        try:  # is_running() also tells a reused pid apart (creation time)
            if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                alive.append(" ".join(child.cmdline())[:200])
        except psutil.NoSuchProcess:
            pass
    desktops = [r.id for r in st.list_records(state_dir) if record_alive(r)]
    return alive, desktops
