"""manifest.json: the model's quick identity follows tensor shapes and dtypes, its full
hash every value, a task's hash its file; two manifests of the same thing do not
differ, and `cua-rl eval --like RUN_DIR` names a changed model as the difference."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from safetensors.numpy import save_file

from cua_rl.cli import cli
from cua_rl.config import RunConfig, load_config
from cua_rl.report.manifest.differences import differences
from cua_rl.report.manifest.files import begin, read_manifest, write_manifest
from cua_rl.report.manifest.model import folder_identity, safetensors_header
from cua_rl.runtime.evaluation_run import planned_manifest

TASK = {
    "id": "t-one",
    "snapshot": "os",
    "source": "test",
    "related_apps": ["os"],
    "instruction": "Create a file.",
    "config": [],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "echo no"},
        "expected": {"type": "rule", "rules": {"expected": "yes\n"}},
    },
}


def write_model(
    folder: Path, dtype: type = np.float32, shape: tuple[int, ...] = (4, 3), value: float = 0.5
) -> Path:
    """A two-file checkpoint with a tokenizer and a chat template."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file(
        {"embed.weight": np.full(shape, value, dtype=dtype)},
        str(folder / "model-00001-of-00002.safetensors"),
    )
    save_file(
        {"head.weight": np.ones((3, 2), dtype=np.float32)},
        str(folder / "model-00002-of-00002.safetensors"),
    )
    (folder / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    (folder / "tokenizer_config.json").write_text('{"eos_token": "<|im_end|>"}')
    (folder / "chat_template.jinja").write_text("{% for m in messages %}{{ m }}{% endfor %}")
    (folder / "config.json").write_text('{"model_type": "qwen3_vl"}')
    return folder


def test_the_quick_identity_follows_shapes_and_dtypes_and_the_full_hash_values(
    tmp_path: Path,
) -> None:
    base = folder_identity(write_model(tmp_path / "a"), full=True)
    assert [w["file"] for w in base["weights"]] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    assert base["weights"][0]["dtypes"] == {"F32": 1} and base["weights"][0]["tensors"] == 1
    same = folder_identity(write_model(tmp_path / "b"), full=True)
    assert same["quick_id"] == base["quick_id"] and same["content_hash"] == base["content_hash"]
    assert same["tokenizer_hash"] == base["tokenizer_hash"] and base["chat_template_hash"]

    dtype = folder_identity(write_model(tmp_path / "c", dtype=np.float16))
    shape = folder_identity(write_model(tmp_path / "d", shape=(3, 4)))
    assert len({base["quick_id"], dtype["quick_id"], shape["quick_id"]}) == 3
    assert "content_hash" not in dtype  # read only on request

    value = folder_identity(write_model(tmp_path / "e", value=0.25), full=True)
    assert value["quick_id"] == base["quick_id"]  # one value: headers alike...
    assert value["content_hash"] != base["content_hash"]  # ...the full hash is not

    (tmp_path / "b" / "chat_template.jinja").write_text("{{ messages }}")
    assert folder_identity(tmp_path / "b")["chat_template_hash"] != base["chat_template_hash"]


def test_a_file_that_is_not_safetensors_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "m" / "model.safetensors"
    bad.parent.mkdir()
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(ValueError, match="model.safetensors: safetensors header is not JSON"):
        safetensors_header(bad)
    assert "not JSON" in folder_identity(bad.parent)["problems"][0]


@pytest.fixture
def eval_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RunConfig, Path]:
    """An eval config over a one-task OSWorld layout, on a two-file model."""
    monkeypatch.setenv("CUA_RL_CACHE_DIR", str(tmp_path / "cache"))
    task = tmp_path / "osworld" / "examples" / "os" / "t-one.json"
    task.parent.mkdir(parents=True)
    task.write_text(json.dumps(TASK))
    model = write_model(tmp_path / "model")
    cfg = load_config(
        RunConfig,
        preset="osworld-verified-eval",
        overrides=[
            f"tasks.source=osworld:{tmp_path / 'osworld'}",
            "tasks.split=null",
            f"policy.model={model}",
            "episode.max_steps=2",
        ],
    )
    return cfg, task


def test_the_manifest_names_tasks_agent_and_protocol(
    eval_setup: tuple[RunConfig, Path], tmp_path: Path
) -> None:
    cfg, task = eval_setup
    first = planned_manifest(cfg, 2)
    assert first["tasks"]["ids"] == ["t-one"] and first["run"]["runs"] == 2
    assert first["agent"]["protocol"]["deviations"] == ["episode.max_steps: 2 (protocol: 50)"]
    assert first["agent"]["history_images"] == 3 and first["agent"]["action_space"] == "pyautogui"
    assert first["desktops"]["provider"] == "local" and first["desktops"]["network"] is False
    assert differences(first, planned_manifest(cfg, 2)) == []  # nothing differs

    task.write_text(json.dumps({**TASK, "instruction": "Create two files."}))
    changed = differences(first, planned_manifest(cfg, 2))
    assert [d.key for d in changed] == ["tasks.files.t-one.sha256"]
    assert changed[0].section == "tasks"


def test_a_resumed_evaluation_refuses_another_model(
    eval_setup: tuple[RunConfig, Path], tmp_path: Path
) -> None:
    cfg, _ = eval_setup
    run_dir = tmp_path / "run"
    write_manifest(run_dir, planned_manifest(cfg, 1))
    again, found = begin(run_dir, planned_manifest(cfg, 1))
    assert found == [] and len(again["invocations"]) == 1
    write_model(tmp_path / "model", dtype=np.float16)
    from cua_rl.errors import RunDirError

    with pytest.raises(RunDirError, match="another model .*model.identity"):
        begin(run_dir, planned_manifest(cfg, 1))


def test_eval_like_names_a_changed_model_as_the_difference(
    eval_setup: tuple[RunConfig, Path], tmp_path: Path
) -> None:
    cfg, _ = eval_setup
    old = tmp_path / "old-run"
    write_manifest(old, planned_manifest(cfg, 2))
    runner = CliRunner()
    args = ["eval", "--like", str(old), "--dry-run", "--json", "--out", str(tmp_path / "new")]
    same = runner.invoke(cli, args)
    assert same.exit_code == 0, same.output
    plan = json.loads(same.stdout)
    assert plan["differences"] == [] and plan["runs"] == 2
    assert (
        "nothing differs in what runs (scores are still not expected to be bitwise equal)"
        in same.stderr
    )

    shutil.rmtree(tmp_path / "model")
    write_model(tmp_path / "model", shape=(2, 6))  # the same name, other weights
    changed = runner.invoke(cli, args)
    assert changed.exit_code == 0, changed.output
    found = json.loads(changed.stdout)["differences"]
    assert {d["section"] for d in found} == {"model"}
    assert "model.identity.quick_id" in {d["key"] for d in found}
    assert "cannot reproduce:" in changed.stderr and "model: model.identity" in changed.stderr
    assert not (tmp_path / "new").exists()  # a dry run starts and writes nothing

    refused = runner.invoke(cli, ["eval", "--like", str(old), "--preset", "quickstart"])
    assert refused.exit_code == 2 and "give no CONFIG or --preset" in refused.output
    assert read_manifest(old)["run"]["runs"] == 2
