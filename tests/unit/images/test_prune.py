"""`image prune`: which cached images, bases and leftovers go, and which stay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.images import prune
from cua_rl.images import recipe as rc
from cua_rl.images.build import build_image

DAY = 86400.0


def _hash(n: int) -> str:
    return f"{n:064x}"


def _image(cache: Path, n: int, profile: str, day: int, base: str, code_server: str = "") -> str:
    """An image dir as a build leaves it: a manifest and a rootfs of 64 KiB."""
    content = _hash(n)
    path = cache / content
    path.mkdir(parents=True)
    manifest = {
        "content_hash": content,
        "base_key": base,
        "recipe": {"profile": profile, "code_server": code_server},
        "built_at": f"2026-11-{day:02d}T00:00:00Z",
    }
    (path / "manifest.json").write_text(json.dumps(manifest))
    (path / "rootfs.tar").write_bytes(os.urandom(65536))
    return content


def _dir(path: Path, age_s: float = 0.0) -> Path:
    path.mkdir(parents=True)
    (path / "rootfs.tar").write_bytes(b"x" * 4096)
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


def _cache(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    cache = tmp_path / "images"
    names = {
        "full_old": _image(cache, 1, "full", 1, "bfull", "cs1"),
        "full_mid": _image(cache, 2, "full", 2, "bfull", "cs1"),
        "full_new": _image(cache, 3, "full", 3, "bfull2", "cs2"),
        "min_old": _image(cache, 4, "minimal", 1, "bmin_old"),
        "min_new": _image(cache, 5, "minimal", 4, "bmin"),
    }
    for key in ("bfull", "bfull2", "bmin_old", "bmin"):
        _dir(cache / "base" / key)
    for key in ("cs1", "cs2"):
        _dir(cache / "code-server" / key)
    (cache / "by-recipe").mkdir()
    (cache / "by-recipe" / "recipe-full-old").write_text(names["full_old"] + "\n")
    (cache / "by-recipe" / "recipe-full-now").write_text(names["full_new"] + "\n")
    return cache, names


def _plan(
    cache: Path,
    keep: int = 1,
    current: set[str] = frozenset(),
    used: set[str] = frozenset(),
    unused_for_s: float = 0.0,
):
    return prune.plan_prune(
        cache,
        keep=keep,
        unused_for_s=unused_for_s,
        in_use=lambda _c: set(used),
        current=lambda _c: set(current),
    )


def test_the_newest_of_each_profile_stays_and_the_rest_goes(tmp_path: Path) -> None:
    cache, names = _cache(tmp_path)
    plan = _plan(cache)
    assert {i.content_hash for i in plan.keep} == {names["full_new"], names["min_new"]}
    assert {i.content_hash for i in plan.remove} == {
        names["full_old"],
        names["full_mid"],
        names["min_old"],
    }
    # the bases and the code-server build only removed images used go with them
    assert set(plan.other) == {
        cache / "base" / "bfull",
        cache / "base" / "bmin_old",
        cache / "code-server" / "cs1",
    }
    assert plan.freed_bytes >= 3 * 65536


def test_what_this_checkout_names_and_a_running_vm_uses_stay(tmp_path: Path) -> None:
    cache, names = _cache(tmp_path)
    plan = _plan(cache, current={names["full_old"]}, used={names["full_mid"]})
    kept = {i.content_hash for i in plan.keep}
    assert kept == {names["full_new"], names["min_new"], names["full_old"], names["full_mid"]}
    assert [i.content_hash for i in plan.in_use] == [names["full_mid"]]
    assert cache / "base" / "bfull" not in plan.other  # a kept image still needs it


def test_an_image_used_lately_stays_however_old_its_build(tmp_path: Path) -> None:
    cache, names = _cache(tmp_path)
    for name in names.values():  # every image last used two days ago ...
        then = time.time() - 2 * DAY
        os.utime(cache / name, (then, then))
    os.utime(cache / names["full_old"])  # ... but this one, just now
    plan = _plan(cache, unused_for_s=DAY)
    assert [i.content_hash for i in plan.recent] == [names["full_old"]]
    assert {i.content_hash for i in plan.remove} == {names["full_mid"], names["min_old"]}


def test_handing_out_a_cached_image_marks_it_used(tmp_path: Path) -> None:
    cache = tmp_path / "images"
    content = _image(cache, 8, "minimal", 1, "b")
    (cache / "by-recipe").mkdir()
    (cache / "by-recipe" / rc.Recipe.for_profile("minimal").key()).write_text(content + "\n")
    then = time.time() - 2 * DAY
    os.utime(cache / content, (then, then))
    image = build_image("minimal", "rootfs", cache=cache)
    assert image.cached and image.content_hash == content
    assert time.time() - (cache / content).stat().st_mtime < DAY


def test_keep_zero_removes_all_but_what_is_named_or_used(tmp_path: Path) -> None:
    cache, names = _cache(tmp_path)
    plan = _plan(cache, keep=0, current={names["min_new"]})
    assert [i.content_hash for i in plan.keep] == [names["min_new"]]


def test_broken_dirs_and_stale_build_leftovers_go_but_a_running_build_stays(tmp_path: Path) -> None:
    cache, _names = _cache(tmp_path)
    broken = _dir(cache / _hash(9))  # no manifest: a build never renames such a dir in place
    stale = [_dir(cache / "build-abc", DAY), _dir(cache / "base" / "building-xyz", DAY)]
    running = _dir(cache / "build-now", 60.0)
    plan = _plan(cache)
    assert broken in plan.other and all(p in plan.other for p in stale)
    assert running not in plan.other


def test_apply_removes_the_dirs_and_the_links_that_named_them(tmp_path: Path) -> None:
    cache, names = _cache(tmp_path)
    plan = _plan(cache)
    result = prune.apply_prune(plan, docker=False)
    left = sorted(p.name for p in cache.iterdir())
    assert left == sorted(["base", "by-recipe", "code-server", names["full_new"], names["min_new"]])
    assert sorted(p.name for p in (cache / "base").iterdir()) == ["bfull2", "bmin"]
    assert [p.name for p in (cache / "by-recipe").iterdir()] == ["recipe-full-now"]
    assert result.freed_bytes >= 3 * 65536  # the three rootfs files, at least (blocks are counted)
    assert len(result.removed) == len(plan.remove) + len(plan.other)


def test_a_process_naming_an_image_file_marks_it_in_use(tmp_path: Path) -> None:
    cache, names = _cache(tmp_path)
    kernel = cache / names["full_old"] / "vmlinuz"
    kernel.write_bytes(b"k")
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", f"file={kernel},format=raw"],
        stdin=subprocess.PIPE,
    )
    try:
        assert names["full_old"] in prune.paths_in_use(cache)
    finally:
        proc.communicate(timeout=30)
    assert names["full_old"] not in prune.paths_in_use(cache)


def test_the_current_recipe_is_read_from_its_by_recipe_link(tmp_path: Path) -> None:
    cache = tmp_path / "images"
    (cache / "by-recipe").mkdir(parents=True)
    key = rc.Recipe.for_profile("minimal").key()
    (cache / "by-recipe" / key).write_text(_hash(7) + "\n")
    assert prune.current_hashes(cache) == {_hash(7)}


def test_the_command_dry_run_removes_nothing_and_names_what_it_would(tmp_path: Path) -> None:
    cache, names = _cache(tmp_path)
    lately = CliRunner().invoke(cli, ["image", "prune", "--out", str(cache), "--dry-run", "--json"])
    assert json.loads(lately.stdout)["would_remove"] == []  # all built moments ago
    before = sorted(p.name for p in cache.iterdir())
    out = CliRunner().invoke(
        cli, ["image", "prune", "--out", str(cache), "--dry-run", "--json", "--unused-hours", "0"]
    )
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["removed"] == [] and str(cache / names["full_old"]) in report["would_remove"]
    assert sorted(p.name for p in cache.iterdir()) == before
    done = CliRunner().invoke(
        cli,
        [
            "image",
            "prune",
            "--out",
            str(cache),
            "--no-docker",
            "--keep",
            "2",
            "--unused-hours",
            "0",
        ],
    )
    assert done.exit_code == 0, done.output
    assert not (cache / names["full_old"]).exists() and (cache / names["full_mid"]).exists()
    assert "removed 1 image(s)" in done.stderr
