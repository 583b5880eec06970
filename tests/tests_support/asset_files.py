"""Well-formed stand-ins for OSWorld's asset files, chosen by the URL's extension.

Real assets cannot be downloaded here, so tests seed the asset cache with files
of the right types: spreadsheets openpyxl opens, documents python-docx opens,
slides python-pptx opens, PDFs with a page, decodable images, audio and video
ffmpeg made, archives that unpack, an empty History database Chromium wrote. One file
is generated per extension and copied for every URL that has it (seeding copies
anyway), so a whole task set takes seconds.

Some tasks say more about a file than its URL does (`standins_for`): a URL
ending `.file` or `.data` that the task saves as `.pptx` (a download, or a gold
file of a `cloud_file` getter) gets slides (opaque
bytes make LibreOffice ask for an import filter, and `open` then waits for a
window titled after the file that never comes); a video the task seeks to
120.5 s into is long enough to have that frame; and where the setup waits for
a window titled from the file's metadata (VLC's `<title> - VLC media player`,
Evince's `<file> — <title>`), the stand-in carries that title. All of it is
read from the task itself, so no real asset is needed. A Thunderbird profile
tarball (`thunderbird-profile.tar.gz`) gets a small working profile
(`tests_support.thunderbird_profile`).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from cua_rl.desktop.cache_seed import repo_path
from cua_rl.desktop.file_cache import FileCache
from cua_rl.types import TaskVariant
from tests_support.standin_writers import SPECIAL_KINDS, WRITERS, media, opaque_bytes
from tests_support.thunderbird_profile import write_thunderbird_profile


def extension(url: str) -> str:
    name = unquote(urlsplit(url).path).rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


MEDIA = frozenset({"mp3", "wav", "mp4"})
VLC_TITLE_SUFFIX = " - VLC media player"
EVINCE_SEPARATOR = " \u2014 "
"""Evince titles a document that has a metadata title `<file name> — <title>`."""
_SEEK = re.compile(r"--(?:start|stop)-time=(\d+(?:\.\d+)?)")


@dataclass(frozen=True, slots=True)
class StandIn:
    """What one URL's stand-in must be, when the task says more than the URL."""

    ext: str
    """The type to write (the URL's extension, or the saved name's when the URL's is opaque)."""
    title: str = ""
    """Metadata title an app shows in its window title, which the setup waits for."""
    seconds: int = 1
    """Length of audio or video: past the position the task seeks to."""
    kind: str = ""
    """A stand-in with its own writer (`SPECIAL_KINDS`), e.g. a Thunderbird profile."""


def standins_for(tasks: Iterable[TaskVariant]) -> dict[str, StandIn]:
    """URL -> StandIn for the downloads whose stand-in must differ from the default
    (see the module docstring); every other URL gets the file of its extension."""
    found: dict[str, StandIn] = {}
    for task in tasks:
        steps = [*task.config, *(task.evaluator.get("postconfig") or [])]
        downloads = [
            (f["url"], str(f.get("path", "")).rsplit("/", 1)[-1])
            for step in steps
            if step.get("type") == "download"
            for f in (step.get("parameters") or {}).get("files", [])
            if isinstance(f, dict) and isinstance(f.get("url"), str)
        ]
        downloads += _cloud_files(task.evaluator)
        text = json.dumps(steps)
        seek = max((float(x) for x in _SEEK.findall(text)), default=0.0)
        windows = [
            str((step.get("parameters") or {}).get("window_name", ""))
            for step in steps
            if step.get("type") == "activate_window"
        ]
        for url, name in downloads:
            ext = extension(url)
            saved = name.rsplit(".", 1)[-1].lower() if "." in name else ""
            if ext not in WRITERS and saved in WRITERS:
                ext = saved
            title = ""
            if ext in MEDIA:
                title = next(
                    (
                        w.removesuffix(VLC_TITLE_SUFFIX)
                        for w in windows
                        if w.endswith(VLC_TITLE_SUFFIX)
                    ),
                    "",
                )
            elif ext == "pdf":
                title = next(
                    (
                        w.split(EVINCE_SEPARATOR, 1)[1]
                        for w in windows
                        if w.startswith(name + EVINCE_SEPARATOR)
                    ),
                    "",
                )
            seconds = int(seek) + 2 if ext in MEDIA and seek else 1
            kind = next(
                (
                    k
                    for k, suffix in SPECIAL_KINDS.items()
                    if unquote(urlsplit(url).path).endswith(suffix)
                ),
                "",
            )
            spec = StandIn(ext, title, seconds, kind)
            if spec != StandIn(extension(url)) and url not in found:
                found[url] = spec
    return found


