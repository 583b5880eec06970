"""VS Code in a local sandboxed desktop, as OSWorld's vs_code tasks use it:
`code ~/project` opens a window titled "project - Visual Studio Code"
(code-server in a Chromium app window, `local.vscode`), and `code
--list-extensions` answers without one. One desktop for the module; skipped
unless ./setup.sh has built code-server."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from tests_support.desktops import local_desktops_unavailable

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.local import vscode as local_vscode
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.provider import LocalProvider

pytestmark = [pytest.mark.desktop, pytest.mark.asyncio(loop_scope="module")]

if (_reason := local_desktops_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)
if local_vscode.install_dir() is None:
    pytest.skip(
        f"code-server is not installed at {local_vscode.CODE_SERVER_DIR} "
        "(./setup.sh as root builds it)",
        allow_module_level=True,
    )
if not any(shutil.which(n) for n in ("google-chrome", "chromium")):
    pytest.skip(
        "no Chromium to show VS Code in (apt-get install chromium)", allow_module_level=True
    )

DEADLINE_S = 30.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def guest(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GuestClient]:
    provider = LocalProvider(
        LocalProviderConfig(state_dir=tmp_path_factory.mktemp("vscode") / "state")
    )
    handle = await provider.start("vscode")
    try:
        yield provider.client(handle)
    finally:
        await provider.stop(handle)
        await provider.close()


async def _windows(guest: GuestClient, field: int = 3) -> list[str]:
    """The desktop's window titles (`field` 0: their ids)."""
    result = await guest.execute(["wmctrl", "-l"], timeout=10)
    return [
        line.split(None, 3)[field]
        for line in (result.output or "").splitlines()
        if len(line.split(None, 3)) == 4
    ]


async def test_code_opens_a_folder_in_a_visual_studio_code_window(guest: GuestClient) -> None:
    await guest.execute(
        "mkdir -p ~/project && echo 'x = 1' > ~/project/main.py", shell=True, timeout=10
    )
    # What tasks do: `launch` the command (it returns once the browser is started).
    done = await guest.execute(["code", "/home/user/project"], timeout=40)
    assert done.returncode == 0, done
    deadline = time.monotonic() + DEADLINE_S
    while not any(name.endswith("project - Visual Studio Code") for name in await _windows(guest)):
        if time.monotonic() > deadline:
            log = await guest.execute(
                "tail -5 /tmp/runtime-user/code-server/*.log", shell=True, timeout=10
            )
            pytest.fail(
                f"no VS Code window within {DEADLINE_S:.0f} s: "
                f"{await _windows(guest)}; {log.output}"
            )
        await asyncio.sleep(0.2)
    # The window is VS Code's own Chromium profile, not the Chrome tasks' one.
    profiles = await guest.execute(
        "ls -d ~/.cache/code-window ~/.config/google-chrome", shell=True, timeout=10
    )
    assert "code-window" in (profiles.output or "")
    assert "google-chrome" not in (profiles.output or "")


async def test_cli_answers_without_a_window(guest: GuestClient) -> None:
    before = await _windows(guest, field=0)  # titles change as the workbench loads
    listed = await guest.execute("code --list-extensions; echo rc=$?", shell=True, timeout=30)
    assert "rc=0" in (listed.output or ""), listed
    version = await guest.execute(["code", "--version"], timeout=30)
    assert version.returncode == 0 and local_vscode.CODE_SERVER_VERSION in (version.output or "")
    assert await _windows(guest, field=0) == before
    # code-server's own config file stays out of the home
    assert (
        await guest.execute(["test", "-e", "/home/user/.config/code-server"], timeout=10)
    ).returncode != 0
