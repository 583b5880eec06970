"""GIMP task metrics: edits measured on the exported image, GIMP's config files,
and OCR of a screenshot, following OSWorld's `metrics/gimp.py` and
`compare_image_text` of `metrics/docs.py`.

Argument order is OSWorld's: `src` is the task's `result` (the agent's export)
and `tgt` its `expected` (the original or gold image). A missing or unreadable
image scores 0.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.metrics.image_similarity import PathLike, open_image, structure_same
from cua_rl.evaluation.registry import metric

if TYPE_CHECKING:
    from PIL import Image as PILImage

log = logging.getLogger(__name__)


def _mean_brightness(image: PILImage.Image) -> float:
    stat = require("PIL.ImageStat", "pillow", metric="gimp")
    return stat.Stat(image.convert("L")).mean[0]


def _scaled_to_brightness(image: PILImage.Image, target: float) -> PILImage.Image:
    """Every band multiplied so that the mean gray level becomes `target` (clipped, truncated)."""
    factor = target / _mean_brightness(image)
    return image.point(lambda v: min(255, max(0, int(v * factor))))


def _mse_same(img1: PILImage.Image, img2: PILImage.Image, threshold: float) -> bool:
    """OSWorld's `structure_check_by_mse`: mean squared error of RGB in [0, 1] below threshold."""
    np = require("numpy", "numpy", metric="gimp")
    if img1.size != img2.size:
        lanczos = require("PIL.Image", "pillow", metric="gimp").Resampling.LANCZOS
        img1 = img1.resize(img2.size, lanczos)
    a = np.array(img1.convert("RGB"), dtype=np.float32) / 255
    b = np.array(img2.convert("RGB"), dtype=np.float32) / 255
    return float(np.mean((a - b) ** 2)) < threshold


@metric("check_brightness_decrease_and_structure_sim")
def check_brightness_decrease_and_structure_sim(
    src_path: PathLike, tgt_path: PathLike, *, threshold: float = 0.03
) -> float:
    """1 when src is darker than tgt and, both normalised to mean gray 128, their
    MSE is below `threshold`."""
    name = "check_brightness_decrease_and_structure_sim"
    src, tgt = open_image(src_path, metric_name=name), open_image(tgt_path, metric_name=name)
    if src is None or tgt is None:
        return 0.0
    darker = _mean_brightness(tgt) > _mean_brightness(src)
    try:
        same = _mse_same(
            _scaled_to_brightness(src, 128), _scaled_to_brightness(tgt, 128), threshold
        )
    except ZeroDivisionError:  # an all-black image cannot be normalised
        return 0.0
    return float(darker and same)


@metric("check_saturation_increase_and_structure_sim")
def check_saturation_increase_and_structure_sim(src_path: PathLike, tgt_path: PathLike) -> float:
    """1 when src's mean HSV saturation exceeds tgt's and the hue and value channels
    are each structurally the same (SSIM >= 0.9)."""
    name = "check_saturation_increase_and_structure_sim"
    np = require("numpy", "numpy", metric=name)
    src, tgt = open_image(src_path, metric_name=name), open_image(tgt_path, metric_name=name)
    if src is None or tgt is None:
        return 0.0
    try:
        h1, s1, v1 = src.convert("HSV").split()
        h2, s2, v2 = tgt.convert("HSV").split()
    except ValueError as exc:  # PIL converts only RGB-like modes to HSV
        log.info("%s: %s", name, exc)
        return 0.0
    increased = float(np.mean(np.array(s2))) < float(np.mean(np.array(s1)))
    same = structure_same(h1, h2, metric_name=name) and structure_same(v1, v2, metric_name=name)
    return float(increased and same)


@metric("check_contrast_increase_and_structure_sim")
def check_contrast_increase_and_structure_sim(src_path: PathLike, tgt_path: PathLike) -> float:
    """1 when src's pixel standard deviation exceeds tgt's and SSIM >= 0.65."""
    name = "check_contrast_increase_and_structure_sim"
    np = require("numpy", "numpy", metric=name)
    src, tgt = open_image(src_path, metric_name=name), open_image(tgt_path, metric_name=name)
    if src is None or tgt is None:
        return 0.0
    higher = float(np.std(np.asarray(tgt, dtype=np.float32))) < float(
        np.std(np.asarray(src, dtype=np.float32))
    )
    return float(higher and structure_same(src, tgt, 0.65, metric_name=name))


@metric("check_image_size")
def check_image_size(src_path: PathLike, rule: Mapping[str, Any]) -> float:
    """The image's width/height equal `rule.width`/`rule.height` (each optional).

    The opaque bounding box is measured instead of the canvas when the image has
    transparency info, or when `ignore_transparent` is set and the mode is
    RGBA/LA: OSWorld's condition reads `(ignore and mode) or transparency`.
    """
    image = open_image(src_path, metric_name="check_image_size")
    if image is None:
        return 0.0
    alpha_mode = image.mode in ("RGBA", "LA")
    if (rule.get("ignore_transparent", False) and alpha_mode) or "transparency" in image.info:
        box = image.convert("RGBA").split()[-1].getbbox()
        width, height = (0, 0) if box is None else (box[2] - box[0], box[3] - box[1])
    else:
        width, height = image.size
    ok_height = rule.get("height") is None or height == rule["height"]
    ok_width = rule.get("width") is None or width == rule["width"]
    return float(ok_height and ok_width)


