"""Parameters of each OSWorld setup/postconfig step type, as pydantic models.

One model per step type is the single definition of its parameters: task
validation (no desktop) and the runner (`setup_steps/core.py`) both parse through it.
Names, defaults and accepted shapes are OSWorld's: a command is an argv list or
a string, `shell` may be written as the string "true" (some OSWorld tasks do),
and unknown parameters are errors because OSWorld passes them on as keyword
arguments and would fail on them too.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from cua_rl.desktop.exec_result import ExecResult


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("expected a non-empty string")
    return value


def _argv_or_line(value: Any) -> Any:
    # Checked before the union so the message says what a command is, not why
    # each union member failed.
    argv = isinstance(value, list) and value and all(isinstance(v, str) for v in value)
    line = isinstance(value, str) and value.strip()
    if not (argv or line):
        raise ValueError("expected a non-empty argv list of strings or a command string")
    return value


def _number(value: Any) -> Any:
    # pydantic would read "2" or True as seconds; a task file that says so is wrong.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a number")
    return value


def _file_name(value: str) -> str:
    if value and ("/" in value or "\\" in value or value in (".", "..")):
        raise ValueError("expected a plain file name (it is written into the output directory)")
    return value


Text = Annotated[str, AfterValidator(_not_blank)]
"""A non-empty string."""
Command = str | list[str]
"""An argv list, or a command line (split with shlex unless shell is true)."""
CommandField = Annotated[Command, BeforeValidator(_argv_or_line)]
Seconds = Annotated[float, BeforeValidator(_number), Field(ge=0)]
FileName = Annotated[str, AfterValidator(_file_name)]


class StepParams(BaseModel):
    """Base of every step's parameters: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class DownloadFile(StepParams):
    url: Text
    """http(s) URL, file:// URL or host path; fetched through the host FileCache."""
    path: Text
    """Destination path on the desktop."""


class DownloadParams(StepParams):
    files: list[DownloadFile]


class UploadFile(StepParams):
    local_path: Text
    """Host path (relative ones are resolved against SetupContext.local_root)."""
    path: Text


class UploadFileParams(StepParams):
    files: list[UploadFile]


class OpenParams(StepParams):
    path: Text
    """File on the desktop, opened with its default application."""


class LaunchParams(StepParams):
    command: CommandField
    shell: bool = False


class Until(StepParams):
    """Re-run an execute step until one of the given conditions holds."""

    returncode: int | None = None
    stdout: str | None = None
    """Substring the output must contain."""
    stderr: str | None = None

    def met_by(self, result: ExecResult) -> bool:
        if self.returncode is None and self.stdout is None and self.stderr is None:
            return True  # OSWorld treats an empty `until` as no condition
        return (
            (self.returncode is not None and result.returncode == self.returncode)
            or (self.stdout is not None and self.stdout in result.output)
            or (self.stderr is not None and self.stderr in result.error)
        )


class ExecuteParams(StepParams):
    """Parameters of `execute` and its alias `command`."""

    command: CommandField
    """Placeholders such as {SCREEN_WIDTH} and {CLIENT_PASSWORD} are substituted."""
    shell: bool = False
    stdout: FileName = ""
    """If set, the command's output is saved under this name in SetupContext.output_dir."""
    stderr: FileName = ""
    until: Until | None = None


class ExecuteWithVerificationParams(StepParams):
    command: CommandField
    shell: bool = False
    verification: dict[str, Any] | None = None
    """Guest-side checks, e.g. {"window_exists": "...", "command_success": "..."}."""
    max_wait_time: Annotated[float, BeforeValidator(_number), Field(gt=0)] = 10.0
    check_interval: Annotated[float, BeforeValidator(_number), Field(gt=0)] = 1.0


class SleepParams(StepParams):
    seconds: Seconds


class ActivateWindowParams(StepParams):
    window_name: Text
    strict: bool = False
    """Match the whole title instead of a substring."""
    by_class: bool = False
    """Match the window class instead of the title."""


class CloseWindowParams(ActivateWindowParams):
    pass


class ChangeWallpaperParams(StepParams):
    path: Text
    """Image file on the desktop."""
