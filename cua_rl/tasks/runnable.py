"""Which tasks of a set can run here (`cua-rl tasks check`): the split file of the
runnable ones, and the outcome of running their setups on local desktops.

What each task needs and what stops it is `cua_rl.tasks.preflight`; running the
setups (and scoring a no-op agent) is `cua_rl.tasks.setup_check`. This module
writes the split that `--split` accepts and sums the setup outcomes up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl.desktop.file_cache import FileCache
from cua_rl.types import TaskVariant

if TYPE_CHECKING:
    from cua_rl.tasks.setup_check import SetupOutcome

PROVIDERS = ("local", "container", "docker", "qemu", "aws")
"""The providers whose desktops preflight knows (`capabilities_for`)."""


def write_split(path: Path, ids: list[str], header: str) -> None:
    """A split file (one id per line, `#` comments) of the runnable tasks."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(f"# {line}\n" for line in header.splitlines()) + "".join(f"{i}\n" for i in ids)
    )


def check_on_desktop(
    tasks: Sequence[TaskVariant],
    cache: FileCache,
    desktops: int,
    sample: int | None,
    noop: bool,
    on_outcome: Callable[[SetupOutcome], None] | None = None,
) -> dict[str, Any]:
    """Run the setups of `tasks` (a stratified sample of at most `sample` of them) on
    `desktops` local desktops, with `noop` also scoring a no-op agent; the summary of
    the outcomes (see `cua_rl.tasks.setup_check`)."""
    import asyncio

    from cua_rl.desktop.providers.local.provider import LocalProvider
    from cua_rl.tasks.noop_check import noop_report
    from cua_rl.tasks.setup_check import check_setups, stratified_sample

    chosen = stratified_sample(tasks, sample) if sample else list(tasks)

    async def run() -> list[SetupOutcome]:
        provider = LocalProvider()
        try:
            return await check_setups(
                chosen, provider, cache, desktops=desktops, score_noop=noop, on_outcome=on_outcome
            )
        finally:
            await provider.close()

    outcomes = asyncio.run(run())
    return {
        "checked": len(outcomes),
        "ok": sum(o.ok for o in outcomes),
        "setup_failed": {o.task_id: o.error for o in outcomes if o.error},
        "blank": [o.task_id for o in outcomes if o.blank],
        **(
            {"noop_agent": noop_report([o.noop for o in outcomes if o.noop is not None])}
            if noop
            else {}
        ),
    }
