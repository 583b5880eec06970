"""`cua-rl tiny-model`: build the tiny Qwen3-VL checkpoint (inference/tiny_model.py)."""

from __future__ import annotations

import time

import click


@click.command("tiny-model")
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--seed", default=0, show_default=True, help="Weight initialization seed.")
@click.option(
    "--primed/--random",
    "primed",
    default=True,
    show_default=True,
    help="Warm the weights up on the answer formats (tool calls, \\boxed votes) so that "
    "samples parse; --random keeps the plain random initialization.",
)
@click.option(
    "--priming-steps",
    type=click.IntRange(min=1),
    envvar="CUA_RL_TINY_PRIMING_STEPS",
    help="Priming budget in optimizer steps (default 1000, ~4 min); fewer build "
    "faster and parse worse (tests set CUA_RL_TINY_PRIMING_STEPS).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def tiny_model(
    out_dir: str, seed: int, primed: bool, priming_steps: int | None, as_json: bool
) -> None:
    """Build the tiny Qwen3-VL checkpoint into OUT_DIR (no download)."""
    from cua_rl.inference.tiny_model import build_tiny_model

    start = time.monotonic()
    built = build_tiny_model(out_dir, seed=seed, primed=primed, priming_steps=priming_steps)
    kind = "format-primed" if primed else "random"
    if as_json:
        from cua_rl.command_output import emit_json

        emit_json(
            {
                "path": str(built.path),
                "kind": kind,
                "seed": seed,
                "parameters": built.num_parameters,
                "build_s": round(time.monotonic() - start, 1),
            }
        )
        return
    click.echo(
        f"tiny {kind} Qwen3-VL checkpoint ({built.num_parameters:,} parameters, seed {seed}) "
        f"written to {built.path} in {time.monotonic() - start:.1f} s"
    )
