"""`cua-rl export ...`: things taken out of a run directory (a learner's model,
the stored trajectories, an evaluation in OSWorld's results layout)."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("export")
def export() -> None:
    """Take models, trajectories and evaluation results out of a run directory
    (docs/run-directory.md)."""


@export.command("model")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--role",
    type=click.Choice(["policy", "prm"]),
    required=True,
    help="Which learner's weights: the policy or the reward model.",
)
@click.option(
    "--version",
    type=click.IntRange(min=1),
    default=None,
    help="Checkpointed version (update count); default: the latest.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="New folder to write (must not exist or be empty).",
)
@click.option(
    "--base-model",
    default=None,
    help="Checkpoint dir (or cached hub id) the run started from; default: "
    "the model in RUN_DIR/config.yaml.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def model(
    run_dir: Path, role: str, version: int | None, out: Path, base_model: str | None, as_json: bool
) -> None:
    """Write a learner checkpoint of RUN_DIR as a Hugging Face folder (safetensors,
    config, processor, chat template) that transformers loads and `cua-rl serve` serves."""
    from cua_rl.command_output import emit_json, stdout_to_stderr
    from cua_rl.export.model import export_model

    with stdout_to_stderr():
        info = export_model(
            run_dir,
            role,  # type: ignore[arg-type]  # click.Choice gives one of the Literal's values
            out,
            version=version,
            base_model=base_model,
        )
    if as_json:
        emit_json(info)
        return
    click.echo(
        f"{info['role']} v{info['version']} ({info['engine']} checkpoint "
        f"{info['checkpoint']}, {info['dtype']}, {info['parameters']:,} parameters) "
        f"-> {info['out']}"
    )


@export.command("trajectories")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--out",
    default=None,
    help="JSON-lines file to write ('-': stdout); default: RUN_DIR/exports/trajectories.jsonl.",
)
@click.option(
    "--success-only",
    is_flag=True,
    help="Only successful trajectories (evaluator score > 0, outcome +1).",
)
@click.option(
    "--min-reward",
    type=float,
    default=None,
    help="Only trajectories whose evaluator score is at least this.",
)
@click.option(
    "--copy-images",
    is_flag=True,
    help="Copy the screenshots into images/ beside --out and refer to them "
    "relatively (a folder that moves without the run directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def trajectories(
    run_dir: Path,
    out: str | None,
    success_only: bool,
    min_reward: float | None,
    copy_images: bool,
    as_json: bool,
) -> None:
    """Write RUN_DIR's scored trajectories as JSON lines for SFT or rejection sampling:
    per step the policy's exact prompt and response (messages + images), rewards and
    the reward model's verdicts (docs/run-store.md)."""
    from cua_rl.command_output import emit_json
    from cua_rl.export.trajectories import Keep, export_trajectories

    if out == "-" and as_json:
        raise click.UsageError("--out - writes the lines to stdout; it cannot take --json")
    target = (
        None if out == "-" else Path(out) if out else run_dir / "exports" / "trajectories.jsonl"
    )
    result = export_trajectories(
        run_dir, target, Keep(success_only, min_reward), copy_images=copy_images
    )
    if as_json:
        emit_json(result.as_dict())
        return
    skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(result.skipped.items()))
    click.echo(
        f"{result.trajectories} trajectories ({result.steps} steps) -> {result.out}"
        + (f"; skipped: {skipped}" if skipped else ""),
        err=out == "-",
    )


@export.command("osworld-results")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder to write into [default: RUN_DIR/osworld-results].",
)
@click.option(
    "--model",
    "model",
    default=None,
    help="Name of the <model> folder [default: the evaluated model's name].",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def osworld_results(run_dir: Path, out: Path | None, model: str | None, as_json: bool) -> None:
    """Write an evaluation run in OSWorld's results layout, which OSWorld's
    show_result.py, viewers of published trajectories and leaderboard submissions
    read: run-<k>/pyautogui/screenshot/<model>/<domain>/<task_id>/ with result.txt,
    traj.jsonl, the step screenshots and recording.mp4 where recorded
    (docs/evaluate-your-model.md). Folders already written for the same trajectory
    are kept."""
    from cua_rl.command_output import emit_json
    from cua_rl.export.osworld_results import export_osworld_results

    result = export_osworld_results(run_dir, out, model)
    if as_json:
        emit_json(result.as_dict())
        return
    click.echo(
        f"{result.written} task run(s) written, {result.kept} kept -> {result.root}"
        + (
            f"; {result.missing_screenshots} screenshot(s) no longer in the run"
            if result.missing_screenshots
            else ""
        )
    )