@metric("check_image_file_size")
def check_image_file_size(src_path: PathLike, rule: Mapping[str, Any]) -> float:
    """1 when the file is smaller than `rule.max_size` bytes."""
    if not src_path or not os.path.isfile(src_path):
        return 0.0
    return float(os.path.getsize(src_path) < rule["max_size"])


@metric("check_config_status")
def check_config_status(actual_config_path: PathLike, rule: Mapping[str, Any]) -> float:
    """1 when a line `(key ... value)` of a GIMP config file (gimprc, sessionrc)
    has first token `rule.key` (or the two tokens of a 2-element key) and last
    token `rule.value`. Values compare as written, quotes included. A line of
    only spaces is skipped, as GIMP skips it (OSWorld raises IndexError there)."""
    if not actual_config_path or not os.path.isfile(actual_config_path):
        return 0.0
    key, value = rule["key"], rule["value"]
    with open(actual_config_path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("#") or line == "\n":
                continue
            items = line.strip().lstrip("(").rstrip(")\n").split()
            if not items:
                continue
            if isinstance(key, str) and items[0] == key and items[-1] == value:
                return 1.0
            if (
                isinstance(key, list)
                and len(key) == 2
                and len(items) > 1
                and items[0] == key[0]
                and items[1] == key[1]
                and items[-1] == value
            ):
                return 1.0
    return 0.0


@metric("check_triangle_position")
def check_triangle_position(tgt_path: PathLike) -> float:
    """1 when the triangle's centroid lies within 5% of the image centre on both axes.

    As in OSWorld the "triangle" is the second-least frequent colour (colours
    ranked by ascending count): on a plain two-colour image that is the
    background, on an anti-aliased export usually some edge shade. Kept as is
    so that scores match OSWorld.
    """
    np = require("numpy", "numpy", metric="check_triangle_position")
    image = open_image(tgt_path, metric_name="check_triangle_position")
    if image is None:
        return 0.0
    pixels = np.array(image)
    if pixels.ndim != 3:
        return 0.0
    colours, counts = np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0, return_counts=True)
    if len(colours) < 2:
        return 0.0
    triangle = colours[np.argsort(counts)][1]
    coords = np.argwhere(np.all(pixels == triangle, axis=2))
    centre = np.array(pixels.shape[:2]) / 2
    tolerance = 0.05 * np.array(pixels.shape[:2])
    return float(np.all(np.abs(coords.mean(axis=0) - centre) < tolerance))


@metric("check_textbox_on_leftside")
def check_textbox_on_leftside(src_path: PathLike) -> float:
    """1 when the leftmost dark pixel (gray < 128) is within the left 5% of the width."""
    np = require("numpy", "numpy", metric="check_textbox_on_leftside")
    image = open_image(src_path, metric_name="check_textbox_on_leftside")
    if image is None:
        return 0.0
    dark_columns = np.flatnonzero((np.array(image.convert("L")) < 128).any(axis=0))
    leftmost = int(dark_columns[0]) if dark_columns.size else image.width
    return float(leftmost < image.width * 0.05)


@metric("check_green_background")
def check_green_background(src_path: PathLike, tgt_path: PathLike) -> float:
    """1 when every pixel that is not black in tgt is green (G > R and G > B) in src.

    OSWorld indexes the pixel arrays as [x, y] (column first), so only square
    images can pass: any other size raises IndexError there, scored 0 here.
    """
    np = require("numpy", "numpy", metric="check_green_background")
    src = open_image(src_path, metric_name="check_green_background")
    tgt = open_image(tgt_path, metric_name="check_green_background")
    if src is None or tgt is None:
        return 0.0
    source, target = np.array(src), np.array(tgt)
    width, height = tgt.width, tgt.height
    if source.ndim != 3 or target.ndim != 3:
        return 0.0
    if (
        target.shape[0] < width
        or target.shape[1] < height
        or source.shape[0] < width
        or source.shape[1] < height
    ):
        return 0.0
    target, source = target[:width, :height, :3], source[:width, :height, :3].astype(int)
    background = np.any(target != 0, axis=2)
    green = (source[..., 1] > source[..., 0]) & (source[..., 1] > source[..., 2])
    return float(not np.any(background & ~green))


@metric("compare_image_text")
def compare_image_text(image_path: PathLike, rule: Mapping[str, Any]) -> float:
    """1 when `rule.text` occurs in the text OCR reads from the image (`rule.type` "text").

    OSWorld reads with EasyOCR and joins the detected boxes with spaces; here
    Tesseract (pytesseract) reads it and its words are joined with single spaces.
    """
    if rule.get("type") != "text":
        raise ValueError(f"compare_image_text: unsupported rule type {rule.get('type')!r}")
    image = open_image(image_path, metric_name="compare_image_text")
    if image is None:
        return 0.0
    ocr = require("pytesseract", "pytesseract", metric="compare_image_text")
    words = " ".join(ocr.image_to_string(image.convert("RGB")).split())
    log.info("compare_image_text: OCR read %r", words[:200])
    return float(rule["text"] in words)
