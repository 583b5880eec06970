"""What differs between two manifests: the model, the code, the desktops' image, the
tasks... each named with its old and new value.

Only what ran is compared (the identity sections), not where it lay: a model
folder or asset cache moved elsewhere, a start time, or a path is not a
difference; content hashes, versions and settings are. A full hash taken on one
side only is unknown on the other, not different.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cua_rl.report.manifest.build import IDENTITY

IGNORED = (
    "run.started_at",
    "run.ended_at",
    "run.full_hash",
    "run.code.root",
    "model.note",
    "model.identity.path",
    "model.engine.python",
    "model.engine.error",
    "tasks.cache",
    "tasks.files.*.file",
    "tasks.assets.*.path",
    "tasks.assets.*.mtime_ns",
    "tasks.osworld_checkout.path",
    "desktops.image.disk.path",
    "desktops.image.kernel.path",
    "desktops.image.*.error",
    "desktops.image.error",
)
"""Where things lay or when they ran: never a difference (fnmatch patterns)."""
ONE_SIDED = ("model.identity.content_hash", "desktops.image.disk.sha256")
"""Full hashes, taken only on request: missing on one side is not a difference."""
SECTION_ORDER = ("model", "code", "desktops", "tasks", "agent", "run")


@dataclass(frozen=True, slots=True)
class Difference:
    key: str
    """Dotted path in the manifest, e.g. `model.identity.quick_id`."""
    old: Any
    new: Any

    @property
    def section(self) -> str:
        """`model`, `code`, `desktops`, `tasks`, `agent` or `run`."""
        if self.key.startswith("run.code."):
            return "code"
        return self.key.split(".", 1)[0]

    def describe(self, width: int = 80) -> str:
        return f"{self.key}: {_short(self.old, width)} -> {_short(self.new, width)}"

    def as_dict(self) -> dict[str, Any]:
        return {"section": self.section, "key": self.key, "old": self.old, "new": self.new}


def _short(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= width else text[: width - 1] + "…"


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted key -> leaf value (lists are leaves)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out |= flatten(value, path + ".")
        else:
            out[path] = value
    return out


def _ignored(key: str) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in IGNORED)


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Difference]:
    """Every difference in what ran between `old` and `new`, model first, then
    code, desktops, tasks, agent settings and the run's own (`SECTION_ORDER`)."""
    a = flatten({k: old.get(k) or {} for k in IDENTITY})
    b = flatten({k: new.get(k) or {} for k in IDENTITY})
    out = []
    for key in sorted(a.keys() | b.keys()):
        if _ignored(key):
            continue
        if key not in a or key not in b:
            if any(key == p or key.startswith(p + ".") for p in ONE_SIDED):
                continue
        if a.get(key) != b.get(key):
            out.append(Difference(key, a.get(key), b.get(key)))
    order = {s: i for i, s in enumerate(SECTION_ORDER)}
    return sorted(out, key=lambda d: (order.get(d.section, 99), d.key))


def summarize(found: list[Difference], per_section: int = 5) -> list[str]:
    """One line per difference, at most `per_section` per section (then a count)."""
    lines: list[str] = []
    shown: dict[str, int] = {}
    hidden: dict[str, int] = {}
    for diff in found:
        if shown.get(diff.section, 0) < per_section:
            shown[diff.section] = shown.get(diff.section, 0) + 1
            lines.append(f"{diff.section}: {diff.describe()}")
        else:
            hidden[diff.section] = hidden.get(diff.section, 0) + 1
    lines += [f"{section}: and {n} more difference(s)" for section, n in hidden.items()]
    return lines
