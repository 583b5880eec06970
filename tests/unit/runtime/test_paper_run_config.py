"""infra/ray/paper-run.yaml, the paper's run on the Ray cluster of
infra/ray/aws-cluster.yaml: it validates over the preset, its launch fits the cluster
(three 8-GPU nodes, four fleet nodes) with every GPU process on its own device, and
the cluster file offers what it needs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import yaml
from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.inference.vllm_engine import VLLM_VERSION

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "infra" / "ray" / "paper-run.yaml"
CLUSTER = ROOT / "infra" / "ray" / "aws-cluster.yaml"
NODES = "3x8gpu:96cpu,4xcpu:16cpu+fleet"


def test_the_paper_run_fits_the_cluster_with_every_gpu_process_on_its_own_device() -> None:
    done = CliRunner().invoke(
        cli,
        [
            "train",
            "--preset",
            "rlanything-osworld",
            str(RUN),
            "--osworld",
            str(ROOT),
            "--dry-run",
            "--nodes",
            NODES,
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    plan = json.loads(done.stdout)
    pairs = [(p["node"], d) for p in plan["processes"] for d in p["devices"]]
    assert len(pairs) == 23 and max(Counter(pairs).values()) == 1
    workers = [p for p in plan["processes"] if p["role"].startswith("fleet worker")]
    assert len(workers) == 4 and {w["node"] for w in workers} == {
        "node3",
        "node4",
        "node5",
        "node6",
    }
    assert plan["desktops"]["provider"] == "aws" and plan["desktops"]["count"] == 96


def test_the_cluster_file_offers_80_gb_gpus_fleet_nodes_and_vllm_in_its_own_env() -> None:
    cluster = yaml.safe_load(CLUSTER.read_text())
    run = yaml.safe_load(RUN.read_text())
    types = cluster["available_node_types"]
    gpu = types["gpu_worker"]
    # the preset fits no 40 GB GPU at any rank count (config show --plan --gpu-gib 40)
    assert gpu["node_config"]["InstanceType"] in ("p4de.24xlarge", "p5.48xlarge")
    assert gpu["min_workers"] >= 3
    assert types["cpu_actor"]["resources"] == {"fleet": 1}
    assert run["ray"]["worker_resources"] == {"fleet": 1}
    setup = "\n".join(cluster["worker_setup_commands"])
    assert "/home/ubuntu/vllm-env" in setup and "[vllm]" not in setup
    assert f'"vllm=={VLLM_VERSION}"' in setup  # what the server-side module is written for
    assert run["policy"]["python"] == "/home/ubuntu/vllm-env/bin/python"
