"""`runs show` reads a store without writing it, and reports a corrupt one in one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.store.run_store import DB_NAME, RunStore


def _fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_show_does_not_write_the_store(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.incr("policy_updates", 2)
    store.close()
    db = tmp_path / DB_NAME
    before = _fingerprint(db)
    result = CliRunner().invoke(cli, ["runs", "show", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["policy_updates"] == 2
    assert _fingerprint(db) == before


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_store_is_one_line(tmp_path: Path, damage: str) -> None:
    store = RunStore(tmp_path)
    store.incr("steps", 1)
    store.close()
    db = tmp_path / DB_NAME
    data = db.read_bytes()
    db.write_bytes(b"not sqlite " * 400 if damage == "garbage" else data[:1500])
    before = _fingerprint(db)
    result = CliRunner().invoke(cli, ["runs", "show", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1, result.output
    assert str(db) in result.output and "not a readable cua-rl run store" in result.output
    assert _fingerprint(db) == before


def test_show_outside_a_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["runs", "show", str(tmp_path)])
    assert result.exit_code == 1 and "no run.sqlite" in result.output
