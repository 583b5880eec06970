"""Calling a registered metric by name on files a test writes."""

from __future__ import annotations

from pathlib import Path

from cua_rl.evaluation import get_metric


def run(name: str, *args: object, **options: object) -> float:
    """The score of metric `name`, as a float."""
    return float(get_metric(name).func(*args, **options))


def write_bytes(tmp_path: Path, name: str, data: bytes) -> str:
    """Write `data` to `tmp_path/name` and return the path as the metrics take it."""
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)
