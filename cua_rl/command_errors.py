"""How every `cua-rl` command reports an error the user can act on: one line.

The root command group (cli.py) passes whatever a command raises through
`user_message`: our own errors (`CuaRlError`, also when a task group wrapped
them in an ExceptionGroup) and the operating system refusing a file or a port
(full disk, read-only file system, permission denied, address in use) become
one message naming the path or port; anything else is a bug and keeps its
traceback. Set CUA_RL_TRACEBACK=1 to see the traceback of a translated error too.
"""

from __future__ import annotations

import errno
import re

from cua_rl.errors import CuaRlError

OS_ERRORS: dict[int, str] = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EADDRINUSE: "address already in use",
    errno.EADDRNOTAVAIL: "address not available on this machine",
    errno.ENOTDIR: "a path component is a file, not a directory",
}
"""errno -> what the user reads; the errors a user fixes outside cua-rl."""

_ADDRESS = re.compile(r"\('?([\w.:\[\]-]*)'?, (\d+)\)")


def user_message(exc: BaseException) -> str | None:
    """The one-line (for task files: one line per problem) message for `exc`, or
    None when it is not an error a user can act on (then it is a bug: traceback)."""
    found = _find(exc)
    if found is None:
        return None
    if isinstance(found, CuaRlError):
        return str(found)
    return describe_os_error(found)  # type: ignore[arg-type]


def describe_os_error(exc: OSError) -> str:
    """`PATH: no space left on device` / `port 8000 on 127.0.0.1: address already in use`."""
    what = OS_ERRORS.get(exc.errno or 0) or exc.strerror or str(exc)
    if exc.filename is not None:
        target = str(exc.filename)
        if exc.filename2 is not None:
            target += f" -> {exc.filename2}"
        return f"{target}: {what}"
    address = _ADDRESS.search(str(exc))
    if address is not None:
        return f"port {address.group(2)} on {address.group(1) or 'all addresses'}: {what}"
    return f"{what} ({exc})"


def _find(exc: BaseException) -> BaseException | None:
    """The first translatable error in `exc`, its causes and, for exception groups,
    its members (task groups wrap what failed; the user should read the message)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, CuaRlError):
            return current
        if isinstance(current, OSError) and current.errno in OS_ERRORS:
            return current
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        if current.__cause__ is not None:
            todo.append(current.__cause__)
    return None
