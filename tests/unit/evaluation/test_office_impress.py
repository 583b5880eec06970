"""Impress metrics and the pptx media getters, on decks generated here with python-pptx."""

from __future__ import annotations

import asyncio
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cua_rl.evaluation import get_getter, get_metric
from cua_rl.evaluation.registry import GetterContext

pptx = pytest.importorskip("pptx", reason="needs the eval extra")
from pptx.dml.color import RGBColor  # noqa: E402
from pptx.util import Emu, Inches  # noqa: E402


def run(name: str, *args: object, **options: object) -> float:
    return get_metric(name).func(*args, **options)


def deck(
    path: Path,
    *,
    height: int = 900000,
    top: int = 900000,
    picture_top: int | None = None,
    color: RGBColor | None = None,
    portrait: bool = False,
) -> str:
    prs = pptx.Presentation()
    if portrait:
        prs.slide_width, prs.slide_height = prs.slide_height, prs.slide_width
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    box = slide.shapes.add_textbox(Emu(500000), Emu(top), Emu(3000000), Emu(height))
    run_ = box.text_frame.paragraphs[0].add_run()
    run_.text = "Hello"
    if color is not None:
        run_.font.color.rgb = color
    if picture_top is not None:
        from PIL import Image

        png = path.with_suffix(".png")
        Image.new("RGB", (8, 8), "red").save(png)
        slide.shapes.add_picture(str(png), Emu(500000), Emu(picture_top))
    prs.save(path)
    return str(path)


def test_compare_pptx_lenient_height_and_run_count(tmp_path: Path) -> None:
    gold = deck(tmp_path / "g.pptx")
    taller = deck(tmp_path / "a.pptx", height=1200000)
    assert run("compare_pptx_files", taller, gold) == 0.0
    assert (
        run(
            "compare_pptx_files",
            taller,
            gold,
            examine_shape=False,
            examine_shape_lenient_height=True,
        )
        == 1.0
    )
    moved = deck(tmp_path / "b.pptx", top=2000000)
    assert run("compare_pptx_files", moved, gold) == 0.0
    # OSWorld's public code never reads the lenient-height option (docs/evaluation-deviations.md)
    assert (
        run(
            "compare_pptx_files",
            moved,
            gold,
            examine_shape=False,
            examine_shape_lenient_height=True,
        )
        == 1.0
    )
    red = deck(tmp_path / "c.pptx", color=RGBColor(255, 0, 0))
    gold_red = deck(tmp_path / "gr.pptx", color=RGBColor(255, 0, 0))
    assert run("compare_pptx_files", red, gold_red, examine_run_count=False) == 1.0
    assert (
        run("compare_pptx_files", deck(tmp_path / "d.pptx", color=RGBColor(0, 255, 0)), gold_red)
        == 0.0
    )


def test_compare_pptx_position_switches(tmp_path: Path) -> None:
    gold = deck(tmp_path / "g.pptx", picture_top=2000000)
    higher = deck(tmp_path / "a.pptx", picture_top=1000000)
    # examine_top_position concerns slide 2 only; here it is slide 1: shapes must match
    assert (
        run("compare_pptx_files", higher, gold, examine_shape=False, examine_top_position=True)
        == 1.0
    )
    # examine_image_size: pictures compare by size only, other shapes by their box
    assert (
        run("compare_pptx_files", higher, gold, examine_shape=False, examine_image_size=True) == 1.0
    )
    moved_box = deck(tmp_path / "b.pptx", top=1500000, picture_top=2000000)
    assert (
        run("compare_pptx_files", moved_box, gold, examine_shape=False, examine_image_size=True)
        == 0.0
    )
    assert (
        run("compare_pptx_files", higher, gold, examine_shape=False, examine_modify_height=True)
        == 1.0
    )  # pictures: only their height counts
    taller = deck(tmp_path / "c.pptx", height=1500000, picture_top=2000000)
    assert (
        run("compare_pptx_files", taller, gold, examine_shape=False, examine_modify_height=True)
        == 0.0
    )


def test_slide_orientation_and_image_stretch(tmp_path: Path) -> None:
    assert run("check_slide_orientation_Portrait", deck(tmp_path / "p.pptx", portrait=True)) == 1.0
    assert run("check_slide_orientation_Portrait", deck(tmp_path / "l.pptx")) == 0.0
    original = deck(tmp_path / "o.pptx", picture_top=0)
    prs = pptx.Presentation(original)
    picture = [s for s in prs.slides[0].shapes if s.shape_type == 13][0]
    picture.left, picture.top = 0, 0
    picture.width, picture.height = prs.slide_width, prs.slide_height
    prs.save(tmp_path / "stretched.pptx")
    assert run("check_image_stretch_and_center", str(tmp_path / "stretched.pptx"), original) == 1.0
    assert run("check_image_stretch_and_center", original, original) == 0.0


def background(path: Path, rgb: tuple[int, int, int]) -> str:
    prs = pptx.Presentation()
    for _ in range(2):
        fill = prs.slides.add_slide(prs.slide_layouts[6]).background.fill
        fill.solid()
        fill.fore_color.rgb = RGBColor(*rgb)
    prs.save(path)
    return str(path)


