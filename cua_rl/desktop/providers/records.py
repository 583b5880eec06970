"""A desktop's record file, written once for every provider that keeps one: the
dataclass a later `cua-rl` process reads to find, reach and stop a desktop whose
starter is gone, saved atomically as `<desktop dir>/state.json`."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Self, TypeVar

from cua_rl.desktop.providers.local.session import process_start_time

RECORD_FILE = "state.json"
R = TypeVar("R", bound="JsonRecord")


class JsonRecord:
    """Mixin of a slotted dataclass with `pid` and `start_time` fields: atomic save,
    tolerant load, and whether the process it names still runs (not a reused pid)."""

    __slots__ = ()
    pid: int
    start_time: float

    def save(self, ddir: Path) -> None:
        """Atomic, so a concurrent `vm list` never reads half a record."""
        tmp = ddir / f"{RECORD_FILE}.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2))  # type: ignore[call-overload]  # every user of the mixin is a dataclass, which a mixin cannot declare
        tmp.replace(ddir / RECORD_FILE)

    @classmethod
    def load(cls, ddir: Path) -> Self | None:
        """The record in `ddir`, or None when there is none or it does not parse."""
        try:
            data: Any = json.loads((ddir / RECORD_FILE).read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None

    @property
    def alive(self) -> bool:
        return process_start_time(self.pid) == self.start_time


def load_all(state_dir: Path, kind: type[R]) -> list[R]:
    """Every record under `state_dir` (alive or not), sorted by its dir's name."""
    if not state_dir.is_dir():
        return []
    records = (kind.load(d) for d in sorted(state_dir.iterdir()) if d.is_dir())
    return [r for r in records if r is not None]
