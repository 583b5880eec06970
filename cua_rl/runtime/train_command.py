"""`cua-rl train`: the whole RL loop on one machine."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from cua_rl.runtime.options import run_options


@click.command("train", context_settings={"ignore_unknown_options": True})
@run_options
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Continue the run in this directory from its last checkpoint.")
def train(config: str | None, preset: str | None, out: Path | None,
          overrides: tuple[str, ...], as_json: bool, resume_dir: Path | None) -> None:
    """Train policy and reward model with actors, the streaming PRM and task adaptation."""
    from cua_rl.errors import CuaRlError
    from cua_rl.runtime.options import load_run_config, new_run_dir, run_stoppable
    from cua_rl.runtime.train import run_training

    if resume_dir is not None:
        saved = resume_dir / "config.yaml"
        if not saved.is_file():
            raise click.ClickException(f"{resume_dir}: no config.yaml; not a cua-rl train run")
        config, preset = str(saved), None
    cfg = load_run_config(config, preset, overrides)
    run_dir = resume_dir or out or new_run_dir("train")
    if resume_dir is None:
        import yaml

        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    started = time.monotonic()
    try:
        summary = run_stoppable(run_training(cfg, run_dir, resume=resume_dir is not None))
    except (CuaRlError, ExceptionGroup) as exc:
        cause = _cua_error(exc)
        if cause is None:
            raise
        raise click.ClickException(str(cause)) from exc
    summary["wall_s"] = round(time.monotonic() - started, 1)
    click.echo(json.dumps(summary, indent=2) if as_json else
               "  ".join(f"{k}={v}" for k, v in summary.items()))


def _cua_error(exc: BaseException) -> BaseException | None:
    """The first of our own errors inside a (possibly nested) exception group: task
    groups wrap what failed, and the user should read the message, not a tree."""
    from cua_rl.errors import CuaRlError

    if isinstance(exc, CuaRlError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _cua_error(inner)) is not None:
                return found
    return None
