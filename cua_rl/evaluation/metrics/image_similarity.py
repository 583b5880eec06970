"""Image similarity metrics (SSIM), following OSWorld's `metrics/gimp.py` and the
`compare_images` of `metrics/vlc.py`.

All of them open agent-produced files: a path that is None, missing, empty or
not an image scores 0 (OSWorld would raise on some of these; a broken export
is a failed task, not a broken evaluator). Thresholds, resampling filters and
the order of the two arguments are OSWorld's, because scores must match.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.registry import metric

if TYPE_CHECKING:
    from PIL import Image as PILImage

log = logging.getLogger(__name__)

PathLike = str | Path | None


def open_image(path: PathLike, *, metric_name: str) -> PILImage.Image | None:
    """The image at `path`, fully loaded, or None when there is no usable image."""
    image_module = require("PIL.Image", "pillow", metric=metric_name)
    if not path or not Path(path).is_file() or Path(path).stat().st_size == 0:
        return None
    try:
        image = image_module.open(path)
        image.load()
    except (OSError, ValueError, SyntaxError) as exc:  # PIL raises all three on bad files
        log.info("%s: cannot read image %s: %s", metric_name, path, exc)
        return None
    return image


def ssim_value(
    array1: Any, array2: Any, *, win_size: int = 7, channels: bool = True, metric_name: str
) -> float:
    """skimage's SSIM on two uint8 arrays (data range 255, as OSWorld relies on)."""
    metrics = require("skimage.metrics", "scikit-image", metric=metric_name)
    if channels:
        return float(
            metrics.structural_similarity(array1, array2, win_size=win_size, channel_axis=2)
        )
    return float(metrics.structural_similarity(array1, array2))


def structure_same(
    img1: PILImage.Image, img2: PILImage.Image, threshold: float = 0.9, *, metric_name: str
) -> bool:
    """OSWorld's `structure_check_by_ssim`: both RGB, same size, at least 7x7, SSIM >= threshold."""
    np = require("numpy", "numpy", metric=metric_name)
    if min(img1.width, img1.height, img2.width, img2.height) < 7:
        return False
    img1, img2 = img1.convert("RGB"), img2.convert("RGB")
    if img1.size != img2.size:
        return False
    return ssim_value(np.array(img1), np.array(img2), metric_name=metric_name) >= threshold


@metric("compare_images")
def compare_images(
    image1: PathLike, image2: PathLike, *, reference_base_result: float | None = None, **_: Any
) -> float:
    """Grayscale SSIM of the two images after resizing both to the smaller size.

    "Smaller" is Python's tuple order on (width, height), as in OSWorld. With
    `reference_base_result` b the score is rescaled to (ssim - b) / (1 - b), and
    0 unless ssim >= b + 0.01 (the desktop's untouched state already scores b).
    Extra options (from compare_archive) are ignored, as OSWorld does.
    """
    np = require("numpy", "numpy", metric="compare_images")
    first = open_image(image1, metric_name="compare_images")
    second = open_image(image2, metric_name="compare_images")
    if first is None or second is None:
        return 0.0
    lanczos = require("PIL.Image", "pillow", metric="compare_images").Resampling.LANCZOS
    size = min(first.size, second.size)
    a = np.array(first.convert("L").resize(size, lanczos))
    b = np.array(second.convert("L").resize(size, lanczos))
    similarity = ssim_value(a, b, channels=False, metric_name="compare_images")
    if reference_base_result is None:
        return similarity
    if similarity >= reference_base_result + 0.01:
        return (similarity - reference_base_result) / (1 - reference_base_result)
    return 0.0


@metric("check_structure_sim")
def check_structure_sim(src_path: PathLike, tgt_path: PathLike) -> float:
    """1 when both images have the same size and SSIM >= 0.9."""
    src = open_image(src_path, metric_name="check_structure_sim")
    tgt = open_image(tgt_path, metric_name="check_structure_sim")
    if src is None or tgt is None or src.size != tgt.size:
        return 0.0
    return float(structure_same(src, tgt, metric_name="check_structure_sim"))


