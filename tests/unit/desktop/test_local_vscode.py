"""The desktop's `code` (code-server in a Chromium app window) as pure logic: how
the sandbox gets it, and what the script runs for each command line, against a
stand-in install, a stand-in browser and a listening socket on 127.0.0.1 in place
of code-server (tests/integration/desktop/test_vscode.py runs the real one)."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from cua_rl.desktop.providers.local import vscode as local_vscode
from cua_rl.desktop.providers.local.sandbox import (
    CODE_SERVER_MOUNT,
    SHIM_BIN,
    ListenFds,
    SandboxFds,
    SandboxSpec,
    bwrap_argv,
)

SPEC = SandboxSpec(
    desktop_id="d1",
    display=201,
    width=800,
    height=600,
    window_manager="openbox",
    uid=1001,
    gid=1001,
    user="user",
    guest_port=4321,
)
LISTEN = ListenFds(guest=5, cdp=6)
DEADLINE_S = 10.0


def _pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def test_code_is_a_file_beside_the_shims_and_the_install_is_bound_read_only() -> None:
    spec = dataclasses.replace(SPEC, code_server="/opt/cua-rl/code-server-x")
    fds = SandboxFds(token=7, shim=8, code=10)
    argv = bwrap_argv(spec, {}, fds, "/stage", LISTEN)
    assert ("/opt/cua-rl/code-server-x", CODE_SERVER_MOUNT) in _pairs(argv, "--ro-bind")
    assert ("10", f"{SHIM_BIN}/code") in _pairs(argv, "--file")
    assert 10 in fds.all()
    # no install, or no script: neither the bind nor the command
    for spec_, fds_ in ((SPEC, fds), (spec, SandboxFds(token=7, shim=8))):
        argv = bwrap_argv(spec_, {}, fds_, "/stage", LISTEN)
        assert CODE_SERVER_MOUNT not in argv and f"{SHIM_BIN}/code" not in argv


def test_install_counts_only_once_setup_marked_it_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_vscode, "CODE_SERVER_DIR", str(tmp_path))
    assert local_vscode.install_dir() is None
    (tmp_path / local_vscode.READY_MARK).touch()
    assert local_vscode.install_dir() == str(tmp_path)


@pytest.fixture
def server() -> Iterator[int]:
    """A listener where code-server would be: the script finds it up and starts none."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


@pytest.fixture
def desktop(tmp_path: Path, server: int) -> dict[str, object]:
    """A home, the script for a stand-in install whose `node` and `google-chrome`
    write their argv (one per line) to a file each."""
    root, bin_dir, home = tmp_path / "root", tmp_path / "bin", tmp_path / "home"
    (root / "node" / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    home.mkdir()
    for path, log in (
        (root / "node" / "bin" / "node", "node.argv"),
        (bin_dir / "google-chrome", "chrome.argv"),
    ):
        path.write_text(
            f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path / log}.tmp\n'
            f"mv {tmp_path / log}.tmp {tmp_path / log}\n"
        )
        path.chmod(0o755)
    script = tmp_path / "code"
    script.write_text(local_vscode.code_script(port=server, root=str(root)))
    script.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
    }
    return {"tmp": tmp_path, "script": str(script), "env": env, "home": home, "root": root}


def _run(desktop: dict[str, object], *args: str, log: str) -> list[str]:
    """Run `code ARGS` and return what the stand-in named `log` was started with."""
    tmp = Path(str(desktop["tmp"]))
    (tmp / log).unlink(missing_ok=True)
    done = subprocess.run(
        [str(desktop["script"]), *args],
        env=desktop["env"],  # type: ignore[arg-type]
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        cwd=str(desktop["home"]),
    )
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + DEADLINE_S  # the browser is started detached
    while not (tmp / log).exists():
        assert time.monotonic() < deadline, f"{log} never ran: {done.stderr}"
        time.sleep(0.05)
    return (tmp / log).read_text().splitlines()


def _url(argv: list[str]) -> urllib.parse.SplitResult:
    app = [a for a in argv if a.startswith("--app=")]
    assert len(app) == 1, argv
    return urllib.parse.urlsplit(app[0].removeprefix("--app="))


def test_cli_commands_run_code_server_on_vs_codes_directories(desktop: dict) -> None:
    home = desktop["home"]
    argv = _run(desktop, "--install-extension", "/home/user/test.vsix", log="node.argv")
    assert argv[0] == f"{desktop['root']}/node_modules/code-server/out/node/entry.js"
    assert argv[1:5] == [
        "--user-data-dir",
        f"{home}/.config/Code",
        "--extensions-dir",
        f"{home}/.vscode/extensions",
    ]
    assert argv[-2:] == ["--install-extension", "/home/user/test.vsix"]
    assert _run(desktop, "--list-extensions", log="node.argv")[-1] == "--list-extensions"
    assert not (desktop["tmp"] / "chrome.argv").exists()  # no window for these


def test_a_folder_opens_as_the_folder_in_an_app_window_of_its_own_profile(
    desktop: dict, server: int
) -> None:
    (desktop["home"] / "my project").mkdir()
    argv = _run(desktop, "my project", log="chrome.argv")
    url = _url(argv)
    assert (url.scheme, url.netloc, url.path) == ("http", f"127.0.0.1:{server}", "/")
    assert urllib.parse.parse_qs(url.query) == {"folder": [f"{desktop['home']}/my project"]}
    profiles = [a for a in argv if a.startswith("--user-data-dir=")]
    assert profiles == [f"--user-data-dir={desktop['home']}/.cache/code-window"]
    assert (desktop["home"] / ".config" / "Code" / "User").is_dir()


def test_a_workspace_file_opens_as_the_workspace_and_a_file_in_an_empty_window(
    desktop: dict,
) -> None:
    home = desktop["home"]
    (home / "p.code-workspace").write_text("{}")
    query = urllib.parse.parse_qs(
        _url(_run(desktop, str(home / "p.code-workspace"), log="chrome.argv")).query
    )
    assert query == {"workspace": [f"{home}/p.code-workspace"]}
    query = urllib.parse.parse_qs(_url(_run(desktop, "-n", "new.py", log="chrome.argv")).query)
    assert query["ew"] == ["true"]
    (opened,) = query["payload"]
    assert opened.startswith('[["openFile","vscode-remote://') and opened.endswith(
        f'{home}/new.py"]]'
    )


def test_no_path_lets_code_server_restore_the_last_folder(desktop: dict, server: int) -> None:
    url = _url(_run(desktop, log="chrome.argv"))
    assert (url.path, url.query) == ("/", "")
    assert not os.path.exists(desktop["home"] / ".config" / "code-server")
