"""Getters that pull media out of a presentation on the desktop (OSWorld's
`getters/impress.py`): `audio_in_slide` and `background_image_in_slide`.

The .pptx is fetched into the trajectory folder under its own file name. Media
embedded in the package is extracted there (under its package path); media
only linked (`file://` target) is fetched from the desktop to `dest`. No such
media on the slide gives None, which the metric scores; a presentation that
does not exist raises FileNotFoundError (scored 0).
"""

from __future__ import annotations

import asyncio
import posixpath
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any
from xml.etree import ElementTree

from cua_rl.atomic_file import write_bytes_atomic
from cua_rl.evaluation.registry import Finding, GetterContext, getter

_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_BG = "{http://schemas.openxmlformats.org/presentationml/2006/main}bgPr"
_BLIP = "{http://schemas.openxmlformats.org/drawingml/2006/main}blip"
_EMBED = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed"


def _check(config: Any) -> list[Finding]:
    problems: list[Finding] = []
    try:
        int(config["slide_index"])
    except (TypeError, ValueError):
        problems.append((".slide_index", f"a slide number from 0, got {config['slide_index']!r}"))
    dest = config["dest"]
    if not isinstance(dest, str) or not dest or "/" in dest:
        problems.append((".dest", f"a bare file name inside the cache folder, got {dest!r}"))
    return problems


def _media_target(pptx: Path, slide: int, kind: str) -> tuple[str, str] | None:
    """("embedded", member) or ("linked", guest path) of the slide's audio or
    background image, or None when it has none."""
    with zipfile.ZipFile(pptx) as z:
        names = set(z.namelist())
        wanted_id = None
        if kind == "image":
            member = f"ppt/slides/slide{slide + 1}.xml"
            if member not in names:
                return None
            root = ElementTree.fromstring(z.read(member))
            wanted_id = next(
                (
                    blip.get(_EMBED)
                    for bg in root.iter(_BG)
                    for blip in bg.iter(_BLIP)
                    if blip.get(_EMBED)
                ),
                None,
            )
            if wanted_id is None:
                return None
        rels = f"ppt/slides/_rels/slide{slide + 1}.xml.rels"
        if rels not in names:
            return None
        for rel in ElementTree.fromstring(z.read(rels)).iter(f"{_REL}Relationship"):
            if kind not in rel.get("Type", "") or (wanted_id and rel.get("Id") != wanted_id):
                continue
            target = rel.get("Target", "")
            if target.startswith("file://"):
                return "linked", target[len("file://") :]
            if target.startswith("/"):
                return "embedded", target.lstrip("/")
            return "embedded", posixpath.normpath(posixpath.join("ppt/slides", target))
    return None


def _extract(pptx: Path, member: str, folder: Path) -> str | None:
    with zipfile.ZipFile(pptx) as z:
        if member not in z.namelist():
            return None
        target = folder.joinpath(*PurePosixPath(member).parts)
        write_bytes_atomic(target, z.read(member))
        return str(target)


async def _media(ctx: GetterContext, config: dict[str, Any], kind: str) -> str | None:
    guest_path = config["ppt_file_path"]
    data = await ctx.client.get_file(guest_path)
    if data is None:
        raise FileNotFoundError(f"{guest_path} does not exist on the desktop")
    local = ctx.cache_dir / PurePosixPath(guest_path).name
    await asyncio.to_thread(write_bytes_atomic, local, data)
    try:
        found = await asyncio.to_thread(_media_target, local, int(config["slide_index"]), kind)
    except (zipfile.BadZipFile, ElementTree.ParseError):
        return None  # the agent saved something that is not a presentation
    if found is None:
        return None
    how, where = found
    if how == "embedded":
        return await asyncio.to_thread(_extract, local, where, ctx.cache_dir)
    media = await ctx.client.get_file(where)
    if media is None:
        return None
    target = ctx.cache_dir / config["dest"]
    await asyncio.to_thread(write_bytes_atomic, target, media)
    return str(target)


@getter("audio_in_slide", required=("ppt_file_path", "slide_index", "dest"), check=_check)
async def audio_in_slide(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """The (first) audio file of slide `slide_index`."""
    return await _media(ctx, config, "audio")


@getter(
    "background_image_in_slide", required=("ppt_file_path", "slide_index", "dest"), check=_check
)
async def background_image_in_slide(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """The background picture of slide `slide_index`."""
    return await _media(ctx, config, "image")
