"""`cua-rl bench weight-sync`: the 8B manifest it sends, a real run through the vLLM
side's receiver in another process (the vLLM environment when there is one), and the
one-line errors of a receiver that dies, talks nonsense or never joins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from cua_rl.bench.weight_shapes import (
    bench_manifest,
    entry_bytes,
    interleaved_manifest,
    qwen3_vl_8b_manifest,
)
from cua_rl.bench.weight_sync import run_bench
from cua_rl.errors import InferenceUnavailable, WeightTransferError
from cua_rl.inference import weight_transfer as wt
from cua_rl.inference.vllm_engine import READY_MARK, default_vllm_env
from cua_rl.learner.model_shapes import KNOWN_MODELS

MIB = 1 << 20


def test_the_manifest_is_qwen3_vl_8b_as_published() -> None:
    manifest = qwen3_vl_8b_manifest()
    params, largest, *_ = KNOWN_MODELS["qwen3-vl-8b-instruct"]
    sizes = [entry_bytes(e) // 2 for e in manifest]
    assert (len(manifest), sum(sizes), max(sizes)) == (750, params, largest)
    assert len({e["name"] for e in manifest}) == 750
    assert Counter(e["name"] for e in interleaved_manifest()) == Counter(
        e["name"] for e in manifest
    )
    # the default bucket size's figure the docs and the config's help cite
    assert len(wt.bucket_layout(manifest, 8 * MIB)) == 480


def test_a_bench_sample_stops_at_the_tensor_that_reaches_the_size() -> None:
    sample = bench_manifest(81 * MIB)  # layer 0: q, k, v, o (80 MiB), q_norm, k_norm, gate
    assert [e["name"].rsplit(".", 2)[-2] for e in sample] == [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "q_norm",
        "k_norm",
        "gate_proj",
    ]
    one_gib = bench_manifest(1024 * MIB)
    assert any(".visual.blocks." in e["name"] for e in one_gib)  # the model's mix
    assert sum(map(entry_bytes, one_gib[:-1])) < 1024 * MIB <= sum(map(entry_bytes, one_gib))
    twice = bench_manifest(2 * sum(map(entry_bytes, qwen3_vl_8b_manifest())))
    assert len(twice) == 1500 and len({e["name"] for e in twice}) == 1500


def test_the_bench_sends_through_the_vllm_receiver_and_prints_only_json(tmp_path: Path) -> None:
    png = tmp_path / "weight-sync.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cua_rl.cli",
            "bench",
            "weight-sync",
            "--mb",
            "81",
            "--bucket-mb",
            "0,16",
            "--repeats",
            "1",
            "--plot",
            str(png),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    has_vllm = (default_vllm_env() / READY_MARK).is_file()
    assert result["receiver"]["environment"] == "vllm" or (
        not has_vllm and result["receiver"]["environment"].startswith("project interpreter")
    )
    print(f"receiver: {result['receiver']}")
    assert (result["tensors"], result["bytes"]) == (7, 176 * MIB + 512)  # two 128-wide norms
    # 0: every tensor alone; 16 MiB: k and v (8 MiB each) fill one, the two norms another
    assert [(r["bucket_mb"], r["buckets"]) for r in result["results"]] == [(0, 7), (16, 5)]
    for r in result["results"]:
        assert r["verified"] and r["bytes_per_s"] > 0 and r["sync_s_median"] > 0
        assert r["bytes_per_s"] == pytest.approx(result["bytes"] / r["sync_s_median"], rel=1e-3)
    whole = result["model_8b"]
    assert (whole["tensors"], whole["bytes"]) == (750, 2 * KNOWN_MODELS["qwen3-vl-8b-instruct"][0])
    assert whole["by_bucket_mb"]["0"]["buckets"] == 750
    assert whole["by_bucket_mb"]["16"]["seconds_per_replica"] > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and result["png"] == str(png)
    assert "round 1/1, bucket   16 MiB: 5 broadcasts" in done.stderr  # progress


def _fake_receiver(tmp_path: Path, body: str) -> str:
    script = tmp_path / "receiver.sh"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_a_receiver_that_dies_is_one_line_with_its_log(tmp_path: Path) -> None:
    fake = _fake_receiver(tmp_path, "echo 'cannot import torch' >&2; exit 3")
    with pytest.raises(
        InferenceUnavailable,
        match=r"exit code 3\) ended before its ready "
        r"line; .* ends: cannot import torch",
    ):
        run_bench(1, [0], repeats=1, python=fake)


def test_a_receiver_that_talks_nonsense_is_refused(tmp_path: Path) -> None:
    fake = _fake_receiver(tmp_path, "echo nonsense; exec cat > /dev/null")
    with pytest.raises(
        WeightTransferError, match="expected a JSON object as its ready line, got 'nonsense"
    ):
        run_bench(1, [0], repeats=1, python=fake)


def test_a_receiver_that_never_joins_fails_at_the_sync_deadline(tmp_path: Path) -> None:
    fake = _fake_receiver(tmp_path, "echo '{\"ready\": true}'; while read -r job; do :; done")
    with pytest.raises(InferenceUnavailable, match="broke the link .*no receiver joined"):
        run_bench(1, [0], repeats=1, timeout_s=1, python=fake)


def test_without_a_vllm_environment_the_receiver_runs_here_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cua_rl.bench.weight_sync import receiver_python

    monkeypatch.setenv("CUA_RL_VLLM_ENV", str(tmp_path / "none"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    python, environment = receiver_python()
    assert python == sys.executable
    assert environment.startswith(
        f"project interpreter (no vLLM environment at {tmp_path / 'none'}: run ./setup.sh --vllm"
    )
