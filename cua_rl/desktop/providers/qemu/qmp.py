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
from pathlib import Path
from typing import Any

from cua_rl.errors import DesktopError

log = logging.getLogger(__name__)

async def qmp_command(socket_path: Path, execute: str, timeout: float = 120.0,
                      **arguments: Any) -> Any:
    """Connect, negotiate, run one command, return its `return` value."""
    async def talk() -> Any:
        reader, writer = await asyncio.open_unix_connection(str(socket_path), limit=1 << 22)
        try:
            await reader.readline()  # greeting
            for cmd in ({"execute": "qmp_capabilities"},
                        {"execute": execute, **({"arguments": arguments} if arguments else {})}):
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
        raise DesktopError(f"QMP {execute} on {socket_path}: no answer in {timeout:.0f} s"
                           ) from None
    except OSError as exc:
        raise DesktopError(f"QMP {execute} on {socket_path}: {exc}") from exc


async def hmp(socket_path: Path, command_line: str, timeout: float = 300.0) -> str:
    """A monitor command; its text output, which is empty on success for savevm/loadvm."""
    out = await qmp_command(socket_path, "human-monitor-command", timeout=timeout,
                            **{"command-line": command_line})
    return str(out or "").strip()
