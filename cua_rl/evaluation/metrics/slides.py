"""`compare_pptx_files`, the basic part of OSWorld's Impress metric (python-pptx).

Implemented (all on by default, as in OSWorld): number of slides, background
color, notes, shape count and geometry (relative tolerance
`approximately_tolerance`), table cell texts and run fonts, shape text,
paragraph text/alignment/level, bullets, and per-run font name, size, bold,
italic, color, underline and strike-through. OSWorld's task-specific position
switches (`examine_title_bottom_position`, ...) are not: the spec check lists
them as unimplemented and the metric raises if one is switched on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.evaluation.deps import require
from cua_rl.evaluation.registry import Finding, metric

_SUPPORTED = {
    "examine_number_of_slides", "examine_shape", "examine_text", "examine_indent",
    "examine_font_name", "examine_font_size", "examine_font_bold", "examine_font_italic",
    "examine_color_rgb", "examine_font_underline", "examine_strike_through",
    "examine_alignment", "examine_bullets", "examine_background_color", "examine_note",
    "approximately_tolerance",
}
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"


def check_pptx_options(options: Mapping[str, Any]) -> tuple[list[Finding], list[str]]:
    """Switched-on options we do not implement are a coverage gap, not an error."""
    missing = [k for k, v in options.items()
               if k not in _SUPPORTED and not k.startswith("_") and v]
    return [], missing


def _background(slide: Any) -> Any:
    fill = slide.background.fill
    if fill.type == 1:  # solid
        return fill.fore_color.rgb
    if fill.type == 5:  # inherited from the master
        master = slide.slide_layout.slide_master.background.fill
        return master.fore_color.rgb if master.type == 1 else None
    return None


def _notes(slide: Any) -> str:
    if not slide.has_notes_slide:
        return ""
    return slide.notes_slide.notes_text_frame.text.strip()


def _bullet(paragraph: Any) -> tuple[Any, ...]:
    ppr = paragraph._p.find(f"{_A}pPr")
    if ppr is None:
        return (None, None)
    char = ppr.find(f"{_A}buChar")
    auto = ppr.find(f"{_A}buAutoNum")
    return (char.get("char") if char is not None else None,
            auto.get("type") if auto is not None else None)


def _rgb(font: Any) -> Any:
    try:
        return font.color.rgb
    except AttributeError:  # no explicit RGB color (theme or inherited): not compared
        return _NO_RGB


_NO_RGB = object()


class _Differ:
    def __init__(self, flags: dict[str, bool], tolerance: float) -> None:
        self.on = flags
        self.tolerance = tolerance

    def close(self, a: int, b: int) -> bool:
        if a == b:
            return True
        if not a or not b:
            return False
        return abs(a - b) / max(abs(a), abs(b)) <= self.tolerance

    def runs_equal(self, runs1: Any, runs2: Any) -> bool:
        for r1, r2 in zip(runs1, runs2, strict=False):
            f1, f2 = r1.font, r2.font
            checks = (
                ("examine_font_name", f1.name, f2.name),
                ("examine_font_size", f1.size, f2.size),
                ("examine_font_bold", f1.bold, f2.bold),
                ("examine_font_italic", f1.italic, f2.italic),
                ("examine_font_underline", f1.underline, f2.underline),
                ("examine_strike_through", f1._rPr.get("strike") if f1._rPr is not None
                 else None, f2._rPr.get("strike") if f2._rPr is not None else None),
            )
            if any(self.on[flag] and a != b for flag, a, b in checks):
                return False
            c1, c2 = _rgb(f1), _rgb(f2)
            if self.on["examine_color_rgb"] and _NO_RGB not in (c1, c2) and c1 != c2:
                return False
        return True

    def paragraphs_equal(self, frame1: Any, frame2: Any) -> bool:
        paras1, paras2 = frame1.paragraphs, frame2.paragraphs
        if len(paras1) != len(paras2):
            return False
        for p1, p2 in zip(paras1, paras2, strict=True):
            if self.on["examine_alignment"] and p1.alignment != p2.alignment:
                return False
            if self.on["examine_text"] and p1.text != p2.text:
                return False
            if self.on["examine_indent"] and p1.level != p2.level:
                return False
            if self.on["examine_bullets"] and _bullet(p1) != _bullet(p2):
                return False
            if not self.runs_equal(p1.runs, p2.runs):
                return False
        return True

    def shapes_equal(self, s1: Any, s2: Any) -> bool:
        geometry = ((s1.left, s2.left), (s1.top, s2.top), (s1.width, s2.width),
                    (s1.height, s2.height))
        if self.on["examine_shape"] and not all(self.close(a or 0, b or 0) for a, b in geometry):
            return False
        if getattr(s1, "has_table", False) and getattr(s2, "has_table", False):
            t1, t2 = s1.table, s2.table
            if len(t1.rows) != len(t2.rows) or len(t1.columns) != len(t2.columns):
                return False
            for i in range(len(t1.rows)):
                for j in range(len(t1.columns)):
                    c1, c2 = t1.cell(i, j), t2.cell(i, j)
                    if self.on["examine_text"] and c1.text.strip() != c2.text.strip():
                        return False
                    if not self.paragraphs_equal(c1.text_frame, c2.text_frame):
                        return False
        if getattr(s1, "has_text_frame", False) and getattr(s2, "has_text_frame", False):
            if self.on["examine_text"] and s1.text_frame.text.strip() != \
                    s2.text_frame.text.strip():
                return False
            return self.paragraphs_equal(s1.text_frame, s2.text_frame)
        return True


@metric("compare_pptx_files", check_options=check_pptx_options)
def compare_pptx_files(file1: Any, file2: Any, **options: Any) -> float:
    """1 when two presentations agree on everything the switched-on checks examine."""
    pptx = require("pptx", "python-pptx", metric="compare_pptx_files")
    unsupported = check_pptx_options(options)[1]
    if unsupported:
        raise NotImplementedError(f"compare_pptx_files: options not implemented yet: "
                                  f"{', '.join(unsupported)}")
    if not file1 or not file2 or not Path(file1).is_file() or not Path(file2).is_file():
        return 0.0
    try:
        prs1, prs2 = pptx.Presentation(str(file1)), pptx.Presentation(str(file2))
    except Exception:  # python-pptx raises many types for a non-pptx
        return 0.0
    flags = {k: bool(options.get(k, True)) for k in _SUPPORTED if k.startswith("examine_")}
    differ = _Differ(flags, float(options.get("approximately_tolerance", 0.005)))
    slides1, slides2 = list(prs1.slides), list(prs2.slides)
    if flags["examine_number_of_slides"] and len(slides1) != len(slides2):
        return 0.0
    for slide1, slide2 in zip(slides1, slides2, strict=False):
        if flags["examine_background_color"] and _background(slide1) != _background(slide2):
            return 0.0
        if flags["examine_note"] and _notes(slide1) != _notes(slide2):
            return 0.0
        if len(slide1.shapes) != len(slide2.shapes):
            return 0.0
        for s1, s2 in zip(slide1.shapes, slide2.shapes, strict=True):
            if not differ.shapes_equal(s1, s2):
                return 0.0
    return 1.0
