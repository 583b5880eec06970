"""The RunConfig of a run command line, resolved as `train`, `rollout`, `eval` and
`config show` all do: presets, then CONFIG, then fixed settings, then the shared
flags' overrides and the user's own dotted overrides.

One place, so that `config show` prints exactly what a run would use, and so that
the flags (`--osworld`, `--pairs`, `--split`, `--model`, `--provider`) mean the same
dotted overrides wherever they are given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cua_rl.config import RunConfig


def flag_overrides(
    *,
    osworld: Path | None = None,
    pairs: Path | None = None,
    split: str | None = None,
    model: str | None = None,
    provider: str | None = None,
) -> list[str]:
    """The dotted overrides the shared run flags stand for."""
    out = []  # values JSON-quoted: a path may hold YAML syntax (": ", "#")
    if osworld is not None:
        out += [f"tasks.source={json.dumps(f'osworld:{osworld}')}", "tasks.ids=[]"]
    if pairs is not None:
        out += [f"tasks.source={json.dumps(f'pairs:{pairs}')}", "tasks.ids=[]"]
        if split is None:  # a preset's split (eval: osworld-verified) names OSWorld ids
            out.append("tasks.split=null")
    if split is not None:
        out.append(f"tasks.split={json.dumps(split)}")
    if model is not None:
        out.append(f"policy.model={json.dumps(model)}")
    if provider is not None:  # a new type starts from that provider's defaults
        out.append(f"desktops.provider={{type: {provider}}}")
    return out


def resolve_run_config(
    config: str | None,
    preset: str | None,
    overrides: tuple[str, ...],
    *,
    under: str | None = None,
    fixed: tuple[str, ...] = (),
) -> RunConfig:
    """The RunConfig of CONFIG, --preset and the overrides (defaults when neither
    CONFIG nor a preset is given). A CONFIG holding `=` is the first override, given
    without a config file. `under` is a preset below `preset` (eval's protocol
    preset), `fixed` are settings applied after CONFIG and before the overrides
    (eval's protocol). Raises ConfigError for a bad file or override."""
    from cua_rl.config import RunConfig, load_config

    if config and "=" in config:
        overrides, config = (config, *overrides), None
    presets = [p for p in (under, preset) if p]
    return load_config(RunConfig, config, preset=presets, overrides=overrides, fixed=fixed)
