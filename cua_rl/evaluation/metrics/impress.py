"""Task-specific Impress checks from OSWorld's `slides.py` (python-pptx and the raw
slide XML). A presentation that is missing or does not open scores 0."""

from __future__ import annotations

import math
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from cua_rl.eval_libraries import require
from cua_rl.evaluation.registry import metric

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_HALF_INCH = 457200  # EMU


def _open(path: Any, name: str) -> Any | None:
    pptx = require("pptx", "python-pptx", metric=name)
    if not path or not Path(path).is_file():
        return None
    try:
        return pptx.Presentation(str(path))
    except Exception:  # python-pptx raises many types for a non-pptx
        return None


def _xml(path: Any, member: str) -> Any | None:
    try:
        with zipfile.ZipFile(path) as z:
            return ElementTree.fromstring(z.read(member))
    except (OSError, KeyError, zipfile.BadZipFile, ElementTree.ParseError):
        return None


@metric("check_slide_orientation_Portrait")
def check_slide_orientation_portrait(result: Any) -> float:
    prs = _open(result, "check_slide_orientation_Portrait")
    return float(prs is not None and prs.slide_width < prs.slide_height)


@metric("check_image_stretch_and_center")
def check_image_stretch_and_center(result: Any, expected: Any) -> float:
    """The first picture of the original's first slide is, on the result's first
    slide (found by identical image bytes), within half an inch of the slide's
    size and centered."""
    prs, original = (_open(p, "check_image_stretch_and_center") for p in (result, expected))
    if prs is None or original is None or not prs.slides or not original.slides:
        return 0.0
    pictures = [s for s in original.slides[0].shapes if s.shape_type == 13]
    if not pictures:
        return 0.0
    blob = pictures[0].image.blob
    matches = [s for s in prs.slides[0].shapes if s.shape_type == 13 and s.image.blob == blob]
    if not matches:
        return 0.0
    image, width, height = matches[-1], original.slide_width, original.slide_height
    return float(
        abs(image.width - width) <= _HALF_INCH
        and abs(image.height - height) <= _HALF_INCH
        and abs(image.left - (width - image.width) / 2) <= _HALF_INCH
        and abs(image.top - (height - image.height) / 2) <= _HALF_INCH
    )


def _background_rgb(slide: Any) -> tuple[int, int, int] | None:
    fill = slide.background.fill
    if fill.type == 5:  # inherited from the master
        fill = slide.slide_layout.slide_master.background.fill
    if fill.type != 1:
        return None
    try:
        return tuple(fill.fore_color.rgb)
    except AttributeError:  # a theme color has no RGB
        return None


@metric("evaluate_presentation_fill_to_rgb_distance")
def evaluate_presentation_fill_to_rgb_distance(result: Any, rules: Mapping[str, Any]) -> float:
    """1 minus the mean normalized RGB distance of each slide's solid background to
    `rules.rgb`; a slide without a solid RGB background, or still at
    `rules.original_rgb`, counts as the full distance 1."""
    prs = _open(result, "evaluate_presentation_fill_to_rgb_distance")
    if prs is None or not len(prs.slides):
        return 0.0
    target, original = tuple(rules["rgb"]), rules.get("original_rgb")
    total = 0.0
    for slide in prs.slides:
        rgb = _background_rgb(slide)
        if rgb is None or (original is not None and rgb == tuple(original)):
            total += 1.0
        else:
            total += math.dist(rgb, target) / math.dist((0, 0, 0), (255, 255, 255))
    return 1.0 - total / len(prs.slides)


@metric("check_left_panel")
def check_left_panel(result: Any) -> float:
    """The accessibility tree has a document-frame named "Slides View" (the
    slide pane on the left is open)."""
    if not result:
        return 0.0
    try:
        root = ElementTree.fromstring(result)
    except ElementTree.ParseError:
        return 0.0
    return float(
        any(
            node.get("name") in ("Slides View", "スライドモード")
            for node in root.iter("document-frame")
        )
    )


@metric("check_transition")
def check_transition(result: Any, rules: Mapping[str, Any]) -> float:
    """Slide `slide_idx` (0-based, by part name) has a `<p:transition>` containing
    a `<p:{transition_type}>` element."""
    if not result or not Path(result).is_file():
        return 0.0
    root = _xml(result, f"ppt/slides/slide{rules['slide_idx'] + 1}.xml")
    if root is None:
        return 0.0
    transition = root.find(f".//{_P}transition")
    return float(
        transition is not None and transition.find(f".//{_P}{rules['transition_type']}") is not None
    )


def _master_number_color(path: Any) -> str | None:
    """The slide-number color guess of OSWorld: the last non-black explicit run
    color of the first master, else the last non-black solid fill, else the last."""
    root = _xml(path, "ppt/slideMasters/slideMaster1.xml")
    if root is None:
        return None
    runs = [e.get("val") for e in root.findall(f".//{_A}rPr//{_A}solidFill//{_A}srgbClr")]
    fills = [e.get("val") for e in root.findall(f".//{_A}solidFill//{_A}srgbClr")]
    for candidates in (runs, fills):
        for value in reversed(candidates):
            if value and value != "000000":
                return value
    return fills[-1] if fills else None


@metric("check_page_number_colors")
def check_page_number_colors(result: Any, rules: Mapping[str, Any]) -> float:
    """The master's page-number color is clearly `rules.color` (red, blue, green:
    that channel exceeds both others by more than 50; black: all below 50)."""
    if not result or not Path(result).is_file():
        return 0.0
    value = _master_number_color(result)
    if not value or len(value) != 6:
        return 0.0
    try:
        r, g, b = (int(value[i : i + 2], 16) for i in (0, 2, 4))
    except ValueError:
        return 0.0
    tests = {
        "red": r > g + 50 and r > b + 50,
        "blue": b > g + 50 and b > r + 50,
        "green": g > r + 50 and g > b + 50,
        "black": r < 50 and g < 50 and b < 50,
    }
    return float(tests.get(rules["color"], True))


@metric("check_strikethrough")
def check_strikethrough(result: Any, rules: Mapping[str, Any]) -> float:
    """The first run of each listed paragraph of each listed shape of each listed
    slide has a strike attribute."""
    prs = _open(result, "check_strikethrough")
    if prs is None:
        return 0.0
    try:
        for s in rules["slide_index_s"]:
            shapes = prs.slides[s].shapes
            for sh in rules["shape_index_s"]:
                paragraphs = shapes[sh].text_frame.paragraphs
                for p in rules["paragraph_index_s"]:
                    if "strike" not in paragraphs[p].runs[0].font._element.attrib:
                        return 0.0
    except (IndexError, AttributeError):
        return 0.0
    return 1.0
