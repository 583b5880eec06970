"""Checks of `cua-rl export trajectories` against the run store it read, shared by
the quickstart run's test and the export test (docs/run-store.md, export format)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from PIL import Image

from cua_rl.agent.context import step_messages
from cua_rl.export.trajectories import image_parts, run_prompting
from cua_rl.store.run_store import RunStore

SCORED = ("finished", "step_limit")


def export_lines(run: Path, out: Path, *args: str) -> tuple[dict[str, Any], list[dict]]:
    """Run the CLI; its --json summary and the lines it wrote."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cua_rl.cli",
            "export",
            "trajectories",
            str(run),
            "--out",
            str(out),
            "--json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), [json.loads(line) for line in out.read_text().splitlines()]


def check_export(run: Path, processor_dir: Path, out: Path) -> list[dict]:
    """One line per stored scored trajectory; every step's last assistant turn (and
    each replayed one) is a stored response; one loadable image per step; the tiny
    Qwen3-VL processor renders the messages to the prompt text the actor's data-URL
    messages give, and tokenizes them with their images."""
    from transformers import AutoProcessor

    summary, records = export_lines(run, out)
    store = RunStore.read_only(run)
    stored = [r for r in store.trajectory_records() if r["status"] in SCORED]
    assert stored, "the run stored no scored trajectory"
    assert [r["trajectory_id"] for r in records] == [r["trajectory_id"] for r in stored]
    assert summary["trajectories"] == len(records)
    processor = AutoProcessor.from_pretrained(str(processor_dir))
    prompting = run_prompting(store)
    for record in records:
        traj = store.load_trajectory(record["trajectory_id"])
        responses = [s.response for s in traj.steps]
        assert len(record["steps"]) == len(record["images"]) == len(traj.steps)
        for i, step in enumerate(record["steps"]):
            assistant = [
                part["text"]
                for m in step["messages"]
                if m["role"] == "assistant"
                for part in m["content"]
            ]
            assert assistant[-1] == responses[i]
            assert assistant == responses[i + 1 - len(assistant) : i + 1]
            assert step["images"][-1] == record["images"][i]
            with Image.open(record["images"][i]) as image:
                image.load()
            assert processor.apply_chat_template(step["messages"], tokenize=False)
    first = records[0]
    traj = store.load_trajectory(first["trajectory_id"])
    for i, step in enumerate(first["steps"]):
        # the actor's messages (data URLs) and the export's render the same prompt
        urls = [f"data:image/png;base64,step{k}" for k in range(i + 1)]
        actor = step_messages(
            first["instruction"], traj.steps[:i], urls, traj.screen, prompting.episode
        )
        exported = step["messages"][:-1]
        assert image_parts(actor)[0] == exported
        text = processor.apply_chat_template(exported, tokenize=False, add_generation_prompt=True)
        assert text == processor.apply_chat_template(
            actor, tokenize=False, add_generation_prompt=True
        )
        images = [Image.open(p).convert("RGB") for p in step["images"]]
        batch = processor(text=[text], images=images, return_tensors="pt")
        assert batch["image_grid_thw"].shape[0] == len(images)
    store.close()
    return records
