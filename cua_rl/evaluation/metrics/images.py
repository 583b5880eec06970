"""Image metrics (Pillow, a core dependency), following OSWorld's `metrics/gimp.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cua_rl.evaluation.registry import metric


@metric("compare_image_list")
def compare_image_list(results: Any, expected: Any) -> float:
    """1 when every result image is pixel-identical to its expected image.

    Both sides are lists of paths (a multi `vm_file`/`cloud_file`); a single path
    is taken as a list of one. A missing image scores 0.
    """
    from PIL import Image, ImageChops, UnidentifiedImageError

    results = results if isinstance(results, list) else [results]
    expected = expected if isinstance(expected, list) else [expected]
    if len(results) != len(expected):
        return 0.0
    for got, want in zip(results, expected, strict=True):
        if not got or not want or not Path(got).is_file() or not Path(want).is_file():
            return 0.0
        try:
            with Image.open(got) as a, Image.open(want) as b:
                if a.size != b.size or a.mode != b.mode:
                    return 0.0
                if ImageChops.difference(a, b).getbbox():
                    return 0.0
        except UnidentifiedImageError:
            return 0.0
    return 1.0
