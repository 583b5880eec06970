"""A minimal QMP client (QEMU's JSON machine protocol on a Unix socket), enough
to save and restore VM snapshots.

Snapshots go through `human-monitor-command` (`savevm`/`loadvm`): they are
synchronous, write the VM state into the desktop's qcow2 overlay, and exist in
every QEMU version we meet (the job-based `snapshot-save` needs QEMU >= 6.0).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from pathlib import Path
from typing import Any

from cua_rl.errors import DesktopError

log = logging.getLogger(__name__)


async def qmp_command(
    socket_path: Path, execute: str, timeout: float = 120.0, **arguments: Any
) -> Any:
    """Connect, negotiate, run one command, return its `return` value."""

    async def talk() -> Any:
        reader, writer = await asyncio.open_unix_connection(str(socket_path), limit=1 << 22)
        try:
            await reader.readline()  # greeting
            for cmd in (
                {"execute": "qmp_capabilities"},
                {"execute": execute, **({"arguments": arguments} if arguments else {})},
            ):
                writer.write(json.dumps(cmd).encode() + b"\n")
                await writer.drain()
                while True:  # skip asynchronous events
                    reply = json.loads(await reader.readline() or b"{}")
                    if "return" in reply or "error" in reply or not reply:
                        break
                if "return" not in reply:
                    raise DesktopError(f"QMP {cmd['execute']} on {socket_path}: {reply}")
            return reply["return"]
        finally:
            writer.close()

    try:
        return await asyncio.wait_for(talk(), timeout)
    except TimeoutError:
        raise DesktopError(
            f"QMP {execute} on {socket_path}: no answer in {timeout:.0f} s"
        ) from None
    except OSError as exc:
        raise DesktopError(f"QMP {execute} on {socket_path}: {exc}") from exc


async def hmp(socket_path: Path, command_line: str, timeout: float = 300.0) -> str:
    """A monitor command; its text output, which is empty on success for savevm/loadvm."""
    out = await qmp_command(
        socket_path, "human-monitor-command", timeout=timeout, **{"command-line": command_line}
    )
    return str(out or "").strip()


async def qmp_with_fd(
    socket_path: Path, fd: int, fdname: str, execute: str, timeout: float = 60.0, **arguments: Any
) -> Any:
    """Hand QEMU an open file descriptor as `fdname` (QMP `getfd`, the descriptor sent
    as SCM_RIGHTS) and run one command that uses it on the same connection (a named
    fd belongs to its monitor), e.g. `migrate` with uri `fd:NAME`. QEMU then reads or
    writes a file we opened, whichever account it runs as (`-runas`)."""
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(_with_fd, str(socket_path), fd, fdname, execute, arguments, timeout),
            timeout + 5,
        )
    except TimeoutError:
        raise DesktopError(
            f"QMP {execute} on {socket_path}: no answer in {timeout:.0f} s"
        ) from None
    except OSError as exc:
        raise DesktopError(f"QMP {execute} on {socket_path}: {exc}") from exc


def _with_fd(
    path: str, fd: int, fdname: str, execute: str, arguments: dict[str, Any], timeout: float
) -> Any:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        lines = sock.makefile("rb")
        lines.readline()  # greeting

        def reply() -> dict[str, Any]:
            while True:  # skip asynchronous events
                answer = json.loads(lines.readline() or b"{}")
                if "return" in answer or "error" in answer or not answer:
                    return answer

        commands = [
            ({"execute": "qmp_capabilities"}, None),
            ({"execute": "getfd", "arguments": {"fdname": fdname}}, fd),
            ({"execute": execute, **({"arguments": arguments} if arguments else {})}, None),
        ]
        for command, passed in commands:
            data = json.dumps(command).encode() + b"\n"
            if passed is None:
                sock.sendall(data)
            else:
                socket.send_fds(sock, [data], [passed])
            answer = reply()
            if "return" not in answer:
                raise DesktopError(f"QMP {command['execute']} on {path}: {answer}")
        return answer["return"]
