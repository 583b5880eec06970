"""`cua-rl export ...`: things taken out of a run directory (`model` here; other
exports join this group)."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.group("export")
def export() -> None:
    """Take models out of a run directory (docs/run-directory.md)."""


@export.command("model")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--role", type=click.Choice(["policy", "prm"]), required=True,
              help="Which learner's weights: the policy or the reward model.")
@click.option("--version", type=click.IntRange(min=1), default=None,
              help="Checkpointed version (update count); default: the latest.")
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="New folder to write (must not exist or be empty).")
@click.option("--base-model", default=None,
              help="Checkpoint dir (or cached hub id) the run started from; default: "
              "the model in RUN_DIR/config.yaml.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def model(run_dir: Path, role: str, version: int | None, out: Path, base_model: str | None,
          as_json: bool) -> None:
    """Write a learner checkpoint of RUN_DIR as a Hugging Face folder (safetensors,
    config, processor, chat template) that transformers loads and `cua-rl serve` serves."""
    from cua_rl.command_output import stdout_to_stderr
    from cua_rl.export.model import export_model

    with stdout_to_stderr():
        info = export_model(run_dir, role, out, version=version,  # type: ignore[arg-type]
                            base_model=base_model)
    click.echo(json.dumps(info, indent=2) if as_json else
               f"{info['role']} v{info['version']} ({info['engine']} checkpoint "
               f"{info['checkpoint']}, {info['dtype']}, {info['parameters']:,} parameters) "
               f"-> {info['out']}")
