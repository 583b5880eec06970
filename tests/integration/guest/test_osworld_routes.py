"""Every route of OSWorld's guest protocol against a real guest on a real 1920x1080
Xvfb desktop, driven by a client written from OSWorld's server (tests_support).

The guest runs as root without the file-permission override (setpriv), as the
desktop's unprivileged user would meet permission errors.
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from PIL import Image
from tests_support.guest_server import OSW_UPLOAD_LIMIT, RunningGuest
from tests_support.osworld_protocol import OSWorldProtocol

pytestmark = pytest.mark.desktop

UPLOAD_LIMIT = OSW_UPLOAD_LIMIT


@pytest.fixture
async def web_server() -> AsyncIterator[str]:
    """A file server on 127.0.0.1 for /setup/download_file."""

    async def small(request: web.Request) -> web.Response:
        return web.Response(body=b"osworld" * 1000)

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * (UPLOAD_LIMIT + 1))

    app = web.Application()
    app.router.add_get("/small.bin", small)
    app.router.add_get("/big.bin", big)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_every_osworld_route_answers_as_osworld(
    osw: OSWorldProtocol, osw_guest: RunningGuest
) -> None:
    home = osw_guest.tmp / "home"
    status, body, _ = await osw.screenshot()
    assert status == 200 and body.startswith(b"\x89PNG")
    assert (await osw.platform())[:2] == (200, b"Linux")
    status, body, _ = await osw.cursor_position()
    assert status == 200 and len(json.loads(body)) == 2
    status, body, _ = await osw.screen_size()
    assert json.loads(body) == {"width": 1920, "height": 1080}
    assert (await osw.window_size("no-such-class"))[0] == 404
    status, body, _ = await osw.desktop_path()
    assert status == 200 and json.loads(body)["desktop_path"] == str(home / "Desktop")
    # This bare guest may have no AT-SPI bus: then a clear 501. On a local desktop
    # both answer 200 (test_local_session.py's accessibility test).
    for route in (osw.accessibility, osw.terminal):
        assert (await route())[0] in (200, 501)

    for execute in (osw.execute, osw.setup_execute):
        status, body, _ = await execute(["echo", "hi"])
        assert status == 200 and json.loads(body)["output"] == "hi\n"
    for verify in (osw.execute_with_verification, osw.setup_execute_with_verification):
        status, _, _ = await verify(["true"], {})
        assert status == 200
    status, body, _ = await osw.run_python("print(6 * 7)")
    assert status == 200 and "42" in json.loads(body)["output"]
    status, body, _ = await osw.run_bash_script("echo $((6 * 7))")
    assert status == 200 and "42" in json.loads(body)["output"]

    target = home / "up" / "data.bin"
    assert (await osw.upload(str(target), b"abc" * 100))[0] == 200
    status, body, _ = await osw.file(str(target))
    assert (status, body) == (200, b"abc" * 100)
    status, body, _ = await osw.list_directory(str(home / "up"))
    assert json.loads(body)["directory_tree"]["children"] == [{"type": "file", "name": "data.bin"}]

    assert (await osw.launch(["sleep", "1"]))[0] == 200
    assert (await osw.open_file(str(home / "missing.txt")))[0] == 404
    for window_route in (osw.activate_window, osw.close_window):
        assert (await window_route("no window has this title"))[0] == 404


async def test_download_file(
    osw: OSWorldProtocol, osw_guest: RunningGuest, web_server: str
) -> None:
    target = osw_guest.tmp / "home" / "dl" / "small.bin"
    status, body, _ = await osw.download_file(f"{web_server}/small.bin", str(target))
    assert (status, body) == (200, b"File downloaded successfully")
    assert target.read_bytes() == b"osworld" * 1000
    status, _, _ = await osw.download_file(f"{web_server}/missing", str(target.with_name("m")))
    assert status == 500 and not target.with_name("m").exists()
    assert (await osw.download_file("file:///etc/passwd", str(target)))[0] == 400
    status, body, _ = await osw.download_file(f"{web_server}/big.bin", str(target.with_name("b")))
    assert status == 413 and b"--max-upload-bytes" in body
    assert not target.with_name("b").exists()
    assert sorted(p.name for p in target.parent.iterdir()) == ["small.bin"]  # nothing staged left


async def test_change_wallpaper_shows_on_screen_and_wallpaper_returns_it(
    osw: OSWorldProtocol, osw_guest: RunningGuest
) -> None:
    image = osw_guest.tmp / "home" / "wall.png"
    Image.new("RGB", (64, 36), (200, 30, 90)).save(image)
    status, body, _ = await osw.change_wallpaper(str(image))
    assert (status, body) == (200, b"Wallpaper changed successfully")
    status, shot, _ = await osw.screenshot()
    screen = Image.open(io.BytesIO(shot)).convert("RGB")
    assert screen.getpixel((1900, 1060)) == (200, 30, 90)  # a corner no window covers
    status, body, _ = await osw.wallpaper()
    assert (status, body) == (200, image.read_bytes())
    assert (await osw.change_wallpaper(str(image.with_name("none.png"))))[0] == 404
    not_image = image.with_name("text.png")
    not_image.write_text("not an image")
    status, body, _ = await osw.change_wallpaper(str(not_image))
    assert status == 400 and b"not a readable image" in body


def _ffprobe(path: Path) -> dict:
    out = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=width,height,codec_name:format=duration",
            "-of",
            "json",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    data = json.loads(out)
    return {**data["streams"][0], "duration": float(data["format"]["duration"])}


@pytest.mark.skipif(shutil.which("ffprobe") is None, reason="ffprobe is not installed")
async def test_recording_is_an_mp4_of_the_screen_for_the_recorded_span(
    osw: OSWorldProtocol, osw_guest: RunningGuest
) -> None:
    assert (await osw.end_recording())[0] == 400  # nothing to stop yet
    status, body, _ = await osw.start_recording()
    started = time.monotonic()
    assert status == 200 and json.loads(body)["status"] == "success"
    assert (await osw.start_recording())[0] == 400  # one at a time
    await osw.execute(["xdotool", "mousemove", "500", "500"])  # some activity; may be absent
    await asyncio.sleep(3.0)  # the span being recorded, not a readiness wait
    ended = time.monotonic()
    status, video, headers = await osw.end_recording()
    assert status == 200, video[:300]
    assert "recording.mp4" in headers["Content-Disposition"]
    path = osw_guest.tmp / "recording.mp4"
    path.write_bytes(video)
    info = _ffprobe(path)
    assert (info["codec_name"], info["width"], info["height"]) == ("h264", 1920, 1080)
    assert abs(info["duration"] - (ended - started)) < 1.0, (info, ended - started)
    assert (await osw.end_recording())[0] == 400  # stopped: nothing left to stop


@pytest.mark.skipif(
    not (shutil.which("chromium") or shutil.which("chromium-browser"))
    or shutil.which("google-chrome") is not None,
    reason="needs Chromium installed and Chrome not installed",
)
async def test_google_chrome_launches_chromium(osw: OSWorldProtocol) -> None:
    status, body, _ = await osw.launch(["google-chrome", "--version"])
    assert status == 200, body
    assert (await osw.launch("google-chrome --version", shell=True))[0] == 200


def test_resolve_browser_on_any_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    from cua_guest import routes_setup

    installed = {"chromium-browser"}
    monkeypatch.setattr(
        routes_setup.shutil, "which", lambda name: f"/usr/bin/{name}" if name in installed else None
    )
    resolve = routes_setup.resolve_browser
    assert resolve(["google-chrome", "--x"]) == ["chromium-browser", "--x"]
    assert resolve(["nohup", "google-chrome-stable"]) == ["nohup", "chromium-browser"]
    shell = ["/bin/sh", "-c", "google-chrome --a b"]
    assert resolve(shell) == ["/bin/sh", "-c", "chromium-browser --a b"]
    assert resolve(["firefox"]) == ["firefox"]
    installed.add("google-chrome")
    assert resolve(["google-chrome"]) == ["google-chrome"]  # the real one when installed


@pytest.mark.skipif(shutil.which("ffprobe") is None, reason="ffprobe is not installed")
async def test_recording_stops_by_itself_at_the_bound(osw_guest: RunningGuest) -> None:
    from cua_guest.recording import Recorder

    recorder = Recorder(max_seconds=1.0, fps=10)
    try:
        await recorder.start(osw_guest.display, (1920, 1080))
        async with asyncio.timeout(15):  # ffmpeg stops on its own
            while recorder.running():  # noqa: ASYNC110 - the capture has no event to wait on
                await asyncio.sleep(0.1)
        assert not recorder.running()
        info = _ffprobe(await recorder.stop())
        assert info["duration"] <= 1.3, info
        directory = recorder.path.parent
    finally:
        await recorder.close()
    assert not directory.exists()  # closing removes the recording directory
