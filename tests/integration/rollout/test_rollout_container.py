"""`cua-rl rollout` on container desktops of the minimal image: the tiny model
plays a real task whose setup and evaluator run inside the containers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.desktop, pytest.mark.model]

TASK = {
    "id": "t-hello",
    "snapshot": "os",
    "source": "test",
    "related_apps": ["os"],
    "instruction": "Create an empty file named hello.txt in the home folder.",
    "config": [
        {"type": "execute", "parameters": {"command": ["bash", "-c", "rm -f /home/user/hello.txt"]}}
    ],
    "evaluator": {
        "func": "exact_match",
        "result": {
            "type": "vm_command_line",
            "shell": True,
            "command": "test -f /home/user/hello.txt && echo yes || echo no",
        },
        "expected": {"type": "rule", "rules": {"expected": "yes\n"}},
    },
}


def test_rollout_command_on_container_desktops(
    tmp_path: Path, tiny_model_dir: Path, minimal_docker_image: str
) -> None:
    tasks = tmp_path / "osworld" / "examples" / "os"
    tasks.mkdir(parents=True)
    (tasks / "t-hello.json").write_text(json.dumps(TASK))
    prefix = f"cua-rl-test-rollout-{os.getpid()}-"
    config = tmp_path / "run.yaml"
    config.write_text(
        json.dumps(
            {
                "tasks": {"source": f"osworld:{tmp_path / 'osworld'}"},
                "desktops": {
                    "count": 2,
                    "provider": {
                        "type": "container",
                        "image": minimal_docker_image,
                        "engine": "docker",
                        "state_dir": str(tmp_path / "state"),
                        "name_prefix": prefix,
                    },
                },
                "fleet": {"actors": 2, "group_size": 2},
                "episode": {"max_steps": 2, "max_tokens": 24},
                "judge": {"votes": 1, "max_tokens": 24},
                "tiny_model_dir": str(tiny_model_dir),
            }
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cua_rl.cli",
            "rollout",
            str(config),
            "--out",
            str(tmp_path / "run"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"name={prefix}"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.split()
    assert left == [], "containers left after the rollout"
    from cua_rl.store.run_store import RunStore

    summary = RunStore(tmp_path / "run").summary()
    assert summary["trajectories"] == 2 and summary["aborted"] == 0, summary
