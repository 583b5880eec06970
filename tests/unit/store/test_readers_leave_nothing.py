"""Readers of a run store leave nothing behind: `runs show`, `export trajectories` and
the viewer's connection keep a finished run directory's file list as it was (SQLite's
`mode=ro` alone left `run.sqlite-wal` and `-shm` there), and still read a live run's
newest rows (store/read_only.py)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from tests_support.viewer_runs import build_run

from cua_rl.cli import cli
from cua_rl.store import read_only
from cua_rl.store.run_store import DB_NAME, RunStore
from cua_rl.viewer import queries
from cua_rl.viewer.server import ViewerDatabase


def _listing(run_dir: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(run_dir)), p.stat().st_mtime_ns) for p in run_dir.rglob("*"))


def test_runs_show_and_export_leave_the_run_directory_as_it_was(tmp_path: Path) -> None:
    run = tmp_path / "run"
    build_run(run)
    before = _listing(run)
    assert (DB_NAME, before[0][1]) in before and not (run / f"{DB_NAME}-wal").exists()
    shown = CliRunner().invoke(cli, ["runs", "show", str(run), "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["policy_updates"] == 2
    out = tmp_path / "out.jsonl"
    exported = CliRunner().invoke(cli, ["export", "trajectories", str(run), "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    assert len(out.read_text().splitlines()) == 3
    assert _listing(run) == before


def test_a_live_store_is_read_with_its_newest_rows(tmp_path: Path) -> None:
    writer = RunStore(tmp_path)
    try:
        writer.incr("steps", 5)  # in the WAL, not yet in the main file
        assert (tmp_path / f"{DB_NAME}-wal").exists()
        reader = RunStore.read_only(tmp_path)
        try:
            assert reader.counters()["steps"] == 5
        finally:
            reader.close()
    finally:
        writer.close()
    assert not (tmp_path / f"{DB_NAME}-wal").exists()


def test_the_viewer_opens_again_once_a_writer_starts(tmp_path: Path) -> None:
    """An immutable connection sees no later write: a resumed run's rows show once
    the viewer's next query finds the writer's WAL."""
    build_run(tmp_path, n_trajectories=2)
    db = ViewerDatabase(tmp_path)
    try:
        first = db._query(queries.overview)
        assert read_only.immutable(tmp_path / DB_NAME)
        writer = RunStore(tmp_path)
        try:
            writer.incr("policy_updates", 5)
            again = db._query(queries.overview)
        finally:
            writer.close()
    finally:
        db.close()
    assert first["counters"]["policy_updates"] == 2
    assert again["counters"]["policy_updates"] == 7


def test_the_viewer_sees_a_writer_that_came_and_went_between_queries(tmp_path: Path) -> None:
    """A writer that opened, wrote and closed between two queries leaves no WAL
    behind: the viewer still opens again, as the store's main file changed."""
    build_run(tmp_path, n_trajectories=2)
    db = ViewerDatabase(tmp_path)
    try:
        first = db._query(queries.overview)
        writer = RunStore(tmp_path)
        writer.incr("policy_updates", 5)
        writer.close()
        assert read_only.immutable(tmp_path / DB_NAME)
        again = db._query(queries.overview)
    finally:
        db.close()
    assert first["counters"]["policy_updates"] == 2
    assert again["counters"]["policy_updates"] == 7
