"""Which learner checkpoints a run keeps (`train.<role>.keep_every`, `keep_last`,
`keep_versions`, and versions pinned while the run goes).

A learner writes `checkpoints/<role>/step-NNNNNN` after every update (its model,
optimizer and counters: what `--resume` and `cua-rl export model` read) and then
removes the ones nothing keeps. Kept are:
- the newest `keep_last` (at least the one `latest.json` names: resume needs it);
- every `keep_every`-th version (N, 2N, ...; 0: none), so a run can be evaluated
  or exported at its intermediate versions afterwards;
- every version in `keep_versions` (config) or pinned in `checkpoints/<role>/keep.json`
  (`pin_version`): what an experiment or an evaluation asks for while the run goes.
  A pin is read at every removal, so pinning a version that still exists keeps it.
Checkpoints of large models are large (an 8B policy with AdamW's state: ~100 GB), so
by default only the last two are kept; docs/run-directory.md says how to keep more.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cua_rl.atomic_file import write_text_atomic
from cua_rl.errors import RunDirError

KEEP_FILE = "keep.json"
"""`checkpoints/<role>/keep.json`: {"versions": [int, ...]} pinned while the run goes."""
_STEP = re.compile(r"step-(\d+)")


@dataclass(frozen=True)
class Keeping:
    """One learner's keeping rule (from `LearnerConfig`)."""

    every: int = 0
    last: int = 2
    versions: frozenset[int] = field(default_factory=frozenset)

    def keeps(self, version: int, newest: Iterable[int], pinned: Iterable[int] = ()) -> bool:
        """Whether `version` stays, `newest` being the `last` newest versions there."""
        return (
            version in set(newest)
            or version in self.versions
            or version in set(pinned)
            or (self.every > 0 and version % self.every == 0)
        )


def step_dirs(root: Path) -> dict[int, Path]:
    """{version: directory} of the complete `step-N` checkpoints under one role's root."""
    if not root.is_dir():
        return {}
    found = ((_STEP.fullmatch(p.name), p) for p in root.iterdir() if p.is_dir())
    return {int(m.group(1)): p for m, p in found if m}


def pinned(root: Path) -> set[int]:
    """The versions `keep.json` pins (none when there is no file). A file that is not
    {"versions": [int, ...]} raises RunDirError naming it: a pin must never be ignored
    silently, or the version it protects would go."""
    path = root / KEEP_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return set()
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path}: not readable JSON ({exc})") from None
    versions = data.get("versions") if isinstance(data, dict) else None
    if not isinstance(versions, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in versions
    ):
        raise RunDirError(f'{path}: expected {{"versions": [int, ...]}}, got {data!r}')
    return set(versions)


def pin_version(checkpoint_dir: Path, role: str, version: int) -> None:
    """Keep `version` of `role` for good (written atomically; the learner reads it at
    every removal). Pinning a version already removed keeps nothing: pin ahead, or set
    `train.<role>.keep_versions` / `keep_every` in the config."""
    root = checkpoint_dir / role
    root.mkdir(parents=True, exist_ok=True)
    versions = sorted(pinned(root) | {version})
    write_text_atomic(root / KEEP_FILE, json.dumps({"versions": versions}))


def prune(root: Path, keeping: Keeping) -> list[int]:
    """Remove the checkpoints under `root` that `keeping` (and the pins) do not keep;
    returns the versions removed."""
    dirs = step_dirs(root)
    newest = sorted(dirs)[-max(keeping.last, 1) :]
    pins = pinned(root)
    gone = [v for v in sorted(dirs) if not keeping.keeps(v, newest, pins)]
    for version in gone:
        shutil.rmtree(dirs[version], ignore_errors=True)
    return gone


def describe(role: str, keeping: Keeping) -> str:
    """One line of which checkpoints of `role` the run keeps (`train` logs it)."""
    parts = [f"the last {keeping.last}"]
    if keeping.every:
        parts.append(f"every {keeping.every}th version" if keeping.every > 1 else "every version")
    if keeping.versions:
        parts.append("versions " + ", ".join(map(str, sorted(keeping.versions))))
    parts.append(f"any pinned in checkpoints/{role}/{KEEP_FILE}")
    hint = (
        ""
        if keeping.every
        else f" (train.{role}.keep_every=N keeps every N-th for export and evaluation)"
    )
    return f"{role} checkpoints kept: {', '.join(parts)}{hint}"
