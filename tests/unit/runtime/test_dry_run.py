"""`cua-rl train --dry-run --nodes ... --json`: every process of a run on its own devices,
from the code the launch uses (runtime/launch_plan.py), on a machine without GPUs."""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.inference.gpus import visible_gpus

ROOT = Path(__file__).resolve().parents[3]
PAPER_8 = ["policy.replicas=2", "prm.replicas=1"]
"""The paper's preset cut to one 8-GPU node: 2 + 1 replicas and the rewriter's 1."""


def readme_paper_command() -> list[str]:
    """README's paper command (Train on GPUs), as its words, without its --dry-run flags."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Train on GPUs") : text.index("## Evaluate your model")]
    lines = section.splitlines()
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if line.startswith("cua-rl train --preset rlanything-osworld")
        ),
        None,
    )
    assert start is not None, "README's Train on GPUs has no `cua-rl train` paper command"
    command = [lines[start]]
    while command[-1].rstrip().endswith("\\"):
        command.append(lines[start + len(command)])
    words = shlex.split(
        " ".join(line.rstrip().removesuffix("\\") for line in command), comments=True
    )
    words = words[2:]  # `cua-rl train`
    for flag in ("--dry-run", "--nodes"):
        if flag in words:
            i = words.index(flag)
            del words[i : i + (2 if flag == "--nodes" else 1)]
    return words


def dry(*args: str) -> tuple[int, dict | str]:
    done = CliRunner().invoke(cli, ["train", *args, "--dry-run", "--json"])
    if done.exit_code != 0:
        return done.exit_code, done.output
    return 0, json.loads(done.stdout)


def gpu_pairs(plan: dict) -> list[tuple[str, str]]:
    return [(p["node"], d) for p in plan["processes"] for d in p["devices"]]


def test_readme_paper_command_on_3x8gpu_gives_every_gpu_process_its_own_device() -> None:
    words = readme_paper_command()
    assert "runtime=ray" in words and "ray.inference=ray" in words
    code, plan = dry(*words, "--nodes", "3x8gpu")
    assert code == 0, plan
    assert isinstance(plan, dict) and plan["runtime"] == "ray"
    gpu_roles = [
        p
        for p in plan["processes"]
        if re.match(r"(policy|prm|rewriter) (replica|learner rank) \d+$", p["role"])
    ]
    # 8 + 8 ranks, 4 + 2 + 1 replicas: each with a node and at least one device
    assert len(gpu_roles) == 23
    assert all(p["node"] in ("node0", "node1", "node2") and p["devices"] for p in gpu_roles)
    pairs = gpu_pairs(plan)
    assert len(pairs) == len(set(pairs)) == 23, Counter(pairs).most_common(3)
    driver = next(p for p in plan["processes"] if p["role"] == "driver")
    assert driver["node"] == "node0" and driver["devices"] == []


def test_one_8gpu_node_local_every_replica_and_rank_on_its_own_device() -> None:
    code, plan = dry(
        "--preset",
        "rlanything-osworld",
        *PAPER_8,
        "train.policy.ranks=2",
        "train.prm.ranks=2",
        "--nodes",
        "1x8gpu",
    )
    assert code == 0, plan
    assert isinstance(plan, dict)
    by_role = {p["role"]: p for p in plan["processes"]}
    expected = [
        "policy replica 0",
        "policy replica 1",
        "prm replica 0",
        "rewriter replica 0",
        *(f"{r} learner rank {i}" for r in ("policy", "prm") for i in (0, 1)),
    ]
    assert all(len(by_role[role]["devices"]) == 1 for role in expected), by_role
    devices = [by_role[role]["devices"][0] for role in expected]
    assert sorted(devices) == [str(i) for i in range(8)]  # each its own, none twice
    for role in expected:  # what the child sees is its device
        assert by_role[role]["env"]["CUDA_VISIBLE_DEVICES"] == by_role[role]["devices"][0]
    # the driver runs no learner itself: it holds no GPU and sees none
    assert by_role["driver"]["devices"] == []
    assert by_role["driver"]["env"]["CUDA_VISIBLE_DEVICES"] == ""


def test_in_process_learners_give_the_driver_their_devices_and_no_more() -> None:
    code, plan = dry("--preset", "rlanything-osworld", *PAPER_8, "--nodes", "1x8gpu")
    assert code == 0, plan
    assert isinstance(plan, dict)
    by_role = {p["role"]: p for p in plan["processes"]}
    policy = by_role["policy learner (in the driver)"]["devices"]
    prm = by_role["prm learner (in the driver)"]["devices"]
    assert len(policy) == len(prm) == 1 and policy != prm
    assert by_role["driver"]["devices"] == policy + prm
    assert by_role["driver"]["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(policy + prm)
    replicas = [d for p in plan["processes"] if "replica" in p["role"] for d in p["devices"]]
    assert not set(replicas) & set(policy + prm) and len(replicas) == len(set(replicas)) == 4


def test_a_layout_that_does_not_fit_is_refused_with_what_would_fit() -> None:
    code, output = dry("--preset", "rlanything-osworld", "--nodes", "1x8gpu")
    assert code == 1
    assert isinstance(output, str)
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert "needs 9 GPUs" in lines[0] and "has 8" in lines[0]
    assert "policy.replicas=3" in lines[0]
    # and the suggestion fits
    code, _ = dry("--preset", "rlanything-osworld", "policy.replicas=3", "--nodes", "1x8gpu")
    assert code == 0


def test_sharing_is_only_on_request() -> None:
    code, plan = dry(
        "--preset", "rlanything-osworld", "resources.share_gpus=true", "--nodes", "1x4gpu"
    )
    assert code == 0, plan
    assert isinstance(plan, dict)
    assert max(Counter(gpu_pairs(plan)).values()) > 1
    assert any("share" in note for note in plan["notes"])


@pytest.mark.parametrize(("spec", "message"), [("3x8", "KxGgpu"), ("2xcpu", "CPUs")])
def test_a_malformed_node_spec_is_one_line(spec: str, message: str) -> None:
    code, output = dry("--preset", "quickstart", "--nodes", spec)
    assert code == 1 and message in str(output)


def test_ray_refuses_a_gpu_learner_without_a_gpu_in_its_bundle() -> None:
    code, output = dry(
        "--preset", "rlanything-osworld", "runtime=ray", "ray.inference=ray", "--nodes", "3x8gpu"
    )
    assert code == 1 and "train.policy.rank_gpus=1" in str(output)


def test_gpus_found_from_cuda_visible_devices_or_device_nodes(tmp_path: Path) -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "4,5"}, tmp_path) == ["4", "5"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, tmp_path) == []
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, tmp_path) == []
    for name in ("nvidia1", "nvidia0", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert visible_gpus({}, tmp_path) == ["0", "1"]


def test_eval_dry_run_lays_out_its_replicas_and_starts_no_learner() -> None:
    osworld = ROOT.parent / "shared" / "osworld"
    if not osworld.is_dir():
        pytest.skip(f"{osworld}: OSWorld task files absent (../shared)")
    done = CliRunner().invoke(
        cli,
        [
            "eval",
            "--osworld",
            str(osworld),
            "policy.engine=vllm",
            "policy.replicas=2",
            "--dry-run",
            "--nodes",
            "1x8gpu",
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    processes = json.loads(done.stdout)["launch"]["processes"]
    assert [(p["role"], p["devices"]) for p in processes] == [
        ("driver", []),
        ("policy replica 0", ["0"]),
        ("policy replica 1", ["1"]),
    ]
