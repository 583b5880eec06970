"""`cua-rl config show`: the fully resolved configuration of a run, as YAML.

It resolves exactly what `train`, `rollout` and `eval` would (preset, then file,
then dotted overrides, every default filled in) and prints it, without loading a
model, starting an engine or a desktop, or touching the network, so it answers
for any preset on any machine (the 8B paper preset on a laptop included).
`--plan` prints the same config as a placement plan (runtime/placement_plan.py):
a view of the resolved config, so it takes exactly the same arguments.
"""

from __future__ import annotations

import click
import yaml

from cua_rl.cli.options import load_run_config, shared_run_flags


@click.group("config")
def config() -> None:
    """Inspect run configurations."""


@config.command("show", context_settings={"ignore_unknown_options": True})
@click.argument("config_file", required=False)
@click.option("--preset", help="A preset shipped with cua-rl (e.g. quickstart).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the configuration (or, with --plan, the plan) as JSON.",
)
@click.option(
    "--for",
    "command",
    type=click.Choice(["train", "rollout", "eval"]),
    default="train",
    show_default=True,
    help="Resolve as this command does: `eval` puts the osworld-verified-eval "
    "preset under --preset and CONFIG and its protocol over them.",
)
@click.option(
    "--plan",
    is_flag=True,
    help="Print the placement plan instead: processes or Ray bundles and GPUs per "
    "role, and each learner rank's memory estimate.",
)
@click.option(
    "--gpu-gib",
    type=click.FloatRange(min=1),
    default=80.0,
    show_default=True,
    help="Memory of one GPU, for --plan.",
)
@shared_run_flags
def show(
    config_file: str | None,
    preset: str | None,
    as_json: bool,
    command: str,
    plan: bool,
    gpu_gib: float,
    overrides: tuple[str, ...],
) -> None:
    """Print the resolved configuration of [CONFIG_FILE] [--preset NAME] [flags]
    [k=v ...], exactly as `train`, `rollout` or (`--for eval`) `eval` would run it
    (or, with --plan, where it would run and what each learner rank needs)."""
    from cua_rl.command_output import emit_json

    if command == "eval":
        from cua_rl.report.eval_protocol import EVAL_PRESET, protocol_overrides

        cfg = load_run_config(
            config_file, preset, overrides, under=EVAL_PRESET, fixed=protocol_overrides()
        )
    else:
        cfg = load_run_config(config_file, preset, overrides)
    if plan:
        from cua_rl.runtime.placement_plan import build_plan, render_plan

        built = build_plan(cfg, gpu_gib)
        if as_json:
            emit_json({"runtime": cfg.runtime, **built.as_dict()})
        else:
            click.echo(render_plan(built, cfg.runtime), nl=False)
        return
    if as_json:
        emit_json(cfg.model_dump(mode="json"))
        return
    click.echo(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), nl=False)


@config.command("reference")
def reference() -> None:
    """Print the configuration reference (every key, type, default, meaning) as Markdown."""
    from cua_rl.config.reference import reference as render

    click.echo(render(), nl=False)
