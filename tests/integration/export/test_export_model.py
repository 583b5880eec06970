"""`cua-rl export model` on real learner checkpoints of the tiny model (the torch
engine's, made through the learner service; two-rank DeepSpeed checkpoints are
exported in learner/test_learner_deepspeed.py, which already makes them).

An export must hold exactly the checkpoint's weights in its dtype (not the initial
model's), and load in transformers as model and processor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests_support.learner_runs import exported, train_and_checkpoint, write_run_config

torch = pytest.importorskip("torch")

from cua_rl.export.model import export_model  # noqa: E402

pytestmark = pytest.mark.model


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cua_rl.cli", *args], capture_output=True, text=True, timeout=300
    )


def export(run: Path, out: Path, *args: str) -> dict:
    done = cli("export", "model", str(run), "--out", str(out), "--json", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def torch_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose policy learner (torch engine) made and checkpointed 2 updates."""
    from cua_rl.learner.config import LearnerConfig
    from cua_rl.learner.engine_torch import TorchTrainEngine

    torch.set_num_threads(1)
    run = tmp_path_factory.mktemp("run")
    write_run_config(run, tiny_model_dir)
    engine = TorchTrainEngine(LearnerConfig(lr=1e-3), tiny_model_dir)
    train_and_checkpoint(run, engine, "policy", updates=2)
    return run


def checkpointed(run: Path, version: int) -> dict[str, torch.Tensor]:
    file = run / "checkpoints" / "policy" / f"step-{version:06d}" / "train_state.pt"
    return torch.load(file, weights_only=True)["model"]


def test_export_is_the_last_checkpoint_and_loads_in_transformers(
    torch_run: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    out = tmp_path / "policy"
    info = export(torch_run, out, "--role", "policy")
    assert (info["version"], info["engine"], info["dtype"]) == (2, "torch", "float32")
    weights, saved = exported(out), checkpointed(torch_run, 2)
    assert set(weights) == set(saved)
    for name, tensor in saved.items():
        assert weights[name].dtype == tensor.dtype and torch.equal(weights[name], tensor), name
    initial = exported(tiny_model_dir)
    assert any(not torch.equal(weights[n], initial[n]) for n in weights)

    model = AutoModelForImageTextToText.from_pretrained(str(out))
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, saved[name]), name
    processor, base = (
        AutoProcessor.from_pretrained(str(out)),
        AutoProcessor.from_pretrained(str(tiny_model_dir)),
    )
    messages = [{"role": "user", "content": [{"type": "text", "text": "Open the menu."}]}]
    assert processor.apply_chat_template(messages, tokenize=False) == base.apply_chat_template(
        messages, tokenize=False
    )
    assert json.loads((out / "generation_config.json").read_text()) == json.loads(
        (tiny_model_dir / "generation_config.json").read_text()
    )


def test_version_picks_an_older_checkpoint(torch_run: Path, tmp_path: Path) -> None:
    info = export_model(torch_run, "policy", tmp_path / "v1", version=1)
    assert info["version"] == 1
    weights, older = exported(tmp_path / "v1"), checkpointed(torch_run, 1)
    assert all(torch.equal(weights[n], t) for n, t in older.items())
    assert any(not torch.equal(t, checkpointed(torch_run, 2)[n]) for n, t in older.items())


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("--role", "policy", "--version", "7"),
            "no policy checkpoint of version 7; the run keeps versions 1, 2",
        ),
        (("--role", "prm"), "no checkpoint of the prm learner"),
    ],
)
def test_a_missing_role_or_version_is_one_line(
    torch_run: Path, tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    done = cli("export", "model", str(torch_run), "--out", str(tmp_path / "x"), *args)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x").exists()


def test_a_missing_run_is_one_line(tmp_path: Path) -> None:
    done = cli(
        "export", "model", str(tmp_path / "nope"), "--role", "policy", "--out", str(tmp_path / "x")
    )
    assert done.returncode == 1
    assert done.stderr.strip() == f"Error: {tmp_path / 'nope'}: no such run directory"


def test_a_kept_version_is_served_as_run_dir_at_version(torch_run: Path) -> None:
    """`eval --model RUN_DIR@VERSION` (issue 50): the version's checkpoint exported once
    into the run and served from there; a hub id or a folder passes through."""
    from cua_rl.export.run_model import export_dir, resolve_overrides

    overrides = ("episode.max_steps=2", f"policy.model={torch_run}@1", "prm.model=tiny")
    resolved, said = resolve_overrides(overrides)
    folder = export_dir(torch_run, 1)
    assert resolved == ("episode.max_steps=2", f'policy.model="{folder}"', "prm.model=tiny")
    # --model quotes its value (JSON), as every shared run flag does
    assert resolve_overrides((f'policy.model="{torch_run}@1"',))[0] == resolved[1:2]
    assert said == [f"policy.model: version 1 of {torch_run} -> {folder}"]
    weights = exported(folder)
    assert all(torch.equal(weights[n], t) for n, t in checkpointed(torch_run, 1).items())
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert resolve_overrides(overrides)[0] == resolved  # reused, not exported again
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert resolve_overrides(("policy.model=Qwen/Qwen3-VL-8B-Thinking@2",))[1] == []
    done = cli(
        "eval", "--model", f"{torch_run}@7", "--dry-run", "--out", str(torch_run.parent / "eval")
    )
    assert done.returncode == 1 and "no policy checkpoint of version 7" in done.stderr
