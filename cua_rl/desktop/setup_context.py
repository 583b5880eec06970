"""What setup steps (and the evaluator's getters) know about the desktop they run
on: screen size, password, where outputs go. A neutral module: both the setup
steps and the evaluation registry use it, and neither imports the other for it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class SetupContext:
    """What steps need to know about the desktop and the host they run from."""

    screen_width: int
    screen_height: int
    client_password: str = "password"
    """Substituted for {CLIENT_PASSWORD}; OSWorld images use `password`."""
    output_dir: Path | None = None
    """Where `stdout`/`stderr` of execute steps are written (OSWorld's cache_dir,
    read back by the evaluator's `cache_file` getter). Needed only by such steps."""
    local_root: Path | None = None
    """Base of relative `local_path`s of upload_file steps (default: the cwd)."""
    strict: bool = False
    """Raise on failures of best-effort steps of the task's setup (`config`) too (local
    task suites, debugging); an evaluator's postconfig only warns (see setup_steps)."""
    execute_timeout_s: float = 120.0
    window_wait_s: float = 15.0
    """How long activate_window waits for its window once the desktop's windows stop
    changing: tasks activate an app they have just launched, which may not have
    mapped its window or set its title yet (a loaded machine can take longer; the
    wait goes on while windows still appear or change title, or while the app the
    setup launched still runs, up to `window_wait_cap` times this)."""
    window_wait_cap: float = 4.0
    """The longest activate_window waits, in units of `window_wait_s`."""
    until_deadline_s: float = 60.0
    """Give up re-running an execute step whose `until` condition never holds."""

    def placeholders(self) -> dict[str, str]:
        return {
            "SCREEN_WIDTH": str(self.screen_width),
            "SCREEN_HEIGHT": str(self.screen_height),
            "SCREEN_WIDTH_HALF": str(self.screen_width // 2),
            "SCREEN_HEIGHT_HALF": str(self.screen_height // 2),
            "CLIENT_PASSWORD": self.client_password,
        }
