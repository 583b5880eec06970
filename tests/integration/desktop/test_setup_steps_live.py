"""Setup steps against a real guest server on a real X display.

The fixture starts Xvfb on a free display, openbox (wmctrl needs a window
manager to activate windows) and `python -m cua_guest` with a bearer token,
waits for /healthz with a deadline and kills all process groups afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from tests_support.servers import free_port
from tests_support.xvfb import kill_group, start_xvfb

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.setup_steps import SetupContext, run_setup_steps

pytestmark = pytest.mark.desktop

REPO = Path(__file__).resolve().parents[3]
WIDTH, HEIGHT = 1280, 800


def _guest_pythonpath() -> str | None:
    """'' when cua_guest is installed, vm/guest when only the source tree has it."""
    if importlib.util.find_spec("cua_guest") is not None:
        return ""
    local = REPO / "vm" / "guest"
    return str(local) if (local / "cua_guest" / "__main__.py").is_file() else None


GUEST_PATH = _guest_pythonpath()
MISSING_TOOLS = [
    t
    for t in ("Xvfb", "openbox", "mousepad", "xdotool", "wmctrl", "xdg-open")
    if shutil.which(t) is None
]
if GUEST_PATH is None:
    pytest.skip("cua_guest is not importable (pip install -e vm/guest)", allow_module_level=True)
if MISSING_TOOLS:
    pytest.skip(
        f"desktop tools missing: {', '.join(MISSING_TOOLS)} (run ./setup.sh)",
        allow_module_level=True,
    )


@dataclass
class Desktop:
    url: str
    token: str
    display: str
    root: Path
    """A directory both host and guest see (they share this machine)."""


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[Desktop]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        xvfb, display = start_xvfb(tmp_path / "xvfb.log", (WIDTH, HEIGHT))
        procs.append(xvfb)
        config = tmp_path / "xdg-config"
        config.mkdir()
        # xdg-open would pick LibreOffice for text/plain; the test wants mousepad.
        (config / "mimeapps.list").write_text(
            "[Default Applications]\ntext/plain=org.xfce.mousepad.desktop\n"
        )
        env = {
            **os.environ,
            "DISPLAY": display,
            "XDG_CONFIG_HOME": str(config),
            "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
            "NO_AT_BRIDGE": "1",
        }
        if GUEST_PATH:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [GUEST_PATH, env.get("PYTHONPATH")]))
        procs.append(
            subprocess.Popen(
                ["openbox", "--sm-disable"],
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        token = secrets.token_hex(16)
        token_file = tmp_path / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        port = free_port()
        log = (tmp_path / "guest.log").open("wb")
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "cua_guest",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--token-file",
                    str(token_file),
                ],
                env=env,
                start_new_session=True,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        root = tmp_path / "desk"
        root.mkdir()
        yield Desktop(f"http://127.0.0.1:{port}", token, display, root)
    finally:
        for proc in reversed(procs):
            kill_group(proc)


@pytest.fixture
async def client(desktop: Desktop, tmp_path: Path) -> AsyncIterator[GuestClient]:
    async with GuestClient(desktop.url, desktop.token, timeout=30) as c:
        try:
            await c.wait_ready(deadline_s=30)
        except Exception:
            log = tmp_path / "guest.log"
            print(log.read_text(errors="replace") if log.exists() else "(no guest log)")
            raise
        yield c


@pytest.fixture
async def asset_url() -> AsyncIterator[str]:
    """A local file server standing in for the model hub OSWorld downloads from."""

    async def notes(request: web.Request) -> web.Response:
        return web.Response(body=b"notes from the hub\n")

    app = web.Application()
    app.router.add_get("/datasets/notes.txt", notes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/datasets/notes.txt"
    await runner.cleanup()


def step(kind: str, **params: object) -> dict[str, object]:
    return {"type": kind, "parameters": params}


async def test_task_setup_on_a_real_desktop(
    desktop: Desktop, client: GuestClient, asset_url: str, tmp_path: Path
) -> None:
    notes = desktop.root / "notes.txt"
    stamp = desktop.root / "stamp.txt"
    config = [
        step("download", files=[{"url": asset_url, "path": str(notes)}]),
        step(
            "execute",
            command=[
                "sh",
                "-c",
                "echo {SCREEN_WIDTH}x{SCREEN_HEIGHT} "
                "{SCREEN_WIDTH_HALF},{SCREEN_HEIGHT_HALF} {CLIENT_PASSWORD} "
                f"| tee {stamp}",
            ],
            stdout="stamp.out",
        ),
        step("open", path=str(notes)),
        step("launch", command=["xmessage", "-title", "cua-other", "another window"]),
        # wait until the second window exists and has taken the focus
        step(
            "execute",
            command="xdotool getactivewindow getwindowname",
            shell=True,
            until={"stdout": "cua-other"},
        ),
        step("activate_window", window_name="notes.txt"),
        step(
            "execute",
            command=["xdotool", "getactivewindow", "getwindowname"],
            until={"stdout": "notes.txt"},
            stdout="active.out",
        ),
    ]
    context = SetupContext(
        screen_width=WIDTH,
        screen_height=HEIGHT,
        client_password="pw",
        output_dir=tmp_path / "out",
        strict=True,
        until_deadline_s=30,
    )
    cache = FileCache(tmp_path / "cache")
    warnings = await run_setup_steps(client, config, task_id="live", cache=cache, context=context)
    assert warnings == []

    assert await client.get_file(str(notes)) == b"notes from the hub\n"
    expected = f"{WIDTH}x{HEIGHT} {WIDTH // 2},{HEIGHT // 2} pw\n"
    assert await client.get_file(str(stamp)) == expected.encode()
    assert (tmp_path / "out" / "stamp.out").read_text() == expected
    assert "notes.txt" in (tmp_path / "out" / "active.out").read_text()
    listed = await client.execute(["wmctrl", "-l"])
    assert "Mousepad" in listed.output and "cua-other" in listed.output

    # A postconfig that activates a window that is gone: OSWorld only logs it.
    postconfig = [
        step("activate_window", window_name="no such window", strict=True),
        step("sleep", seconds=0.1),
    ]
    lenient = SetupContext(screen_width=WIDTH, screen_height=HEIGHT, window_wait_s=0.5)
    warnings = await run_setup_steps(
        client,
        postconfig,
        task_id="live",
        cache=cache,
        context=lenient,
        phase="evaluator.postconfig",
    )
    assert len(warnings) == 1
    assert warnings[0].startswith("task live: evaluator.postconfig[0] ('activate_window')")


async def test_activate_window_waits_while_windows_still_change(
    desktop: Desktop, client: GuestClient, tmp_path: Path
) -> None:
    """An app that is slow to show its window (a loaded machine) but visibly starting
    (windows appear and go) is waited for past `window_wait_s`; a desktop where
    nothing changes fails after about `window_wait_s`, not at the cap."""
    # a change every 0.5 s, four times within each 2 s wait even on a loaded machine;
    # the app's window comes after 6 s, past the old 2 s deadline
    starting = (
        "for i in $(seq 12); do xmessage -title splash-$i splash & p=$!; "
        "sleep 0.5; kill $p; done; exec xmessage -title late-app ready"
    )
    context = SetupContext(
        screen_width=WIDTH,
        screen_height=HEIGHT,
        strict=True,
        window_wait_s=2.0,
        window_wait_cap=30.0,
    )
    cache = FileCache(tmp_path / "cache")
    config = [
        step("launch", command=starting, shell=True),
        step("activate_window", window_name="late-app"),
    ]
    await run_setup_steps(client, config, task_id="slow", cache=cache, context=context)
    active = await client.execute(["xdotool", "getactivewindow", "getwindowname"])
    assert "late-app" in active.output

    import time

    began = time.monotonic()
    with pytest.raises(Exception, match="activate_window"):
        await run_setup_steps(
            client,
            [step("activate_window", window_name="never-there")],
            task_id="still",
            cache=cache,
            context=context,
        )
    assert time.monotonic() - began < 30.0  # about 2 s; the cap would be 60 s


async def test_activate_window_waits_while_the_launched_app_runs(
    desktop: Desktop, client: GuestClient, tmp_path: Path
) -> None:
    """An app that shows nothing for a while (VS Code's `code` starting code-server
    on a loaded machine) is waited for as long as its process runs, past the waits
    that no window change would have ended; an app that exited is not."""
    import time

    context = SetupContext(
        screen_width=WIDTH,
        screen_height=HEIGHT,
        strict=True,
        window_wait_s=1.0,
        window_wait_cap=30.0,
    )
    cache = FileCache(tmp_path / "cache")
    quiet = "sleep 4; exec xmessage -title quiet-app ready"  # 4 windows' waits of silence
    began = time.monotonic()
    await run_setup_steps(
        client,
        [
            step("launch", command=quiet, shell=True),
            step("activate_window", window_name="quiet-app"),
        ],
        task_id="quiet",
        cache=cache,
        context=context,
    )
    assert time.monotonic() - began >= 3.5
    began = time.monotonic()
    with pytest.raises(Exception, match="activate_window"):
        await run_setup_steps(
            client,
            [
                step("launch", command="true", shell=True),
                step("activate_window", window_name="gone-app"),
            ],
            task_id="gone",
            cache=cache,
            context=context,
        )
    assert time.monotonic() - began < 15.0  # about 2 waits; the cap would be 30 s
