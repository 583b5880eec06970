"""Typed exceptions for the whole package.

Every message names the file, field or request that was wrong and what was
expected, so that a user can fix the input without reading our code.
"""

from __future__ import annotations


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


class InferenceError(CuaRlError):
    """A model server could not serve a request."""


class InferenceUnavailable(InferenceError):
    """The replica failed (connection, timeout, 5xx) or no replica came back in time."""


class InferenceRequestError(InferenceError):
    """The server rejected the request (4xx); `param` names the offending field."""

    def __init__(self, message: str, status: int, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
