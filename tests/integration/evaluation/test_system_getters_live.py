"""Media & system getters against a real guest server: app config files under the
desktop user's home, VLC's HTTP interface (a real `cvlc`), xdg-mime and xlsx rows.

The guest here runs with its own HOME (a scratch folder), so `~/.config/...`
getters read files the test wrote and never the machine's real profile. The
module's `desktop` fixture provides the X display.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import wave
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests_support.desktops import guest_ready
from tests_support.servers import free_port

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.setup_steps import SetupContext
from cua_rl.evaluation import GetterContext, evaluate, get_getter
from cua_rl.evaluation.getters.vlc import VIDEO_SUBTYPES
from cua_rl.types import Action, TaskVariant

pytestmark = pytest.mark.desktop
TOKEN = "system-getters-token-0123456789ab"
DONE = Action(kind="terminate", status="success")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def home_guest(
    desktop: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """(url, home): a guest on the shared display whose user home is a scratch folder."""
    root = tmp_path_factory.mktemp("home-guest")
    home = root / "home"
    home.mkdir()
    (root / "token").write_text(TOKEN + "\n")
    port = free_port()
    env = {**os.environ, "DISPLAY": desktop.display, "HOME": str(home)}
    env.pop("CUA_GUEST_TOKEN", None)
    log = root / "guest.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cua_guest",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--token-file",
            str(root / "token"),
        ],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        if not asyncio.run(guest_ready(url, TOKEN)):
            pytest.fail(f"guest not ready: {log.read_text()[-2000:]}")
        yield url, home
    finally:
        _kill(proc)


@pytest.fixture
async def home_client(home_guest: tuple[str, Path]) -> AsyncIterator[GuestClient]:
    async with GuestClient(home_guest[0], TOKEN) as client:
        yield client


def ctx_for(client: GuestClient, tmp_path: Path) -> GetterContext:
    return GetterContext(
        client=client, cache=FileCache(tmp_path / "cache"), cache_dir=tmp_path / "traj"
    )


async def score(client: GuestClient, tmp_path: Path, evaluator: dict[str, Any]) -> float:
    variant = TaskVariant(
        task_id="live",
        domain="vlc",
        evaluator_name="default",
        instruction="do",
        config=(),
        evaluator=evaluator,
        source_path="live.json",
    )
    return await evaluate(
        variant,
        client,
        cache=FileCache(tmp_path / "cache"),
        context=SetupContext(1920, 1080, strict=True),
        last_action=DONE,
        cache_dir=tmp_path / "traj",
    )


async def test_vlc_config_reads_vlcrc_of_the_desktop_user(
    home_client: GuestClient, home_guest: tuple[str, Path], tmp_path: Path
) -> None:
    rc = home_guest[1] / ".config" / "vlc" / "vlcrc"
    rc.parent.mkdir(parents=True, exist_ok=True)
    rc.write_text("#qt-max-volume=125\nqt-max-volume=200\n")
    spec = {
        "func": "check_qt_max_volume",
        "result": {"type": "vlc_config", "dest": "vlcrc"},
        "expected": {"type": "rule", "rules": {"expected_qt_max_volume": 200}},
    }
    assert await score(home_client, tmp_path, spec) == 1.0
    rc.write_text("#qt-max-volume=125\n")
    assert await score(home_client, tmp_path, spec) == 0.0
    rc.unlink()
    assert await score(home_client, tmp_path, spec) == 0.0  # no vlcrc: file not found


async def test_gimp_config_file(
    home_client: GuestClient, home_guest: tuple[str, Path], tmp_path: Path
) -> None:
    gimprc = home_guest[1] / ".config" / "GIMP" / "2.10" / "gimprc"
    gimprc.parent.mkdir(parents=True, exist_ok=True)
    gimprc.write_text('# gimprc\n(theme "Light")\n(undo-levels 5)\n')
    spec = {
        "func": "check_config_status",
        "result": {"type": "gimp_config_file", "file_name": "gimprc", "dest": "gimprc"},
        "expected": {
            "type": "rule",
            "rules": {"type:": "key-value", "key": "theme", "value": '"Light"'},
        },
    }
    assert await score(home_client, tmp_path, spec) == 1.0
    spec["expected"]["rules"]["value"] = '"Dark"'
    assert await score(home_client, tmp_path, spec) == 0.0


def _write_wav(path: Path, seconds: float = 30.0) -> None:
    rate = 8000
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(
            b"".join(
                struct.pack("<h", int(8000 * math.sin(i / 6))) for i in range(int(rate * seconds))
            )
        )


def _start_vlc(display: str, log: Path) -> tuple[Path, Path, int, subprocess.Popen[bytes]]:
    """cvlc playing a generated tone in a loop, HTTP interface on a free port.

    VLC refuses to run as root: then it runs as nobody, on a world-readable copy.
    """
    shared = Path(tempfile.mkdtemp(prefix="vlc-live-"))
    shared.chmod(0o755)
    media = shared / "Never Gonna Give You Up.wav"
    _write_wav(media)
    media.chmod(0o644)
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root and setpriv is missing: VLC refuses root")
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    port = free_port()
    env = {**os.environ, "DISPLAY": display, "HOME": str(shared)}
    vlc = subprocess.Popen(
        [
            *prefix,
            "cvlc",
            "--intf",
            "http",
            "--http-host",
            "127.0.0.1",
            "--http-port",
            str(port),
            "--http-password",
            "password",
            "--aout",
            "dummy",
            "--no-video",
            "--loop",
            str(media),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        start_new_session=True,
    )
    return shared, media, port, vlc


@pytest.mark.skipif(shutil.which("cvlc") is None, reason="VLC is not installed (vlc-bin)")
async def test_vlc_playing_info_from_the_http_interface(
    home_client: GuestClient, home_guest: tuple[str, Path], desktop: Any, tmp_path: Path
) -> None:
    shared, media, port, vlc = _start_vlc(desktop.display, tmp_path / "vlc.log")
    try:
        spec = {
            "func": "is_vlc_playing",
            "result": {"type": "vlc_playing_info", "dest": "status.xml", "port": port},
            "expected": {"type": "rule", "rules": {"type": "file_name", "file_name": media.name}},
        }
        deadline = time.monotonic() + 60.0
        while (got := await score(home_client, tmp_path, spec)) != 1.0:
            log = (tmp_path / "vlc.log").read_text()[-2000:]
            assert vlc.poll() is None, f"VLC exited: {log}"
            assert time.monotonic() < deadline, log
            await asyncio.sleep(0.2)
        assert got == 1.0
        assert "<state>playing</state>" in (tmp_path / "traj" / "status.xml").read_text()
        spec["expected"]["rules"]["file_name"] = "other.mp4"
        assert await score(home_client, tmp_path, spec) == 0.0
    finally:
        _kill(vlc)
        shutil.rmtree(shared, ignore_errors=True)
    ctx = ctx_for(home_client, tmp_path)
    assert (
        await get_getter("vlc_playing_info").func(ctx, {"dest": "gone.xml", "port": port}) is None
    )  # nothing listens any more


async def test_default_video_player_asks_xdg_mime(
    home_client: GuestClient, home_guest: tuple[str, Path], tmp_path: Path
) -> None:
    if shutil.which("xdg-mime") is None:
        pytest.skip("xdg-utils is not installed")
    apps = home_guest[1] / ".config" / "mimeapps.list"
    apps.parent.mkdir(parents=True, exist_ok=True)
    # Most types to VLC, one to Totem: the getter reports the player most types open
    # with (with Totem installed, as setup.sh does, it also answers the unlisted types).
    apps.write_text(
        "[Default Applications]\n"
        + "".join(
            f"video/{sub}={'totem' if sub == 'x-matroska' else 'vlc'}.desktop\n"
            for sub in VIDEO_SUBTYPES
        )
    )
    spec = {
        "func": "check_include_exclude",
        "result": {"type": "default_video_player"},
        "expected": {"type": "rule", "rules": {"include": ["vlc.desktop"]}},
    }
    assert await score(home_client, tmp_path, spec) == 1.0
    # xdg-mime only reports players that are installed: declare one in the user's home
    player = home_guest[1] / ".local" / "share" / "applications" / "player.desktop"
    player.parent.mkdir(parents=True, exist_ok=True)
    types = "".join(f"video/{sub};" for sub in VIDEO_SUBTYPES)
    player.write_text(
        f"[Desktop Entry]\nType=Application\nName=P\nExec=true %f\nMimeType={types}\n"
    )
    everything = "".join(f"video/{sub}=player.desktop\n" for sub in VIDEO_SUBTYPES)
    apps.write_text("[Default Applications]\n" + everything)  # VLC may be a system default
    assert await score(home_client, tmp_path, spec) == 0.0


async def test_content_from_vm_file_last_row(
    home_client: GuestClient, home_guest: tuple[str, Path], tmp_path: Path
) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    pytest.importorskip("pandas")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["Name", "Citations"])
    sheet.append(["Yann LeCun", 345074])
    path = home_guest[1] / "researchers.xlsx"
    book.save(path)
    spec = {
        "func": "literal_match",
        "result": {
            "type": "content_from_vm_file",
            "path": str(path),
            "file_type": "xlsx",
            "file_content": "last_row",
        },
        "expected": {"type": "rule", "rules": ["Yann LeCun", "345074"]},
        "options": {"type": "list", "ignore_case": True},
    }
    ctx = ctx_for(home_client, tmp_path)
    assert await get_getter("content_from_vm_file").func(ctx, spec["result"]) == [
        "Yann LeCun",
        "345074",
    ]
