"""Seeding the asset cache in bulk from a directory, for machines that cannot
download (air-gapped clusters, CI).

Each URL is looked for in the directory, first match wins:
1. its path inside the hub repository (what follows `/resolve/<revision>/`):
   the layout `huggingface-cli download --repo-type dataset
   xlangai/ubuntu_osworld_file_cache --local-dir DIR` produces, so a snapshot
   made with huggingface_hub's own tool seeds the cache as it is;
2. the whole URL path (`datasets/<owner>/<repo>/resolve/main/...`);
3. its file name, when exactly one file in the directory has it.
Files are copied (atomically, via `FileCache.seed`); URLs already cached are
left alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from cua_rl.desktop.file_cache import FileCache


def repo_path(url: str) -> str | None:
    """The file's path inside its hub repository, or None for other URLs."""
    path = unquote(urlsplit(url).path)
    _, sep, rest = path.partition("/resolve/")
    return rest.split("/", 1)[1] if sep and "/" in rest else None


@dataclass
class SeedResult:
    seeded: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """URLs for which the directory holds no file."""


def find_in_dir(url: str, root: Path, by_name: dict[str, list[Path]]) -> Path | None:
    """The file of `url` under `root` (see the module docstring for the order)."""
    candidates = [repo_path(url), unquote(urlsplit(url).path).lstrip("/")]
    for rel in candidates:
        if rel and (root / rel).is_file():
            return root / rel
    named = by_name.get(unquote(urlsplit(url).path).rsplit("/", 1)[-1], [])
    return named[0] if len(named) == 1 else None


def seed_from_dir(cache: FileCache, urls: Iterable[str], source: Path) -> SeedResult:
    """Copy the files of `urls` found under `source` into `cache`."""
    by_name: dict[str, list[Path]] = defaultdict(list)
    for path in source.rglob("*"):
        if path.is_file():
            by_name[path.name].append(path)
    result = SeedResult()
    for url in dict.fromkeys(urls):
        if cache.cached(url) is not None:
            result.already.append(url)
            continue
        found = find_in_dir(url, source, by_name)
        if found is None:
            result.missing.append(url)
        else:
            cache.seed(url, found)
            result.seeded.append(url)
    return result
