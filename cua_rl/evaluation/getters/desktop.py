"""Getters that ask the desktop (or the spec itself) for a value rather than a file.

Return shapes follow OSWorld so that metrics written against it keep working:
`vm_command_line` gives the command's output text (None when the guest refused
the request), `vm_screen_size`/`vm_window_size` give `{"width", "height"}`
objects, `list_directory` the guest's directory tree object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cua_rl.errors import GuestError, GuestUnavailable
from cua_rl.evaluation.getters.files import flag, is_flag
from cua_rl.evaluation.registry import Finding, GetterContext, getter


def _check_command(config: Mapping[str, Any]) -> list[Finding]:
    command = config["command"]
    problems: list[Finding] = []
    if not (isinstance(command, str) and command) and not (
        isinstance(command, list) and command and all(isinstance(c, str) for c in command)
    ):
        problems.append((".command", "a command line string or a non-empty array of strings"))
    if not is_flag(config.get("shell", False)):
        problems.append((".shell", f"true or false, got {config['shell']!r}"))
    return problems


@getter("rule", required=("rules",))
async def rule(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """The spec's own `rules` value: expected values written into the task."""
    return config["rules"]


async def _execute(ctx: GetterContext, config: dict[str, Any]) -> Any:
    try:
        return await ctx.client.execute(
            config["command"],
            shell=flag(config.get("shell", False)),
            timeout=float(config.get("timeout", 30.0)),
        )
    except GuestUnavailable:
        raise  # a dead desktop aborts the episode; it is not the agent's failure
    except GuestError:
        return None  # OSWorld: a non-200 answer makes the getter return None


@getter("vm_command_line", required=("command",), check=_check_command)
async def vm_command_line(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """Run a command on the desktop; its standard output."""
    result = await _execute(ctx, config)
    return None if result is None else result.output


@getter("vm_command_error", required=("command",), check=_check_command)
async def vm_command_error(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """Run a command on the desktop; its standard error."""
    result = await _execute(ctx, config)
    return None if result is None else result.error


@getter("vm_terminal_output")
async def vm_terminal_output(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """Text of the terminal window on screen (None when there is none)."""
    return await ctx.client.terminal_output()


@getter("list_directory", required=("path",))
async def list_directory(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """The directory tree under `path` as the guest reports it."""
    data = await ctx.client.list_directory(config["path"])
    if isinstance(data, Mapping) and "directory_tree" in data:
        return data["directory_tree"]
    return data


@getter("vm_screen_size")
async def vm_screen_size(ctx: GetterContext, config: dict[str, Any]) -> dict[str, int]:
    width, height = await ctx.client.screen_size()
    return {"width": width, "height": height}


@getter("vm_window_size", required=("app_class_name",))
async def vm_window_size(ctx: GetterContext, config: dict[str, Any]) -> dict[str, int] | None:
    """Size of the first window of that WM class, or None when there is none."""
    return await ctx.client.window_size(config["app_class_name"])


@getter("accessibility_tree")
async def accessibility_tree(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """The desktop's accessibility tree as OSWorld's XML text."""
    return await ctx.client.accessibility_tree()
