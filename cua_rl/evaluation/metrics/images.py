"""Image metrics (Pillow, a core dependency), following OSWorld's `metrics/gimp.py`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)


@metric("compare_image_list")
def compare_image_list(results: Any, expected: Any) -> float:
    """1 when every result image is pixel-identical to its expected image.

    Both sides are lists of paths (a multi `vm_file`/`cloud_file`); a single path
    is taken as a list of one. As in OSWorld, the lists are paired up to the
    shorter one, and a result image is first resized (Lanczos) to the expected
    image's size and converted to its mode, so an RGBA export with full opacity
    equals the same RGB picture. A missing or unreadable image scores 0.
    """
    from PIL import Image, ImageChops, UnidentifiedImageError

    results = results if isinstance(results, list) else [results]
    expected = expected if isinstance(expected, list) else [expected]
    for got, want in zip(results, expected, strict=False):
        if not got or not want or not Path(got).is_file() or not Path(want).is_file():
            return 0.0
        try:
            with Image.open(got) as a, Image.open(want) as b:
                pred = a if a.size == b.size else a.resize(b.size, Image.Resampling.LANCZOS)
                if pred.mode != b.mode:
                    pred = pred.convert(b.mode)
                if ImageChops.difference(pred, b).getbbox():
                    return 0.0
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            log.info("compare_image_list: cannot compare %s with %s: %s", got, want, exc)
            return 0.0
    return 1.0
