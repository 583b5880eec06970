"""Bounds a guest enforces, set on its command line (kept import-light for --help)."""

from __future__ import annotations

from dataclasses import dataclass

#: Default bound on one upload or download (bytes): the desktop's /tmp is RAM.
DEFAULT_MAX_UPLOAD_BYTES = 512 << 20
#: Default bound on one screen recording (seconds).
DEFAULT_RECORD_MAX_S = 1800.0
#: Default recording frame rate: enough to follow GUI actions, cheap to encode.
DEFAULT_RECORD_FPS = 10


@dataclass(frozen=True)
class GuestLimits:
    """Bounds set on the command line (see main.py for the options)."""

    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    """Largest file /setup/upload or /setup/download_file writes; larger is 413."""
    record_max_s: float = DEFAULT_RECORD_MAX_S
    """A recording stops by itself after this many seconds."""
    record_fps: int = DEFAULT_RECORD_FPS
    """Frames per second of recordings."""
