"""docs/evaluate-your-model.md's worked example, run as written: the `cua-rl`
lines of its blocks and its config file, with only the substitutions tabled on
the page (GPU model -> the tiny model, docker -> local desktops, the OSWorld
checkout -> a two-task layout, a shortened protocol)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs" / "evaluate-your-model.md"
SHORT = [
    "--runs",
    "1",
    "episode.max_steps=2",
    "episode.wait_after_action_s=0",
    "episode.max_tokens=16",
]

pytestmark = [pytest.mark.desktop, pytest.mark.model]


def _example() -> str:
    text = PAGE.read_text()
    return text[text.index("## Worked example") : text.index("The walk-through is a test")]


def _blocks(section: str) -> tuple[list[str], str]:
    """The `cua-rl` command lines (continuations joined) and the yaml block."""
    commands, config = [], ""
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", section, re.S):
        if lang == "yaml":
            config = body
            continue
        joined = re.sub(r"\\\n\s*", " ", body)
        commands += [
            line.strip() for line in joined.splitlines() if line.strip().startswith("cua-rl ")
        ]
    return commands, config


def _osworld(root: Path) -> Path:
    for domain, task_id in (("os", "t-hello"), ("libreoffice_calc", "t-sheet")):
        folder = root / "evaluation_examples" / "examples" / domain
        folder.mkdir(parents=True)
        (folder / f"{task_id}.json").write_text(
            json.dumps(
                {
                    "id": task_id,
                    "snapshot": "os",
                    "source": "test",
                    "related_apps": ["os"],
                    "instruction": f"Create an empty file named {task_id} in the home folder.",
                    "config": [],
                    "evaluator": {
                        "func": "exact_match",
                        "result": {
                            "type": "vm_command_line",
                            "shell": True,
                            "command": f"test -f /home/user/{task_id} && echo yes || echo no",
                        },
                        "expected": {"type": "rule", "rules": {"expected": "yes\n"}},
                    },
                }
            )
        )
    return root


def _config(text: str) -> dict:
    """The page's config with the tabled substitutions."""
    data = yaml.safe_load(text)
    assert (data["policy"]["engine"], data["policy"]["replicas"]) == ("vllm", 2)
    assert (data["desktops"]["count"], data["fleet"]["actors"]) == (16, 16)
    data["policy"].pop("python")
    data["policy"].update(engine="hf", replicas=1)
    data["desktops"]["count"] = data["fleet"]["actors"] = 1
    return data


def test_the_eval_walkthrough_runs_as_written(
    tmp_path: Path, tiny_model_dir: Path, local_desktops: None
) -> None:
    commands, config = _blocks(_example())
    assert [c.split()[1] for c in commands] == ["vm", "vm", "cache", "tasks", "eval"]
    osworld = _osworld(tmp_path / "osworld")
    assets = tmp_path / "assets"  # the two tasks read no asset: nothing to seed
    assets.mkdir()
    split = tmp_path / "two.txt"
    split.write_text("t-hello\nt-sheet\n")
    (tmp_path / "my-eval.yaml").write_text(yaml.safe_dump(_config(config)))
    env = {
        **os.environ,
        "CUA_RL_STATE_DIR": str(tmp_path / "state"),
        "CUA_RL_CACHE_DIR": str(tmp_path / "cache"),
    }
    started = time.monotonic()
    outputs = []
    for line in commands:
        line = (
            line.replace("--provider docker", "--provider local")
            .replace("Qwen/Qwen3-VL-8B-Thinking", str(tiny_model_dir))
            .replace("/data/OSWorld", str(osworld))
            .replace("runs/eval-qwen3vl-8b", str(tmp_path / "run"))
            .replace("/data/osworld-assets", str(assets))
        )
        words = shlex.split(line)[1:]
        if words[0] in ("tasks", "eval"):
            words += ["--split", str(split)]
        if words[0] == "eval":
            words += SHORT
        done = subprocess.run(
            [sys.executable, "-m", "cua_rl.cli", *words],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=420,
            check=False,
        )
        assert done.returncode == 0, f"{line}\n{done.stdout[-1500:]}\n{done.stderr[-3000:]}"
        outputs.append(done)
    assert json.loads(outputs[2].stdout)["seeded"] == 0
    assert json.loads(outputs[3].stdout)["runnable"] == 2
    summary = json.loads(outputs[4].stdout)
    assert (summary["task_runs"], summary["missing"]) == (2, 0)
    assert (tmp_path / "run" / "report.md").is_file()
    assert "eval: NOT the OSWorld protocol (by override): episode.max_steps=2" in outputs[4].stderr
    print(f"eval walk-through: {time.monotonic() - started:.0f} s")
