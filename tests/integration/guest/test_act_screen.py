"""POST /act in the persistent worker, the pointer, and screenshots."""

from __future__ import annotations

import io

import aiohttp
import pytest
from PIL import Image, ImageChops, ImageStat

pytestmark = pytest.mark.desktop


async def _act(client: aiohttp.ClientSession, code: str, **extra) -> dict:
    async with client.post("/act", json={"code": code, **extra}) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def _cursor(client: aiohttp.ClientSession) -> list[int]:
    async with client.get("/cursor_position") as response:
        return await response.json()


async def test_act_click_moves_cursor(client: aiohttp.ClientSession) -> None:
    result = await _act(client, "pyautogui.click(321, 234)")
    assert result == {"status": "success", "output": "", "error": ""}
    assert await _cursor(client) == [321, 234]
    await _act(client, "import pyautogui as p\np.moveTo(640, 480)")
    assert await _cursor(client) == [640, 480]


async def test_act_reports_output_and_errors(client: aiohttp.ClientSession) -> None:
    assert (await _act(client, "print('hi')"))["output"] == "hi\n"
    # the host's code for a computer_use `wait` uses `time` without importing it
    assert (await _act(client, "time.sleep(0.01)"))["status"] == "success"
    result = await _act(client, "1 / 0")
    assert result["status"] == "error" and "ZeroDivisionError" in result["error"]


async def test_act_hang_times_out_and_worker_is_replaced(client: aiohttp.ClientSession) -> None:
    result = await _act(client, "while True: pass", timeout=1)
    assert result["status"] == "timeout" and "replaced" in result["error"]
    assert (await _act(client, "pyautogui.moveTo(10, 20)"))["status"] == "success"
    assert await _cursor(client) == [10, 20]


async def test_act_code_killing_its_worker(client: aiohttp.ClientSession) -> None:
    before = await _act(client, "import os; print(os.getpid())")
    result = await _act(client, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert result["status"] == "error" and "replaced" in result["error"]
    after = await _act(client, "import os; print(os.getpid())")
    assert after["status"] == "success" and after["output"] != before["output"]


@pytest.mark.parametrize(
    ("query", "fmt"), [("", "PNG"), ("?format=png", "PNG"), ("?format=jpeg&quality=80", "JPEG")]
)
async def test_screenshot_decodes_full_screen(
    client: aiohttp.ClientSession, query: str, fmt: str
) -> None:
    async with client.get("/screenshot" + query) as response:
        assert response.status == 200
        assert response.content_type == f"image/{fmt.lower()}"
        image = Image.open(io.BytesIO(await response.read()))
        image.load()
    assert image.format == fmt and image.size == (1920, 1080)


async def test_screenshot_draws_cursor(client: aiohttp.ClientSession) -> None:
    """Nothing else changes on this screen, so pixels at (x, y) differ only by the cursor."""

    async def region_with_pointer_at(x: int, y: int) -> bytes:
        await _act(client, f"pyautogui.moveTo({x}, {y})")
        async with client.get("/screenshot") as response:
            image = Image.open(io.BytesIO(await response.read())).convert("RGB")
        return image.crop((1500, 900, 1516, 920)).tobytes()

    assert await region_with_pointer_at(1500, 900) != await region_with_pointer_at(200, 200)


async def test_screenshot_bad_options_are_400(client: aiohttp.ClientSession) -> None:
    for query, field in (("?format=gif", "format"), ("?format=jpeg&quality=0", "quality")):
        async with client.get("/screenshot" + query) as response:
            assert response.status == 400
            assert (await response.json())["message"].startswith(field)


async def _jpeg(client: aiohttp.ClientSession, encoder: str) -> tuple[Image.Image, dict]:
    async with client.get(f"/screenshot?format=jpeg&quality=90&encoder={encoder}") as response:
        assert response.status == 200, await response.text()
        assert response.headers["X-Cua-Encoder"] == encoder
        image = Image.open(io.BytesIO(await response.read()))
        image.load()
        return image, dict(response.headers)


async def test_jpeg_encoders_give_the_same_picture(client: aiohttp.ClientSession) -> None:
    """The libjpeg-turbo path (from the BGRA capture) and the Pillow path (an RGB copy
    first) encode the same screen within JPEG tolerance, and say where time went."""
    from cua_rl.desktop.server_timing import server_timing

    await _act(client, "pyautogui.moveTo(700, 500)")
    turbo, headers = await _jpeg(client, "turbo")
    pillow, _ = await _jpeg(client, "pillow")
    assert turbo.format == pillow.format == "JPEG" and turbo.size == pillow.size == (1920, 1080)
    diff = ImageChops.difference(turbo.convert("RGB"), pillow.convert("RGB"))
    assert max(high for _, high in diff.getextrema()) <= 48
    assert sum(ImageStat.Stat(diff).mean) / 3 < 2.0
    timing = server_timing(headers)
    assert timing["grab"] > 0 and timing["encode"] > 0 and "encoder_turbo" in timing
    async with client.get("/screenshot?format=jpeg&encoder=bogus") as response:
        assert response.status == 400 and "encoder" in await response.text()


async def test_turbo_jpeg_draws_cursor(client: aiohttp.ClientSession) -> None:
    """The cursor mss merges into the BGRA buffer reaches the fast encoder's picture."""

    async def region_with_pointer_at(x: int, y: int) -> Image.Image:
        await _act(client, f"pyautogui.moveTo({x}, {y})")
        image, _ = await _jpeg(client, "turbo")
        return image.convert("RGB").crop((1500, 900, 1516, 920))

    diff = ImageChops.difference(
        await region_with_pointer_at(1500, 900), await region_with_pointer_at(200, 200)
    )
    assert max(high for _, high in diff.getextrema()) > 100  # the arrow, not JPEG noise
