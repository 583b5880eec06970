"""GIMP / image metrics on images the tests draw with Pillow."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cua_rl.evaluation import get_metric

np = pytest.importorskip("numpy")
pytest.importorskip("skimage")
Image = pytest.importorskip("PIL.Image")
ImageDraw = pytest.importorskip("PIL.ImageDraw")


def run(name: str, *args: object, **options: object) -> float:
    return float(get_metric(name).func(*args, **options))


def scene(size: tuple[int, int] = (96, 64), shift: int = 0) -> Image.Image:
    """A colourful picture with structure: gradient, a disc and a bar."""
    w, h = size
    xs = np.linspace(0, 255, w, dtype=np.uint8)
    ys = np.linspace(0, 255, h, dtype=np.uint8)
    array = np.stack(
        [np.tile(xs, (h, 1)), np.tile(ys[:, None], (1, w)), np.full((h, w), 120, np.uint8)], axis=2
    )
    image = Image.fromarray(array, "RGB")
    draw = ImageDraw.Draw(image)
    draw.ellipse((10 + shift, 10, 40 + shift, 40), fill=(250, 30, 30))
    draw.rectangle((55, 5, 62, h - 5), fill=(20, 200, 40))
    return image


def save(image: Image.Image, path: Path) -> str:
    image.save(path)
    return str(path)


def noise(size: tuple[int, int], seed: int = 1) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8), "RGB")


def test_compare_images_scores_ssim_and_rebases(tmp_path: Path) -> None:
    a = save(scene(), tmp_path / "a.png")
    b = save(noise((96, 64)), tmp_path / "b.png")
    assert run("compare_images", a, a) == pytest.approx(1.0)
    assert run("compare_images", a, b) < 0.3
    assert run("compare_images", a, b, reference_base_result=0.5) == 0.0
    assert run("compare_images", a, a, reference_base_result=0.5) == pytest.approx(1.0)
    assert run("compare_images", None, a) == 0.0
    (tmp_path / "empty.png").write_bytes(b"")
    assert run("compare_images", str(tmp_path / "empty.png"), a) == 0.0


def test_structure_sim_family(tmp_path: Path) -> None:
    a = save(scene(), tmp_path / "a.png")
    moved = save(scene(shift=40), tmp_path / "moved.png")
    small = save(scene().resize((48, 32)), tmp_path / "small.png")
    assert run("check_structure_sim", a, a) == 1.0
    assert run("check_structure_sim", a, moved) == 0.0
    assert run("check_structure_sim", a, small) == 0.0  # sizes differ
    assert run("check_structure_sim_with_threshold", small, a, ssim_threshold=0.6) == 1.0
    assert run("check_structure_sim_with_threshold", a, moved, ssim_threshold=0.95) == 0.0
    assert run("check_file_exists_and_structure_sim", a, a) == 1.0
    assert run("check_file_exists_and_structure_sim", str(tmp_path / "nope.png"), a) == 0.0


def test_structure_sim_resized_crops_transparent_margin(tmp_path: Path) -> None:
    gold = scene((96, 64))
    canvas = Image.new("RGBA", (200, 120), (0, 0, 0, 0))
    canvas.paste(gold.resize((48, 32)).convert("RGBA"), (20, 30))
    resized = save(canvas, tmp_path / "resized.png")
    target = save(gold, tmp_path / "gold.png")
    assert run("check_structure_sim_resized", resized, target) == 1.0
    assert run("check_image_size", resized, {"height": 32, "ignore_transparent": True}) == 1.0
    assert run("check_image_size", resized, {"height": 32}) == 0.0
    assert run("check_image_size", target, {"height": 64, "width": 96}) == 1.0
    blank = save(Image.new("RGBA", (50, 50), (0, 0, 0, 0)), tmp_path / "blank.png")
    assert run("check_structure_sim_resized", blank, target) == 0.0
    assert (
        run("check_structure_sim_resized", save(noise((96, 64)), tmp_path / "n.png"), target) == 0.0
    )


def test_brightness_saturation_contrast(tmp_path: Path) -> None:
    from PIL import ImageEnhance

    original = scene()
    src = save(original, tmp_path / "orig.png")
    darker = save(ImageEnhance.Brightness(original).enhance(0.7), tmp_path / "dark.png")
    assert run("check_brightness_decrease_and_structure_sim", darker, src) == 1.0
    assert run("check_brightness_decrease_and_structure_sim", src, darker) == 0.0
    hue, sat, value = original.convert("HSV").split()
    sat = sat.point(lambda v: min(255, int(v * 1.5)))
    vivid = save(Image.merge("HSV", (hue, sat, value)).convert("RGB"), tmp_path / "vivid.png")
    assert run("check_saturation_increase_and_structure_sim", vivid, src) == 1.0
    assert run("check_saturation_increase_and_structure_sim", src, vivid) == 0.0
    punchy = save(ImageEnhance.Contrast(original).enhance(1.4), tmp_path / "punchy.png")
    assert run("check_contrast_increase_and_structure_sim", punchy, src) == 1.0
    assert run("check_contrast_increase_and_structure_sim", src, punchy) == 0.0


def test_palette_and_mirror(tmp_path: Path) -> None:
    original = scene()
    target = save(original, tmp_path / "t.png")
    palette = save(original.quantize(256), tmp_path / "p.png")
    assert run("check_palette_and_structure_sim", palette, target) == 1.0
    assert run("check_palette_and_structure_sim", target, target) == 0.0  # not mode P
    mirrored = save(original.transpose(Image.Transpose.FLIP_LEFT_RIGHT), tmp_path / "m.png")
    assert run("check_image_mirror", target, mirrored) == 1.0
    assert run("check_image_mirror", target, target) == 0.0


def test_triangle_textbox_green(tmp_path: Path) -> None:
    def triangle(centre_x: int) -> str:
        image = Image.new("RGB", (100, 100), (255, 255, 255))
        ImageDraw.Draw(image).polygon(
            [(centre_x - 10, 60), (centre_x + 10, 60), (centre_x, 40)], fill=(255, 220, 0)
        )
        image.putpixel((0, 0), (1, 2, 3))  # the rarest colour: OSWorld takes the 2nd rarest
        return save(image, tmp_path / f"tri{centre_x}.png")

    assert run("check_triangle_position", triangle(50)) == 1.0
    assert run("check_triangle_position", triangle(20)) == 0.0

    def textbox(x: int) -> str:
        image = Image.new("RGB", (200, 80), (255, 255, 255))
        ImageDraw.Draw(image).rectangle((x, 30, x + 40, 40), fill=(0, 0, 0))
        return save(image, tmp_path / f"text{x}.png")

    assert run("check_textbox_on_leftside", textbox(3)) == 1.0
    assert run("check_textbox_on_leftside", textbox(80)) == 0.0

    mask = Image.new("RGB", (40, 40), (0, 0, 0))
    ImageDraw.Draw(mask).rectangle((0, 0, 39, 9), fill=(255, 255, 255))  # background band
    reference = save(mask, tmp_path / "ref.png")
    green = Image.new("RGB", (40, 40), (200, 30, 30))
    ImageDraw.Draw(green).rectangle((0, 0, 39, 9), fill=(10, 200, 10))
    assert run("check_green_background", save(green, tmp_path / "g.png"), reference) == 1.0
    red = save(Image.new("RGB", (40, 40), (200, 30, 30)), tmp_path / "r.png")
    assert run("check_green_background", red, reference) == 0.0
    wide = save(Image.new("RGB", (60, 40), (10, 200, 10)), tmp_path / "wide.png")
    assert (
        run("check_green_background", wide, save(mask.resize((60, 40)), tmp_path / "wref.png"))
        == 0.0
    )


def test_gimp_config_and_file_size(tmp_path: Path) -> None:
    rc = tmp_path / "gimprc"
    rc.write_text(
        '# GIMP gimprc\n\n(undo-levels 100)\n(theme "Light")\n(layer-new-name "Square")\n'
        "(default-image\n    (width 10))\n"
    )
    assert run("check_config_status", str(rc), {"key": "theme", "value": '"Light"'}) == 1.0
    assert run("check_config_status", str(rc), {"key": "undo-levels", "value": "100"}) == 1.0
    assert run("check_config_status", str(rc), {"key": "theme", "value": '"Dark"'}) == 0.0
    assert run("check_config_status", None, {"key": "theme", "value": "x"}) == 0.0
    image = save(scene(), tmp_path / "c.png")
    assert run("check_image_file_size", image, {"max_size": 10**6}) == 1.0
    assert run("check_image_file_size", image, {"max_size": 10}) == 0.0


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract-ocr not installed")
def test_compare_image_text_reads_the_screenshot(tmp_path: Path) -> None:
    pytest.importorskip("pytesseract")
    from PIL import ImageFont

    image = Image.new("RGB", (600, 120), (255, 255, 255))
    ImageDraw.Draw(image).text(
        (20, 30), "user@host:~$ ls -la", fill=(0, 0, 0), font=ImageFont.load_default(size=40)
    )
    path = save(image, tmp_path / "ls.png")
    assert run("compare_image_text", path, {"type": "text", "text": "ls"}) == 1.0
    assert run("compare_image_text", path, {"type": "text", "text": "pwd"}) == 0.0
