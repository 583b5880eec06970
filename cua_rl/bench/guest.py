"""Guest-server latency with real content on screen (`cua-rl bench guest`).

Figures (docs/figures.md, numbers; medians over `--calls` calls after a warm-up):
`screenshot_ms` (default host transport: JPEG q90, the guest's default encoder),
`screenshot_png_ms`, and `action_ms` (one pyautogui click through /act). The JPEG
screenshot is measured with each of our guest's encoders in the same run (`jpeg`:
per encoder, the round trip and the guest's own grab and encode times from its
`Server-Timing`, and how far its pixels are from the other encoder's picture of the
same screen). Without `--url` it starts a local desktop, opens a spreadsheet full of
data in LibreOffice Calc, measures and stops the desktop. Timing goals live here,
never in tests.
"""

from __future__ import annotations

import asyncio
import csv
import io
import random
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from cua_rl.desktop.client import GuestClient
from cua_rl.errors import DesktopError

SHEET_PATH = "/home/user/Documents/bench_data.csv"
# CSV import options (comma, double quote, UTF-8, from row 1): skips the import dialog.
_CSV_FILTER = "--infilter=CSV:44,34,76,1"


def spreadsheet_csv(rows: int = 200, cols: int = 12, seed: int = 0) -> bytes:
    """Mixed data (names, dates, integers, money, percentages, text) so that the
    screen has varied glyphs, like a real task's spreadsheet."""
    rng = random.Random(seed)
    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
        "lima",
        "mike",
        "november",
        "oscar",
        "papa",
    ]
    kinds = ["name", "date", "int", "money", "pct", "text"]

    def cell(kind: str) -> str:
        if kind == "name":
            return f"{rng.choice(words).title()} {rng.choice(words).title()}"
        if kind == "date":
            return f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        if kind == "int":
            return str(rng.randint(-5000, 99999))
        if kind == "money":
            return f"{rng.uniform(0, 1e5):.2f}"
        if kind == "pct":
            return f"{rng.uniform(0, 100):.1f}%"
        return " ".join(rng.choices(words, k=rng.randint(1, 4)))

    columns = [kinds[c % len(kinds)] for c in range(cols)]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([f"{kind}_{c}" for c, kind in enumerate(columns)])
    for _ in range(rows):
        writer.writerow([cell(kind) for kind in columns])
    return out.getvalue().encode()


async def wait_for_window(client: GuestClient, name: str, deadline_s: float) -> str:
    """Poll `xdotool search --name` until a window matches; its id."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        result = await client.execute(
            ["xdotool", "search", "--onlyvisible", "--name", name], timeout=10
        )
        if result.ok and result.output.strip():
            return result.output.split()[0]
        await asyncio.sleep(0.5)
    raise DesktopError(f"no window named {name!r} within {deadline_s:.0f} s")


async def wait_screen_stable(client: GuestClient, deadline_s: float = 30.0) -> bool:
    """Poll until two screenshots in a row are identical (the app finished drawing)."""
    end = time.monotonic() + deadline_s
    previous = b""
    while time.monotonic() < end:
        shot = await client.screenshot("jpeg", 90)
        if shot == previous:
            return True
        previous = shot
        await asyncio.sleep(0.3)
    return False


async def open_spreadsheet(
    client: GuestClient, rows: int = 200, cols: int = 12, deadline_s: float = 180.0
) -> None:
    """Upload a generated CSV, open it in LibreOffice Calc, maximize it and wait
    until it is drawn."""
    await client.upload_file(SHEET_PATH, spreadsheet_csv(rows, cols))
    await client.launch(["libreoffice", "--calc", "--norestore", _CSV_FILTER, SHEET_PATH])
    window = await wait_for_window(client, "bench_data", deadline_s)
    await client.execute(
        ["wmctrl", "-i", "-r", window, "-b", "add,maximized_vert,maximized_horz"], timeout=10
    )
    await wait_screen_stable(client)


async def _median_ms(call: Callable[[], Awaitable[object]], calls: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        await call()
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        await call()
        times.append((time.perf_counter() - began) * 1000)
    return round(statistics.median(times), 2)


JPEG_ENCODERS = ("turbo", "pillow")
"""Our guest's JPEG encoders (`cua_guest.capture`): the new path and the old one."""


