"""`cua-rl bench desktops`: start/reset/screenshot times and memory per desktop,
per provider; the measuring is `cua_rl.bench.desktops`, this module
parses the flags and prints the JSON."""

from __future__ import annotations

from pathlib import Path

import click

from cua_rl.bench.desktops import ALL_PROVIDERS, measure, provider_fields
from cua_rl.command_output import emit_json


def parse_providers(text: str) -> list[str]:
    """`--provider local, qemu,local` -> ["local", "qemu"]: a comma list in the order
    given, each once. An unknown or missing name is one usage error naming the
    valid ones, before any desktop starts (a typo must not cost a 3-minute boot)."""
    names = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    unknown = [n for n in names if n not in ALL_PROVIDERS]
    if unknown or not names:
        what = f"unknown provider(s) {', '.join(unknown)}" if unknown else "no provider"
        raise click.BadParameter(
            f"{what}; expected a comma list of {', '.join(ALL_PROVIDERS)}", param_hint="--provider"
        )
    return names


@click.command(name="desktops")
@click.option(
    "--provider",
    "providers",
    default=",".join(ALL_PROVIDERS),
    show_default=True,
    help="Comma list of providers to measure.",
)
@click.option(
    "--calls",
    type=click.IntRange(min=5),
    default=50,
    show_default=True,
    help="Screenshots per figure.",
)
@click.option(
    "--max-limit",
    type=click.IntRange(min=0, max=64),
    default=8,
    show_default=True,
    help="Largest number of local desktops tried for max_desktops (0: skip; "
    "skipped too when --provider has no `local`).",
)
@click.option(
    "--container-image",
    default="cua-rl-desktop:full",
    show_default=True,
    help="Image of the container desktops (`cua-rl image build --format docker`).",
)
@click.option(
    "--qemu-image",
    type=click.Path(dir_okay=False),
    default=None,
    help="disk.qcow2 of `cua-rl image build --format qcow2` (default: the "
    "provider's configured image).",
)
@click.option("--qemu-memory-mb", type=click.IntRange(min=512), default=1024, show_default=True)
@click.option(
    "--forks",
    is_flag=True,
    help="Instead: per provider, a group's setup per rollout against one setup "
    "plus a fork per rollout (fleet.fork_groups), on two desktops, per task.",
)
@click.option(
    "--tasks",
    "tasks_source",
    default="local",
    show_default=True,
    help="With --forks: the task source (local or osworld:PATH).",
)
@click.option(
    "--fork-tasks",
    default="",
    help="With --forks: comma list of task ids (default: "
    "the source's forkable tasks with the longest setups).",
)
@click.option(
    "--fork-count",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="With --forks and no --fork-tasks: how many tasks.",
)
@click.option(
    "--group-size",
    type=click.IntRange(min=2),
    default=4,
    show_default=True,
    help="With --forks: rollouts per group.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-forks"),
    show_default=True,
    help="With --forks: the episodes' work dirs (assets come from the runs' "
    "cache, $CUA_RL_CACHE_DIR).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def bench_desktops(
    providers: str,
    calls: int,
    max_limit: int,
    container_image: str,
    qemu_image: str | None,
    qemu_memory_mb: int,
    forks: bool,
    tasks_source: str,
    fork_tasks: str,
    fork_count: int,
    group_size: int,
    work_dir: Path,
    as_json: bool,
) -> None:
    """Start/reset/screenshot times and memory per desktop, per provider.

    The reset is each provider's default: for qemu the snapshot restore; qemu also
    reports `reboot_reset_s`, a reset by reboot (one more VM boot). With `--forks`:
    setup per rollout against setup once plus restores, per task (bench/forks.py)."""
    names = parse_providers(providers)
    if forks:
        from cua_rl.bench.forks import measure_forks

        ids = [t.strip() for t in fork_tasks.split(",") if t.strip()]
        fields = provider_fields(container_image, qemu_image, qemu_memory_mb)
        emit_json(measure_forks(names, fields, tasks_source, ids, fork_count, group_size, work_dir))
        return
    emit_json(measure(names, calls, max_limit, container_image, qemu_image, qemu_memory_mb))
