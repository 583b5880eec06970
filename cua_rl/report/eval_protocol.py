"""The OSWorld evaluation protocol, kept whatever preset or CONFIG `eval` is given.

`cua-rl eval` layers the osworld-verified-eval preset, then `--preset`, then
CONFIG; a training preset or config (`--preset quickstart`, the paper's
rlanything-osworld.yaml) sets its own step limit, temperature and wait, and an
evaluation that took them would report an OSWorld-Verified figure under another
protocol. So the protocol keys below are applied again on top of CONFIG, and
each value they replace is named on stderr (one line). A dotted override of a
protocol key still wins, because the user typed it, and is named as a deviation.

The token budget (`episode.max_tokens`) is not protocol: the preset gives 4096,
room for a Thinking model's reasoning, and a user's config may change it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

EVAL_PRESET = "osworld-verified-eval"
PROTOCOL_KEYS = (
    "episode.max_steps",
    "episode.temperature",
    "episode.wait_after_action_s",
    "judge.enabled",
    "fleet.group_size",
)
"""Keys of the preset that are the protocol (50 steps, greedy, 5 s wait, no reward
model, one rollout per task run; runs averaged by `--runs`)."""


def _get(data: dict[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def protocol() -> dict[str, Any]:
    """Protocol key -> value, read from the shipped preset (one source of truth)."""
    from cua_rl.config import read_preset

    data = read_preset(EVAL_PRESET)
    return {key: _get(data, key) for key in PROTOCOL_KEYS}


def protocol_overrides() -> tuple[str, ...]:
    """The protocol as dotted overrides (`episode.max_steps=50`, ...)."""
    import yaml

    return tuple(
        f"{key}={yaml.safe_dump(value).splitlines()[0]}" for key, value in protocol().items()
    )


def replaced_values(preset: str | None, config: str | None) -> list[str]:
    """`key a -> b` for each protocol value that `--preset` or CONFIG set otherwise."""
    from cua_rl.config import merged_layers

    if not preset and not (config and "=" not in config):
        return []
    data = merged_layers(preset, Path(config) if config and "=" not in config else None)
    return [
        f"{key} {_get(data, key)!r} -> {value!r}"
        for key, value in protocol().items()
        if _get(data, key) is not None and _get(data, key) != value
    ]


def deviations(overrides: tuple[str, ...]) -> list[str]:
    """The dotted overrides that change a protocol key."""
    return [o for o in overrides if o.split("=", 1)[0] in PROTOCOL_KEYS]
