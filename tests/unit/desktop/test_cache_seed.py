"""Bulk seeding of the asset cache from a directory, the cache root and mirrors."""

from __future__ import annotations

from pathlib import Path

from cua_rl.desktop.cache_seed import repo_path, seed_from_dir
from cua_rl.desktop.file_cache import FileCache, default_cache_root

HUB = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main"


def test_files_are_found_by_repo_path_then_url_path_then_unique_name(tmp_path: Path) -> None:
    src = tmp_path / "src"
    by_repo, by_url, by_name, twice = (
        f"{HUB}/calc/1/a.xlsx",
        f"{HUB}/calc/2/b.pdf",
        f"{HUB}/gimp/3/c.png",
        f"{HUB}/gimp/4/d.txt",
    )
    files = {
        "calc/1/a.xlsx": "repo",  # huggingface-cli download --local-dir layout
        "datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/calc/2/b.pdf": "url",
        "anywhere/c.png": "name",
        "one/d.txt": "d1",
        "two/d.txt": "d2",  # ambiguous by name: not guessed
    }
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    cache = FileCache(tmp_path / "cache")
    result = seed_from_dir(cache, [by_repo, by_url, by_name, twice, by_repo], src)
    assert result.seeded == [by_repo, by_url, by_name] and result.missing == [twice]
    assert [cache.cached(u).read_text() for u in result.seeded] == ["repo", "url", "name"]
    again = seed_from_dir(cache, [by_repo], src)
    assert again.already == [by_repo] and not again.seeded
    assert repo_path(f"{HUB}/x/y%20z.pdf?download=true") == "x/y z.pdf"


def test_cache_root_and_hub_mirror_come_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CUA_RL_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:8999/")
    assert default_cache_root() == tmp_path / "c"
    cache = FileCache(default_cache_root())
    url = f"{HUB}/a.txt"
    assert cache.source_url(url) == "http://127.0.0.1:8999" + url.removeprefix(
        "https://huggingface.co"
    )
    assert cache.path_for(url).is_relative_to(tmp_path / "c")  # keyed by the original URL
    assert cache.source_url("https://example.com/x") == "https://example.com/x"
    monkeypatch.delenv("HF_ENDPOINT")
    assert FileCache(tmp_path).source_url(url) == url
