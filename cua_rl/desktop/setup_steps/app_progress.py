"""Whether an app a task's setup launched is still starting: what `activate_window`
waits on (setup_steps/core.py).

A task launches an app and activates its window in the next step. On a loaded
machine the window may take longer than any fixed wait: VS Code's `code` first
starts code-server (up to 30 s) before its browser window appears. So the wait goes
on while there is progress: the desktop's window list changes (a window appeared,
closed or was retitled), or a process of a command launched earlier in the same
setup still runs (the app has not given up). Both are read through the guest's
`/execute` (`wmctrl -l`, `ps`), which OSWorld's guest has too; when a desktop cannot
say, there is no progress and the wait ends as before.
"""

from __future__ import annotations

import os

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.setup_step_params import Command
from cua_rl.errors import GuestError


def launched_text(command: Command, shell: bool) -> str:
    """How a launched command shows in `ps -o args`: a shell command as written (it
    runs as `sh -c COMMAND`), an argv with its program's base name (a script runs as
    `/bin/bash /path/to/code ARGS`)."""
    if isinstance(command, str):
        return command.strip()
    if not command:
        return ""
    return " ".join([os.path.basename(command[0]), *command[1:]]).strip()


async def window_list(client: GuestClient) -> str | None:
    """The desktop's windows (`wmctrl -l` without ids), or None when it cannot say."""
    try:
        result = await client.execute(["wmctrl", "-l"], timeout=10)
    except GuestError:
        return None
    if result.returncode != 0:
        return None
    return "\n".join(
        line.split(None, 3)[-1]
        for line in (result.output or "").splitlines()
        if len(line.split(None, 3)) == 4
    )


async def launched_alive(client: GuestClient, launched: list[str]) -> bool:
    """Whether a process of one of the `launched` commands still runs on the desktop
    (False when none was launched or the desktop cannot say)."""
    wanted = [text for text in launched if text]
    if not wanted:
        return False
    try:
        result = await client.execute(["ps", "-eo", "args="], timeout=10)
    except GuestError:
        return False
    if result.returncode != 0:
        return False
    lines = [line.strip() for line in (result.output or "").splitlines()]
    return any(runs_launched(line, text) for line in lines for text in wanted)


def runs_launched(line: str, text: str) -> bool:
    """Whether the process whose `ps -o args` is `line` runs the launched command
    `text`: the command itself, `sh -c TEXT` (a shell command), its program by a path
    (`/usr/bin/code ARGS`, or a script `/bin/bash /path/to/code ARGS`), or that
    program with more arguments after the launched ones. A command only named inside
    another's arguments does not count: a desktop's `ps` may list the host's
    processes, and a short command such as `true` is part of many shell lines
    (`bash -c 'make || true'`, `while true; do`)."""
    if not text:
        return False
    if line == text or line.endswith(f" -c {text}") or line.endswith(f"/{text}"):
        return True
    return line.startswith(f"{text} ") or f"/{text} " in line
