"""What running something on a desktop returns: `ExecResult`, the outcome of a command,
a script or pyautogui code as the guest reports it.

It is apart from desktop/client.py (`GuestClient`, which produces it) because more
reads it than talks to a guest: the setup-step parameters (`setup_step_params.py`,
used by task validation without a desktop) and `manage.py` name the type without
needing the HTTP client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ExecResult:
    """Outcome of a command or of pyautogui code run on the desktop."""

    status: str
    """`success`, `error` or `timeout`."""
    output: str = ""
    error: str = ""
    returncode: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "success" and self.returncode in (0, None)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExecResult:
        return cls(
            status=str(data.get("status", "error")),
            output=str(data.get("output") or ""),
            error=str(data.get("error") or data.get("message") or ""),
            returncode=data.get("returncode"),
        )