def _cloud_files(evaluator: dict) -> list[tuple[str, str]]:
    """(URL, saved name) of the evaluator's `cloud_file` getters (gold files)."""
    found = []
    for key in ("result", "expected"):
        getters = evaluator.get(key)
        for getter in getters if isinstance(getters, list) else [getters]:
            if isinstance(getter, dict) and getter.get("type") == "cloud_file":
                paths, dests = getter.get("path"), getter.get("dest")
                paths = paths if isinstance(paths, list) else [paths]
                dests = dests if isinstance(dests, list) else [dests]
                found += [
                    (u, str(d or ""))
                    for u, d in zip(paths, dests, strict=False)
                    if isinstance(u, str)
                ]
    return found


def _write_special(spec: StandIn, path: Path) -> None:
    """A stand-in with a metadata title, a length or a kind (see `StandIn`)."""
    if spec.kind == "thunderbird-profile":
        write_thunderbird_profile(path)
    elif spec.ext == "pdf":
        from PIL import Image

        Image.new("RGB", (64, 48), (200, 80, 40)).save(path, format="PDF", title=spec.title)
    elif spec.ext in MEDIA:
        source = (
            [
                "-f",
                "lavfi",
                "-i",
                f"color=c=blue:s=160x120:r=5:d={spec.seconds}",
                "-pix_fmt",
                "yuv420p",
            ]
            if spec.ext == "mp4"
            else ["-f", "lavfi", "-i", f"sine=frequency=440:duration={spec.seconds}"]
        )
        meta = ["-metadata", f"title={spec.title}"] if spec.title else []
        media([*source, *meta])(path)
    else:
        WRITERS.get(spec.ext, opaque_bytes)(path)


def write_asset_tree(
    urls: Iterable[str], root: Path, standins: Mapping[str, StandIn] | None = None
) -> int:
    """Write a stand-in for every URL at its hub-repository path under `root`
    (the layout `cua-rl cache seed --from` reads first); returns files written.
    `standins` (from `standins_for`) overrides the type, title or length per URL."""
    made: dict[StandIn, Path] = {}
    templates = root.parent / f".{root.name}-templates"
    templates.mkdir(parents=True, exist_ok=True)
    count = 0
    for url in dict.fromkeys(urls):
        spec = (standins or {}).get(url) or StandIn(extension(url))
        if spec not in made:
            made[spec] = templates / f"standin-{len(made)}.{spec.ext or 'bin'}"
            made[spec].unlink(missing_ok=True)  # a rerun must not append to an old one
            if spec == StandIn(spec.ext):
                WRITERS.get(spec.ext, opaque_bytes)(made[spec])
            else:
                _write_special(spec, made[spec])
        rel = repo_path(url) or unquote(urlsplit(url).path).lstrip("/")
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(made[spec], target)
        count += 1
    return count


def standin_cache(tasks: Sequence[TaskVariant], root: Path) -> FileCache:
    """A cache under `root` seeded with a stand-in for every asset of `tasks`, as
    `cua-rl cache seed --from` would seed it from a snapshot of the real assets."""
    from cua_rl.desktop.cache_seed import seed_from_dir
    from cua_rl.tasks.preflight import task_needs

    urls = [u for task in tasks for u in task_needs(task).assets]
    write_asset_tree(urls, root / "snapshot", standins_for(tasks))
    cache = FileCache(root / "cache")
    seed_from_dir(cache, urls, root / "snapshot")
    return cache
