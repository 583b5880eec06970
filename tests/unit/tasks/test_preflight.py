"""What the preflight reads from a task, and the one reason it files it under."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.providers.local import vscode as local_vscode
from cua_rl.desktop.setup_steps.chrome import EMPTY_HISTORY_URL
from cua_rl.tasks.preflight import (
    HostCapabilities,
    capabilities_for,
    first_blocker,
    local_capabilities,
    preflight,
    task_needs,
)
from cua_rl.types import TaskVariant

HUB = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main"


def _task(
    task_id: str,
    config: list[dict[str, Any]],
    evaluator: dict[str, Any] | None = None,
    domain: str = "os",
) -> TaskVariant:
    return TaskVariant(
        task_id=task_id,
        domain=domain,
        evaluator_name="default",
        instruction="x",
        config=tuple(config),
        evaluator=evaluator or {"func": "infeasible"},
    )


def _launch(*argv: str) -> dict[str, Any]:
    return {"type": "launch", "parameters": {"command": list(argv)}}


def test_needs_are_read_from_setup_and_evaluator() -> None:
    task = _task(
        "t",
        [
            {
                "type": "download",
                "parameters": {"files": [{"url": f"{HUB}/a/b.xlsx", "path": "/home/user/b.xlsx"}]},
            },
            _launch("google-chrome", "--remote-debugging-port=1337"),
            {
                "type": "execute",
                "parameters": {"command": "VLC_VERBOSE=-1 vlc --x; sudo rm -f /y", "shell": True},
            },
            {
                "type": "chrome_open_tabs",
                "parameters": {
                    "urls_to_open": ["https://www.example.com/page", "http://localhost:8080/"]
                },
            },
            {
                "type": "update_browse_history",
                "parameters": {
                    "history": [
                        {
                            "url": "https://history.example/",
                            "title": "h",
                            "visit_time_from_now_in_seconds": 5,
                        }
                    ]
                },
            },
        ],
        {
            "func": "compare_table",
            "result": {"type": "vm_file", "path": "/home/user/b.xlsx"},
            "expected": {"type": "cloud_file", "path": f"{HUB}/a/gold.xlsx", "dest": "g.xlsx"},
        },
        domain="libreoffice_calc",
    )
    needs = task_needs(task)
    assert needs.assets == (f"{HUB}/a/b.xlsx", EMPTY_HISTORY_URL, f"{HUB}/a/gold.xlsx")
    assert needs.apps == ("google-chrome", "vlc", "libreoffice")
    assert needs.root and "sudo rm" in needs.root[0]
    # the loopback page and the history entries (only written to a database) need no internet
    assert needs.network == ("https://www.example.com/page",)
    assert needs.credentials == ()


def test_each_task_is_filed_under_its_first_blocker(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "cache")
    asset = f"{HUB}/os/x.txt"
    local_file = tmp_path / "here.txt"
    local_file.write_text("x")
    download = {"type": "download", "parameters": {"files": [{"url": asset, "path": "/tmp/x"}]}}
    tasks = [
        _task("code", [_launch("code"), download]),
        _task(
            "creds",
            [
                {"type": "googledrive", "parameters": {"settings_file": "s.json"}},
                {"type": "execute", "parameters": {"command": "sudo true", "shell": True}},
            ],
        ),
        _task(
            "root",
            [{"type": "execute", "parameters": {"command": "sudo true", "shell": True}}, download],
        ),
        _task(
            "web",
            [
                {
                    "type": "chrome_open_tabs",
                    "parameters": {"urls_to_open": ["https://example.com/"]},
                },
                download,
            ],
        ),
        _task("asset", [download]),
        _task(
            "local-file",
            [
                {
                    "type": "download",
                    "parameters": {"files": [{"url": local_file.as_uri(), "path": "/tmp/x"}]},
                }
            ],
        ),
        _task("plain", []),
    ]
    host = HostCapabilities("local", lambda app: app != "code", root=False)
    result = preflight(tasks, host, cache)
    assert result.not_runnable == {
        "unsupported_app:code": ["code"],
        "credentials": ["creds"],
        "needs_root": ["root"],
        "network": ["web"],
        "assets_uncached": ["asset"],
    }
    assert result.runnable == ["local-file", "plain"]
    assert result.summary()["runnable"] == 2 and result.summary()["total"] == 7

    source = tmp_path / "x.txt"
    source.write_text("x")
    cache.seed(asset, source)
    assert "asset" in preflight(tasks, host, cache).runnable
    # OSWorld's VM images have every app and sudo; docker's default network reaches
    # the internet, qemu's restricted one does not
    vm = preflight(tasks, capabilities_for("docker"), cache)
    assert vm.not_runnable == {"credentials": ["creds"]}
    assert preflight(tasks, capabilities_for("qemu"), cache).not_runnable == {
        "credentials": ["creds"],
        "network": ["web"],
    }


@pytest.mark.parametrize(
    ("config", "network"),
    [
        ({"type": "local"}, False),
        ({"type": "local", "network": True}, True),
        ({"type": "container"}, False),
        ({"type": "docker"}, True),
        ({"type": "docker", "extra_args": ["--network", "none"]}, False),
        ({"type": "docker", "extra_args": ["--net=none"]}, False),
        ({"type": "qemu"}, False),
        ({"type": "qemu", "restrict_network": False}, True),
        ({"type": "aws"}, True),
    ],
)
def test_the_provider_config_says_whether_its_desktops_have_a_network(
    config: dict, network: bool, tmp_path: Path
) -> None:
    from pydantic import TypeAdapter

    from cua_rl.desktop.providers.config import ProviderConfig

    provider = TypeAdapter(ProviderConfig).validate_python(config)
    assert provider.has_network is network
    web = _task(
        "web",
        [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://example.com/"]}}],
    )
    check = preflight([web], capabilities_for(provider), FileCache(tmp_path / "cache"))
    assert ("web" in check.not_runnable.get("network", [])) is not network


def test_local_desktops_offer_vs_code_when_code_server_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "code-server"
    monkeypatch.setattr(local_vscode, "CODE_SERVER_DIR", str(root))
    assert not capabilities_for("local").has_app("code")
    task = _task("vs", [_launch("code")])
    blocker = first_blocker(
        task, task_needs(task), capabilities_for("local"), FileCache(tmp_path / "cache")
    )
    assert blocker is not None and blocker[0] == "unsupported_app:code"
    assert "setup.sh" in blocker[1]
    root.mkdir()  # half built: the ready mark is written last
    assert not capabilities_for("local").has_app("code")
    (root / local_vscode.READY_MARK).touch()
    assert capabilities_for("local").has_app("code")


def test_gnome_only_windows_and_shortcuts_need_their_apps() -> None:
    task = _task(
        "t",
        [
            {
                "type": "execute",
                "parameters": {
                    "command": [
                        "python",
                        "-c",
                        "import pyautogui; pyautogui.hotkey('ctrl', 'alt', 't')",
                    ]
                },
            },
            {"type": "activate_window", "parameters": {"window_name": "Terminal"}},
            {
                "type": "activate_window",
                "parameters": {"window_name": "notes.txt (~/Desktop) - gedit"},
            },
        ],
    )
    assert task_needs(task).apps == ("gnome-terminal", "gedit")
    script = _task(
        "s",
        [
            {
                "type": "execute",
                "parameters": {
                    "command": "export DBUS_SESSION_BUS_ADDRESS='unix:path=/run/user/1000/bus'\n"
                    "gnome-terminal --maximize",
                    "shell": True,
                },
            }
        ],
    )
    assert task_needs(script).apps == ("gnome-terminal",)


@pytest.mark.parametrize("app", ["gnome-terminal", "nautilus", "gedit"])
def test_gnome_apps_count_when_installed(
    app: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No hard-coded verdict: the host's PATH decides (setup.sh installs the three).
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not local_capabilities().has_app(app)
    exe = tmp_path / app
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert local_capabilities().has_app(app)


def test_a_url_in_the_instruction_needs_the_internet_even_a_hub_link() -> None:
    from dataclasses import replace

    base = _task("t", [])
    clone = replace(base, instruction='Please clone "https://github.com/x/y" to /home/user.')
    fetch = replace(base, instruction=f"Download the image from {HUB}/m/cat.png, then open it.")
    local = replace(base, instruction="Open http://localhost:8000/ in Chrome.")
    assert task_needs(clone).network == ("https://github.com/x/y",)
    assert task_needs(fetch).network == (f"{HUB}/m/cat.png",)
    assert task_needs(fetch).assets == ()
    assert task_needs(local).network == ()


def test_known_local_gaps_are_not_runnable_locally_but_are_on_vm_images(tmp_path: Path) -> None:
    from cua_rl.desktop.file_cache import FileCache
    from cua_rl.tasks.preflight import capabilities_for, local_gaps

    gaps = local_gaps()
    assert gaps and all(isinstance(v, str) and v for v in gaps.values())
    task_id = next(iter(gaps))
    task = _task(task_id, [])
    cache = FileCache(tmp_path)
    local = preflight([task], local_capabilities(), cache)
    assert local.not_runnable == {"local_gap": [task_id]}
    assert local.details[task_id] == f"local_gap: {gaps[task_id]}"
    assert preflight([task], capabilities_for("qemu"), cache).runnable == [task_id]