async def jpeg_encoders(
    client: GuestClient, calls: int, quality: int = 90
) -> dict[str, dict[str, float | int | str]]:
    """Per encoder: the round-trip median, the guest's own grab and encode medians,
    the bytes; and each one's largest and mean pixel difference from the other
    encoder's picture of the same (unchanged) screen. An encoder the guest lacks (or
    a guest without encoders: OSWorld's) is one `error` entry."""
    from cua_rl.errors import GuestError

    out: dict[str, dict[str, float | int | str]] = {}
    pictures: dict[str, bytes] = {}
    for encoder in JPEG_ENCODERS:
        grab: list[float] = []
        encode: list[float] = []

        async def shot(
            encoder: str = encoder, grab: list[float] = grab, encode: list[float] = encode
        ) -> bytes:
            data = await client.screenshot("jpeg", quality, encoder=encoder)
            timing = client.server_timing
            if f"encoder_{encoder}" not in timing:
                raise GuestError(f"the guest did not encode with {encoder!r}: {timing}")
            grab.append(timing.get("grab", 0.0))
            encode.append(timing.get("encode", 0.0))
            return data

        try:
            pictures[encoder] = await shot()
            grab.clear()
            encode.clear()
            round_trip = await _median_ms(shot, calls)
        except GuestError as exc:
            out[encoder] = {"error": str(exc).splitlines()[0]}
            continue
        out[encoder] = {
            "screenshot_ms": round_trip,
            "guest_grab_ms": round(statistics.median(grab), 2),
            "guest_encode_ms": round(statistics.median(encode), 2),
            "guest_ms": round(
                statistics.median([g + e for g, e in zip(grab, encode, strict=True)]), 2
            ),
            "bytes": len(pictures[encoder]),
        }
    if len(pictures) == 2:
        largest, mean = pixel_difference(*pictures.values())
        for encoder in pictures:
            out[encoder].update(max_pixel_diff=largest, mean_pixel_diff=round(mean, 3))
    return out


def pixel_difference(a: bytes, b: bytes) -> tuple[int, float]:
    """Largest and mean absolute difference of two images' RGB values (0-255)."""
    from PIL import Image, ImageChops, ImageStat

    with Image.open(io.BytesIO(a)) as one, Image.open(io.BytesIO(b)) as two:
        diff = ImageChops.difference(one.convert("RGB"), two.convert("RGB"))
    largest = max(high for _, high in diff.getextrema())
    return int(largest), float(sum(ImageStat.Stat(diff).mean) / 3)


async def measure_guest(client: GuestClient, calls: int = 20) -> dict[str, Any]:
    """Median latencies of the three calls an actor makes every step."""
    from PIL import Image

    jpeg = await client.screenshot("jpeg", 90)
    png = await client.screenshot("png")
    width, height = Image.open(io.BytesIO(png)).size
    cells = iter(range(10**9))

    async def click() -> None:
        i = next(cells)
        result = await client.act(f"pyautogui.click({200 + 90 * (i % 8)}, {300 + 20 * (i % 10)})")
        if not result.ok:
            raise DesktopError(f"/act click failed: {result.error}")

    return {
        "machine_before": machine(),
        "jpeg": await jpeg_encoders(client, calls),
        "screenshot_ms": await _median_ms(lambda: client.screenshot("jpeg", 90), calls),
        "screenshot_png_ms": await _median_ms(lambda: client.screenshot("png"), calls),
        "action_ms": await _median_ms(click, calls),
        "screenshot_bytes": len(jpeg),
        "screenshot_png_bytes": len(png),
        "width": width,
        "height": height,
        "calls": calls,
        "machine_after": machine(),
    }


def machine() -> dict[str, float | int | None]:
    """What the figures depend on besides the code: cores and load (1 min)."""
    import os

    return {"cores": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2)}


async def bench_local(calls: int, rows: int, cols: int) -> dict[str, Any]:
    """Start a local desktop, put a spreadsheet on it, measure, stop it."""
    from cua_rl.desktop.providers.local.provider import LocalProvider

    provider = LocalProvider()
    handle = await provider.start(f"bench-{secrets.token_hex(3)}")
    try:
        async with handle.guest_client() as client:
            began = time.monotonic()
            await open_spreadsheet(client, rows, cols)
            setup_s = round(time.monotonic() - began, 1)
            return {**await measure_guest(client, calls), "setup_s": setup_s}
    finally:
        await provider.stop(handle)
        await provider.close()


async def bench_remote(
    url: str, token: str | None, tls_fingerprint: str | None, calls: int
) -> dict[str, Any]:
    """Measure a running guest at `url` as it is (whatever is on its screen)."""
    async with GuestClient(url, token, tls_fingerprint=tls_fingerprint) as client:
        await client.wait_ready(30)
        return await measure_guest(client, calls)