def test_evaluate_presentation_fill_to_rgb_distance(tmp_path: Path) -> None:
    rules = {"rgb": [0, 0, 255], "original_rgb": [255, 255, 255]}
    name = "evaluate_presentation_fill_to_rgb_distance"
    assert run(name, background(tmp_path / "a.pptx", (0, 0, 255)), rules) == 1.0
    assert run(name, background(tmp_path / "b.pptx", (255, 255, 255)), rules) == 0.0
    assert 0.9 < run(name, background(tmp_path / "c.pptx", (0, 0, 230)), rules) < 1.0


def test_check_left_panel() -> None:
    tree = "<desktop><document-frame name='Slides View'/></desktop>"
    assert run("check_left_panel", tree) == 1.0
    assert run("check_left_panel", "<desktop><document-frame name='Outline'/></desktop>") == 0.0


def rewrite(path: str, member: str, old: bytes, new: bytes) -> str:
    out = Path(path).with_suffix(".edited.pptx")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            dst.writestr(item, data.replace(old, new) if item.filename == member else data)
    return str(out)


def test_check_transition(tmp_path: Path) -> None:
    plain = deck(tmp_path / "t.pptx")
    dissolve = rewrite(
        plain,
        "ppt/slides/slide1.xml",
        b"</p:sld>",
        b"<p:transition><p:dissolve/></p:transition></p:sld>",
    )
    rules = {"slide_idx": 0, "transition_type": "dissolve"}
    assert run("check_transition", dissolve, rules) == 1.0
    assert run("check_transition", plain, rules) == 0.0
    assert run("check_transition", dissolve, {"slide_idx": 0, "transition_type": "fade"}) == 0.0


def test_check_page_number_colors(tmp_path: Path) -> None:
    plain = deck(tmp_path / "n.pptx")
    master = "ppt/slideMasters/slideMaster1.xml"
    with zipfile.ZipFile(plain) as z:
        xml = z.read(master)
    assert b"<a:defRPr" in xml
    red = rewrite(
        plain,
        master,
        b"<a:defRPr",
        b'<a:rPr><a:solidFill><a:srgbClr val="FF0000"/></a:solidFill></a:rPr><a:defRPr',
    )
    assert run("check_page_number_colors", red, {"color": "red"}) == 1.0
    assert run("check_page_number_colors", red, {"color": "blue"}) == 0.0


def test_check_strikethrough(tmp_path: Path) -> None:
    plain = deck(tmp_path / "s.pptx")
    prs = pptx.Presentation(plain)
    prs.slides[0].shapes[0].text_frame.paragraphs[0].runs[0].font._rPr.set("strike", "sngStrike")
    prs.save(tmp_path / "struck.pptx")
    rules = {"slide_index_s": [0], "shape_index_s": [0], "paragraph_index_s": [0]}
    assert run("check_strikethrough", str(tmp_path / "struck.pptx"), rules) == 1.0
    assert run("check_strikethrough", plain, rules) == 0.0
    assert run("compare_pptx_files", str(tmp_path / "struck.pptx"), plain) == 0.0


class FakeGuest:
    """A desktop whose files are a dict (the getters only read files)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    async def get_file(self, path: str) -> bytes | None:
        return self.files.get(path)


def media_deck(tmp_path: Path) -> bytes:
    """A deck whose slide 1 has a background picture and an embedded audio part."""
    plain = deck(tmp_path / "m.pptx")
    rels = "ppt/slides/_rels/slide1.xml.rels"
    out = tmp_path / "media.pptx"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "ppt/slides/slide1.xml":
                data = data.replace(
                    b"<p:cSld>",
                    b"<p:cSld><p:bg><p:bgPr><a:blipFill><a:blip "
                    b'r:embed="rIdBg"/></a:blipFill></p:bgPr></p:bg>',
                )
            if item.filename == rels:
                data = data.replace(
                    b"</Relationships>",
                    (
                        b'<Relationship Id="rIdBg" Type="http://schemas.openxmlformats.org/'
                        b'officeDocument/2006/relationships/image" Target="../media/bg.png"/>'
                        b'<Relationship Id="rIdA" Type="http://schemas.openxmlformats.org/'
                        b'officeDocument/2006/relationships/audio" Target="../media/song.mp3"/>'
                        b"</Relationships>"
                    ),
                )
            dst.writestr(item, data)
        dst.writestr("ppt/media/bg.png", b"PNGDATA")
        dst.writestr("ppt/media/song.mp3", b"MP3DATA")
    return out.read_bytes()


def test_media_getters(tmp_path: Path) -> None:
    guest = FakeGuest({"/home/user/deck.pptx": media_deck(tmp_path)})
    cache = tmp_path / "cache"
    ctx: Any = GetterContext(client=guest, cache=None, cache_dir=cache)  # type: ignore[arg-type]
    config = {"ppt_file_path": "/home/user/deck.pptx", "slide_index": 0, "dest": "x"}
    audio = asyncio.run(get_getter("audio_in_slide").func(ctx, dict(config)))
    assert Path(audio).read_bytes() == b"MP3DATA"
    image = asyncio.run(get_getter("background_image_in_slide").func(ctx, dict(config)))
    assert Path(image).read_bytes() == b"PNGDATA"
    config["slide_index"] = 3
    assert asyncio.run(get_getter("audio_in_slide").func(ctx, dict(config))) is None
    with pytest.raises(FileNotFoundError):
        asyncio.run(
            get_getter("audio_in_slide").func(
                ctx, {**config, "ppt_file_path": "/home/user/missing.pptx"}
            )
        )
    _ = Inches  # keep the unit helpers imported for readers extending these decks