@metric("check_structure_sim_with_threshold")
def check_structure_sim_with_threshold(
    src_path: PathLike, tgt_path: PathLike, *, ssim_threshold: float = 0.85
) -> float:
    """SSIM >= `ssim_threshold`, after resizing the source to the target's size (LANCZOS);
    images under 7 pixels use the largest odd window that fits."""
    name = "check_structure_sim_with_threshold"
    np = require("numpy", "numpy", metric=name)
    src = open_image(src_path, metric_name=name)
    tgt = open_image(tgt_path, metric_name=name)
    if src is None or tgt is None:
        return 0.0
    if src.size != tgt.size:
        src = src.resize(tgt.size, require("PIL.Image", "pillow", metric=name).Resampling.LANCZOS)
    a, b = np.array(src.convert("RGB")), np.array(tgt.convert("RGB"))
    smallest = min(a.shape[0], a.shape[1])
    win = 7 if smallest >= 7 else (smallest if smallest % 2 else smallest - 1)
    if win < 1:
        return 0.0
    try:
        similarity = ssim_value(a, b, win_size=win, metric_name=name)
    except ValueError as exc:  # e.g. a window larger than a very small image
        log.info("%s: SSIM failed: %s", name, exc)
        return 0.0
    return float(similarity >= ssim_threshold)


@metric("check_structure_sim_resized")
def check_structure_sim_resized(src_path: PathLike, tgt_path: PathLike) -> float:
    """SSIM >= 0.9 after resizing the source to the target's size; a source with
    transparency is first cropped to its opaque content (a fully transparent one scores 0)."""
    name = "check_structure_sim_resized"
    src = open_image(src_path, metric_name=name)
    tgt = open_image(tgt_path, metric_name=name)
    if src is None or tgt is None:
        return 0.0
    if src.mode in ("RGBA", "LA") or "transparency" in src.info:
        src = src.convert("RGBA")
        box = src.split()[-1].getbbox()
        if box is None:
            return 0.0
        resized = src.crop(box).convert("RGB").resize(tgt.size)
    else:
        resized = src.resize(tgt.size)
    return float(structure_same(resized, tgt.convert("RGB"), metric_name=name))


@metric("check_file_exists_and_structure_sim")
def check_file_exists_and_structure_sim(src_path: PathLike, tgt_path: PathLike) -> float:
    """1 when the exported file exists and is structurally the target (SSIM >= 0.9)."""
    name = "check_file_exists_and_structure_sim"
    src = open_image(src_path, metric_name=name)
    tgt = open_image(tgt_path, metric_name=name)
    if src is None or tgt is None:
        return 0.0
    return float(structure_same(src, tgt, metric_name=name))


@metric("check_palette_and_structure_sim")
def check_palette_and_structure_sim(src_path: PathLike, tgt_path: PathLike) -> float:
    """1 when the source is palette-based (PIL mode P) and structurally the target."""
    name = "check_palette_and_structure_sim"
    src = open_image(src_path, metric_name=name)
    tgt = open_image(tgt_path, metric_name=name)
    if src is None or tgt is None:
        return 0.0
    return float(src.mode == "P" and structure_same(src.convert("RGB"), tgt, metric_name=name))


@metric("check_image_mirror")
def check_image_mirror(src_path: PathLike, tgt_path: PathLike) -> float:
    """1 when the source flipped left-right has SSIM >= 0.99 with the target."""
    name = "check_image_mirror"
    src = open_image(src_path, metric_name=name)
    tgt = open_image(tgt_path, metric_name=name)
    if src is None or tgt is None:
        return 0.0
    flip = require("PIL.Image", "pillow", metric=name).Transpose.FLIP_LEFT_RIGHT
    return float(structure_same(src.transpose(flip), tgt, 0.99, metric_name=name))
