"""`cua-rl eval`: the OSWorld evaluation protocol over a task set, resumable, with a
per-domain report (report.json, report.md, report.png) in the run directory
(runtime/evaluation_run.py runs it, runtime/telemetry/eval_progress.py shows its progress)."""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.cli.options import OVERRIDES_HELP, load_run_config, run_options
from cua_rl.command_output import emit_json
from cua_rl.report.eval_protocol import EVAL_PRESET


@click.command("eval", context_settings={"ignore_unknown_options": True},
               epilog=OVERRIDES_HELP)
@run_options("Run directory (default: runs/eval-<time>); an evaluation already there "
             "is resumed: the task runs it scored are skipped.")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs of each task, averaged.")
@click.option("--preflight/--no-preflight", default=True, show_default=True,
              help="Skip (and report as unsupported) the tasks `cua-rl tasks check` says "
              "cannot run here.")
def eval_command(config: str | None, preset: str | None, out: Path | None,
                 overrides: tuple[str, ...], as_json: bool, runs: int,
                 preflight: bool) -> None:
    """Evaluate a policy with the OSWorld protocol (50 steps, temperature 0, 5 s wait,
    3 runs averaged, no reward model) and write a per-domain report.

    Layers: the osworld-verified-eval preset (the protocol, the osworld-verified
    split, a 4096-token budget for Thinking models), then --preset, then CONFIG
    (desktops, model); then the protocol again, so neither can drop it (the values
    it replaces are named on stderr); then the flags and dotted overrides.
    Rerunning with the same --out skips the task runs already scored.
    See docs/evaluate-your-model.md.
    """
    from rich.console import Console

    from cua_rl.errors import ConfigError, TaskFormatError
    from cua_rl.report.eval_protocol import deviations, protocol_overrides, replaced_values
    from cua_rl.report.eval_report import render_counts
    from cua_rl.runtime.run_dir import new_run_dir
    from cua_rl.runtime.run_launch import launch_eval
    from cua_rl.runtime.telemetry.eval_progress import ProgressBar

    cfg = load_run_config(config, preset, overrides, under=EVAL_PRESET,
                          fixed=protocol_overrides())
    replaced = replaced_values(preset, config)
    if replaced:
        click.echo("eval: the OSWorld protocol replaces " + ", ".join(replaced), err=True)
    deviating = deviations(overrides)
    if deviating:
        click.echo("eval: NOT the OSWorld protocol (by override): " + ", ".join(deviating),
                   err=True)
    run_dir = out or new_run_dir("eval")
    bar = ProgressBar(Console(stderr=True))
    try:
        with bar.progress:
            result = launch_eval(cfg, run_dir, runs, progress=bar, check=preflight)
    except (ConfigError, TaskFormatError) as exc:  # raised before anything starts
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        click.echo(f"interrupted: scored task runs are kept in {run_dir}; "
                   "run the same command again to finish the rest", err=True)
        raise SystemExit(130) from None
    overall = result.report["overall"]
    summary = {
        "run_dir": str(run_dir), "task_runs": result.total, "done_before": result.done_before,
        "done_now": result.done_now, "missing": result.missing, "mean": overall["mean"],
        "rate_all": overall["rate_all"], "scored": overall["scored"],
        "setup_failed": overall["setup_failed"], "unsupported": overall["unsupported"],
        "report": [str(p) for p in result.report_files],
        **{k: round(v, 1) if isinstance(v, float) else v for k, v in result.counts.items()},
    }
    if as_json:
        scopes = ("tasks", "attempted", "scored", "setup_failed", "unsupported", "mean",
                  "rate_all")
        summary["domains"] = {d: {k: row[k] for k in scopes}
                              for d, row in result.report["domains"].items()}
        emit_json(summary)
    else:  # the truthful counts per group and domain, then the one-line summary
        click.echo(render_counts(result.report))
        click.echo("  ".join(f"{k}={v}" for k, v in summary.items()))
    if result.missing:
        click.echo(f"{result.missing} task run(s) still missing (kept aborting or stopped by "
                   "fleet.max_groups): run the same command again to do them", err=True)
