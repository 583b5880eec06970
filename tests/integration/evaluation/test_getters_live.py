"""evaluate() with real getters against a real guest server on Xvfb."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.setup_steps import SetupContext
from cua_rl.evaluation import GetterContext, evaluate, get_getter
from cua_rl.types import Action, TaskVariant

pytestmark = pytest.mark.desktop
DONE = Action(kind="terminate", status="success")


def variant(evaluator: dict[str, Any]) -> TaskVariant:
    return TaskVariant(
        task_id="live",
        domain="os",
        evaluator_name="default",
        instruction="do",
        config=(),
        evaluator=evaluator,
        source_path="live.json",
    )


async def score(client: GuestClient, tmp_path: Path, evaluator: dict[str, Any]) -> float:
    return await evaluate(
        variant(evaluator),
        client,
        cache=FileCache(tmp_path / "cache"),
        context=SetupContext(1920, 1080, strict=True),
        last_action=DONE,
        cache_dir=tmp_path / "traj",
    )


async def test_vm_file_against_cloud_file(
    client: GuestClient, desktop: Any, tmp_path: Path
) -> None:
    on_desktop = desktop.root / "notes.txt"
    on_desktop.write_text("alpha\nbeta\n")
    gold = tmp_path / "gold.txt"
    gold.write_text("alpha\nbeta\n")
    spec = {
        "func": "compare_text_file",
        "result": {"type": "vm_file", "path": str(on_desktop), "dest": "notes.txt"},
        "expected": {"type": "cloud_file", "path": gold.as_uri(), "dest": "gold.txt"},
    }
    assert await score(client, tmp_path, spec) == 1.0
    assert (tmp_path / "traj" / "notes.txt").read_text() == "alpha\nbeta\n"
    on_desktop.write_text("alpha\n")
    assert await score(client, tmp_path, spec) == 0.0


async def test_missing_vm_file_scores_zero(
    client: GuestClient, desktop: Any, tmp_path: Path
) -> None:
    spec = {
        "func": "compare_text_file",
        "result": {
            "type": "vm_file",
            "path": str(desktop.root / "absent.txt"),
            "dest": "absent.txt",
        },
        "expected": {"type": "vm_file", "path": str(desktop.root / "token"), "dest": "token"},
    }
    assert await score(client, tmp_path, spec) == 0.0


async def test_multi_vm_file_gives_a_list_with_none(
    client: GuestClient, desktop: Any, tmp_path: Path
) -> None:
    (desktop.root / "one.txt").write_text("1")
    ctx = GetterContext(client=client, cache=FileCache(tmp_path / "c"), cache_dir=tmp_path)
    got = await get_getter("vm_file").func(
        ctx,
        {
            "multi": True,
            "gives": [0, 1],
            "path": [str(desktop.root / "one.txt"), str(desktop.root / "two.txt")],
            "dest": ["one.txt", "two.txt"],
        },
    )
    assert got == [str(tmp_path / "one.txt"), None]


async def test_postconfig_runs_before_the_getters(
    client: GuestClient, desktop: Any, tmp_path: Path
) -> None:
    target = desktop.root / "saved.txt"
    spec = {
        "postconfig": [
            {"type": "execute", "parameters": {"command": ["sh", "-c", f"printf saved > {target}"]}}
        ],
        "func": "check_include_exclude",
        "result": {"type": "vm_command_line", "command": ["cat", str(target)]},
        "expected": {"type": "rule", "rules": {"include": ["saved"], "exclude": []}},
    }
    assert await score(client, tmp_path, spec) == 1.0


async def test_command_and_screen_getters(
    client: GuestClient, desktop: Any, tmp_path: Path
) -> None:
    spec = {
        "func": ["check_include_exclude", "exact_match", "is_in_list"],
        "conj": "and",
        "result": [
            {"type": "vm_command_line", "command": "echo $((6*7))", "shell": "true"},
            {"type": "vm_screen_size"},
            {"type": "vm_command_line", "command": ["ls", str(desktop.root)]},
        ],
        "expected": [
            {"type": "rule", "rules": {"include": ["42"]}},
            {"type": "rule", "rules": {"expected": {"width": 1920, "height": 1080}}},
            {"type": "rule", "rules": {"expected": "token"}},
        ],
    }
    assert await score(client, tmp_path, spec) == 1.0


async def test_window_and_directory_getters(
    client: GuestClient, desktop: Any, tmp_path: Path
) -> None:
    ctx = GetterContext(client=client, cache=FileCache(tmp_path / "c"), cache_dir=tmp_path)
    assert await get_getter("vm_window_size").func(ctx, {"app_class_name": "NoSuchApp"}) is None
    tree = await get_getter("list_directory").func(ctx, {"path": str(desktop.root)})
    assert "token" in str(tree)


async def test_vscode_config_waits_for_the_extension_file(
    client: GuestClient, desktop: Any, tmp_path: Path
) -> None:
    # The extension writes its file some time after the command palette runs the
    # command; OSWorld sleeps 1 s and reads once, we poll (VSCODE_FILE_DEADLINE_S).
    # Here the "extension" is a shell that writes the file 3 s after it starts;
    # the palette keystrokes take about 1 s, so OSWorld would read at about 2 s.
    target = desktop.root / "vscode_out.txt"
    loop = asyncio.get_running_loop()
    started = loop.time()
    await client.launch(["sh", "-c", f"sleep 3; printf 'Python' > {target}"])
    ctx = GetterContext(client=client, cache=FileCache(tmp_path / "c"), cache_dir=tmp_path)
    got = await get_getter("vscode_config").func(
        ctx, {"vscode_extension_command": "OpenProject", "path": str(target), "dest": "out.txt"}
    )
    assert await asyncio.to_thread(Path(got).read_text) == "Python"
    assert loop.time() - started >= 2.9
