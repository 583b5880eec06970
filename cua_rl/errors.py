"""Typed exceptions for the whole package.

Every message names the file, field or request that was wrong and what was
expected, so that a user can fix the input without reading our code.

The end of the module is how every `cua-rl` command shows such an error: one line
(`user_message`, used by the CLI's root group).
"""

from __future__ import annotations

import contextlib
import errno
import re
from collections.abc import Iterator
from pathlib import Path


class CuaRlError(Exception):
    """Base of every error cua-rl raises on purpose."""


class ConfigError(CuaRlError):
    """A config file or dotted override is invalid."""


class GuestError(CuaRlError):
    """A desktop's guest server answered with an error or not at all."""


class GuestUnavailable(GuestError):
    """The guest server cannot be reached (dead desktop, network, timeout)."""


class DesktopError(CuaRlError):
    """A desktop could not be started, reset or stopped."""


class SetupStepError(CuaRlError):
    """A task setup/postconfig step is malformed or failed on the desktop."""


class TaskFormatError(CuaRlError):
    """A task, template or evaluator JSON file does not have the expected shape."""


class PortInUse(CuaRlError):
    """A server could not bind the port picked for it: another socket took it between
    the pick and the bind (cua_rl/net_ports.py retries the start on another port)."""

    def __init__(self, host: str, port: int, detail: str = "") -> None:
        super().__init__(
            f"port {host}:{port} is in use (another socket bound it after it "
            f"was picked){': ' + detail if detail else ''}"
        )
        self.host = host
        self.port = port


class FleetLost(CuaRlError):
    """A Ray run has no fleet worker left and no replacement was placed in time."""


class InferenceError(CuaRlError):
    """A model server could not serve a request."""


class InferenceUnavailable(InferenceError):
    """The replica failed (connection, timeout, 5xx) or no replica came back in time."""


class WeightTransferError(InferenceError):
    """A weight link delivered other tensors than were sent, or its receiver answered
    outside the protocol (`bench weight-sync` checks both)."""


class InferenceRequestError(InferenceError):
    """The server rejected the request (4xx); `param` names the offending field."""

    def __init__(self, message: str, status: int, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


class ModelResponseError(InferenceError):
    """A model server answered 2xx with a body we cannot use (not JSON, wrong shape,
    empty `choices`, missing logprobs, a non-integer version header).

    Not retried: the same server answers the same way again. It aborts the episode
    (policy) or the verdict (reward model) that needed it, never the run.
    """

    def __init__(self, url: str, request: str, expected: str) -> None:
        super().__init__(f"{request} {url}: expected {expected}")
        self.url = url
        self.request = request
        self.expected = expected


class CorruptImageError(GuestError):
    """Screenshot bytes from a desktop do not decode (truncated or not an image).

    A guest fault: it aborts the episode that needed the image, like a dead desktop.
    """


class RunDirError(CuaRlError):
    """A run directory cannot be used as asked (exists without --resume, not a run)."""


class RunFailed(CuaRlError):
    """A run ended without doing any of its work (e.g. every episode was given up)."""


class StoreError(CuaRlError):
    """A run store cannot be opened, read or written (corrupt, not a cua-rl
    database, full disk, read-only file system)."""


class UnknownNameError(TaskFormatError):
    """Task files use evaluator (metric/getter) or setup-step names nobody registered."""


class ResourceError(CuaRlError):
    """The operating system refused a file or port (full disk, read-only, in use)."""


class Ec2Error(DesktopError):
    """An EC2 API call failed for good; `code` is AWS's error code."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class ChromeRequirementMissing(CuaRlError):
    """A Chrome getter or setup step needs something this host or desktop lacks
    (a settings file, credentials, the network, a reachable browser)."""


class EvalExtraMissing(CuaRlError):
    """A metric needs a format library of the `eval` extra that is not installed."""


class EpisodeAborted(CuaRlError):
    """The episode cannot go on for a reason that is not the agent's fault
    (dead desktop, no model replica, broken task setup). Never a failure.
    `permanent`: trying again cannot help (a setup step failed), so it is not re-queued."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class RequestError(InferenceError, ValueError):
    """A request to our hf server has an invalid field (answered with 400); `param`
    names it with its path (e.g. `messages.0.content`)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param
        self.message = message


@contextlib.contextmanager
def naming_path(path: str | Path) -> Iterator[None]:
    """Make an OSError raised inside name `path`: a failed `write()` (ENOSPC on a
    full disk) carries no file name, and the user needs to know which file."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


class LearnerRankError(CuaRlError):
    """A rank of a learner's rank group died, failed a call or did not answer in time.

    The group is unusable afterwards (its other ranks may wait in a collective), so
    the run stops; it resumes from the last checkpoint."""


# How a command shows an error the user can act on: one line. The root command group
# (cli/root.py) passes whatever a command raises through `user_message`: our own errors
# (`CuaRlError`, also when a task group wrapped them in an ExceptionGroup) and the
# operating system refusing a file or a port (full disk, read-only file system,
# permission denied, address in use) become one message naming the path or port;
# anything else is a bug and keeps its traceback. CUA_RL_TRACEBACK=1 shows the traceback
# of a translated error too.

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
    return describe_os_error(found)  # type: ignore[arg-type]  # every other error reaching here is an OSError


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
