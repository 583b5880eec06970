"""`cua-rl cache seed` + `cua-rl tasks check` on OSWorld's 369 tasks, with a cache
seeded from well-formed stand-in files generated for every asset URL (real assets
cannot be downloaded here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests_support.asset_files import write_asset_tree

from cua_rl.cli import cli
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.providers.local import vscode as local_vscode
from cua_rl.tasks.preflight import task_needs
from cua_rl.tasks.sources import load_source
from cua_rl.tasks.splits import read_split

pytestmark = pytest.mark.shared

OSWORLD = Path(__file__).resolve().parents[3].parent / "shared" / "osworld"


@pytest.fixture(scope="module")
def osworld() -> Path:
    if not (OSWORLD / "examples").is_dir():
        pytest.skip(f"OSWorld task files not found at {OSWORLD} (the ../shared test data)")
    return OSWORLD


def _check(osworld: Path, cache: Path, split: Path, provider: str = "local") -> dict:
    result = CliRunner().invoke(
        cli,
        [
            "tasks",
            "check",
            "--osworld",
            str(osworld),
            "--provider",
            provider,
            "--cache",
            str(cache),
            "--write-split",
            str(split),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_seeded_cache_makes_most_tasks_runnable_locally(osworld: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    empty = _check(osworld, cache, tmp_path / "before.txt")
    assert empty["total"] == 369
    assert len(empty["not_runnable"]["assets_uncached"]) > 150

    urls = [u for t in load_source(f"osworld:{osworld}").tasks for u in task_needs(t).assets]
    assert len(set(urls)) == 662
    written = write_asset_tree(urls, tmp_path / "snapshot")
    seeded = CliRunner().invoke(
        cli,
        [
            "cache",
            "seed",
            "--from",
            str(tmp_path / "snapshot"),
            "--osworld",
            str(osworld),
            "--cache",
            str(cache),
            "--json",
        ],
    )
    assert seeded.exit_code == 0, seeded.output
    assert json.loads(seeded.stdout)["seeded"] == written == 662
    assert all(FileCache(cache).cached(u) is not None for u in urls)

    summary = _check(osworld, cache, tmp_path / "runnable.txt")
    assert summary["total"] == 369
    assert summary["runnable"] >= 200
    assert "assets_uncached" not in summary["not_runnable"]
    ids = [i for group in summary["not_runnable"].values() for i in group]
    assert len(ids) == len(set(ids)) == 369 - summary["runnable"]  # one reason per task
    if local_vscode.install_dir() is None:  # setup.sh builds code-server as root
        assert len(summary["not_runnable"]["unsupported_app:code"]) >= 20  # VS Code tasks
    else:
        assert not any(r.startswith("unsupported_app") for r in summary["not_runnable"])
    runnable = read_split(str(tmp_path / "runnable.txt"))
    assert len(runnable) == summary["runnable"] and not set(runnable) & set(ids)

    # this project's image (container desktops): a local desktop's session (issue 50),
    # so the same tasks run, VS Code's included
    image = _check(osworld, cache, tmp_path / "container.txt", provider="container")
    reasons = image["not_runnable"]
    assert not any(r.startswith("unsupported_app") for r in reasons), reasons.keys()
    assert set(reasons["local_gap"]) == set(summary["not_runnable"]["local_gap"])
    if local_vscode.install_dir() is not None:
        assert (image["runnable"], reasons) == (summary["runnable"], summary["not_runnable"])
        assert read_split(str(tmp_path / "container.txt")) == runnable


def test_only_desktops_without_a_network_file_tasks_under_network(
    osworld: Path, tmp_path: Path
) -> None:
    """OSWorld's image on docker's default network reaches the internet: no task is
    `network` there; local desktops have none, so the internet tasks stay out."""
    cache = tmp_path / "cache"
    local = _check(osworld, cache, tmp_path / "local.txt")
    internet = local["not_runnable"]["network"]
    assert len(internet) >= 10
    docker = _check(osworld, cache, tmp_path / "docker.txt", provider="docker")
    assert "network" not in docker["not_runnable"]
    assert docker["total"] == 369 and docker["runnable"] > local["runnable"]
    # the internet tasks are now runnable or blocked by something else (assets, creds)
    others = {i for ids in docker["not_runnable"].values() for i in ids}
    runnable = set(read_split(str(tmp_path / "docker.txt")))
    assert set(internet) <= others | runnable


def test_check_writes_no_split_unless_asked(
    osworld: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `--write-split` the check only prints: its working directory (where the
    old default `runnable.txt` landed, over a tracked file of that name) keeps its files."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "runnable.txt").write_text("# someone's own list\n")
    monkeypatch.chdir(work)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in work.iterdir())
    result = CliRunner().invoke(
        cli, ["tasks", "check", "--osworld", str(osworld), "--cache", str(tmp_path / "cache")]
    )
    assert result.exit_code == 0, result.output
    assert "split written" not in result.stderr
    assert sorted((p.name, p.stat().st_mtime_ns) for p in work.iterdir()) == before
    assert (work / "runnable.txt").read_text() == "# someone's own list\n"
