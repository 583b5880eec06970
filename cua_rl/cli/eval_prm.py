"""`cua-rl eval-prm`: a reward model's outcome and process accuracy on a stored run
(runtime/prm_accuracy.py does the work; docs/reward-model-accuracy.md)."""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.reward.config import JudgeConfig

_JUDGE = JudgeConfig()
LABEL_VOTES = 8
"""The paper's labelling judge votes 8 times per step (Appendix C.2)."""
LABEL_ONLY = ("label_model", "label_votes", "label_temperature", "label_max_tokens")
STARTED_ONLY = ("engine", "replicas", "threads")


@click.command("eval-prm")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Output folder: report.json, report.md, report.png and the vote cache "
    "votes.sqlite (a rerun with the same --out asks only for missing votes).",
)
@click.option(
    "--model",
    help="The judged reward model, started here: a Hugging Face folder "
    "(e.g. from `cua-rl export model RUN --role prm --out DIR`) or `tiny`.",
)
@click.option(
    "--engine",
    type=click.Choice(["hf", "vllm"]),
    default="hf",
    show_default=True,
    help="With --model: the engine that serves it.",
)
@click.option(
    "--replicas",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="With --model: replicas started.",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="With --model: CPU threads per replica.",
)
@click.option(
    "--url",
    help="The judged reward model on a running OpenAI-compatible "
    "server instead (base URL, e.g. http://127.0.0.1:8000).",
)
@click.option(
    "--served-name",
    help="With --url: the model name the server serves it "
    "under (sent as `model`, and the votes' cache identity; default: the URL).",
)
@click.option(
    "--votes",
    type=click.IntRange(1, 16),
    default=_JUDGE.votes,
    show_default=True,
    help="m: the judged model's votes per step.",
)
@click.option(
    "--temperature",
    type=click.FloatRange(min=0.0),
    default=_JUDGE.temperature,
    show_default=True,
    help="Sampling temperature of the votes (the judge's).",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=_JUDGE.max_tokens,
    show_default=True,
    help="Tokens per vote (the judge's).",
)
@click.option(
    "--label-url",
    help="A labelling judge (any OpenAI-compatible endpoint) that "
    "labels every step by the majority of its votes on the same prompt; without "
    "it, labels stored with the run (`step_labels` rows) are used.",
)
@click.option(
    "--label-model",
    help="With --label-url: the model name it serves (sent as "
    "`model`, and its votes' cache identity).",
)
@click.option(
    "--label-votes",
    type=click.IntRange(1, 64),
    default=LABEL_VOTES,
    show_default=True,
    help="The labelling judge's votes per step.",
)
@click.option(
    "--label-temperature",
    type=click.FloatRange(min=0.0),
    default=_JUDGE.temperature,
    show_default=True,
    help="The labelling judge's sampling temperature.",
)
@click.option(
    "--label-max-tokens",
    type=click.IntRange(min=1),
    default=_JUDGE.max_tokens,
    show_default=True,
    help="Tokens per labelling vote (raise it for a thinking "
    "model: a truncated vote has no score).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=8,
    show_default=True,
    help="Trajectories asked about at once (one request per role in flight each).",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=1.0),
    default=300.0,
    show_default=True,
    help="Seconds one request may take before it is retried.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the report as JSON (the only thing on stdout)."
)
@click.pass_context
def eval_prm(
    ctx: click.Context,
    run_dir: Path,
    out: Path,
    model: str | None,
    engine: str,
    replicas: int,
    threads: int,
    url: str | None,
    served_name: str | None,
    votes: int,
    temperature: float,
    max_tokens: int,
    label_url: str | None,
    label_model: str | None,
    label_votes: int,
    label_temperature: float,
    label_max_tokens: int,
    concurrency: int,
    request_timeout: float,
    as_json: bool,
) -> None:
    """Score a reward model on RUN_DIR's scored trajectories (a rollout, eval or train
    run it never trained on): outcome accuracy against the verified outcomes, process
    accuracy against step labels (docs/reward-model-accuracy.md)."""
    from cua_rl.command_output import emit_json
    from cua_rl.runtime.prm_accuracy import EvalPrmRequest, run_eval_prm
    from cua_rl.runtime.vote_sources import ModelSpec, VoteSettings

    if (model is None) == (url is None):
        raise click.UsageError(
            "give the judged reward model as --model PATH|tiny or as --url URL (one of them)"
        )
    _only_with(ctx, STARTED_ONLY, model, "--model")
    _only_with(ctx, ("served_name",), url, "--url")
    _only_with(ctx, LABEL_ONLY, label_url, "--label-url")
    judge = ModelSpec(
        model=model,
        url=url,
        served_name=served_name,
        engine=engine,  # type: ignore[arg-type]  # click.Choice gives one of the Literal's values
        replicas=replicas,
        threads=threads,
    )
    labeller = ModelSpec(url=label_url, served_name=label_model) if label_url else None
    request = EvalPrmRequest(
        run_dir,
        out,
        judge,
        VoteSettings(votes, temperature, max_tokens),
        labeller,
        VoteSettings(label_votes, label_temperature, label_max_tokens) if labeller else None,
        concurrency=concurrency,
        request_timeout_s=request_timeout,
    )
    report, files = run_eval_prm(request)
    if as_json:
        emit_json({**report, "files": [str(p) for p in files]})
        return
    o = report["overall"]

    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{100 * v:.1f}%"

    click.echo(
        f"outcome accuracy {pct(o['outcome_accuracy'])} ({o['steps']} steps, "
        f"{o['trajectories']} trajectories); process accuracy "
        f"{pct(o['process_accuracy'])} ({o['labelled']} labelled, {o['unlabelled']} "
        f"unlabelled); ties {o['ties']}, unparseable votes {o['unparseable_votes']}, "
        f"lost steps {report['failures_total']} -> {files[1]}"
    )


def _only_with(ctx: click.Context, names: tuple[str, ...], given: str | None, flag: str) -> None:
    """A usage error for an option given on the command line without `flag`, which it
    qualifies (it would be ignored silently otherwise)."""
    if given is not None:
        return
    for name in names:
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError(f"--{name.replace('_', '-')} goes with {flag}")
