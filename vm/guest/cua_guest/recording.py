"""Screen recording for /start_recording and /end_recording (ffmpeg x11grab).

As OSWorld's server: one recording at a time, an MP4 of the whole display with
the pointer drawn, returned by /end_recording. Unlike it: the capture is bounded
(ffmpeg's `-t`, so a forgotten recording cannot fill the desktop's RAM-backed
/tmp), start returns once ffmpeg has opened the display and the output (no
fixed sleep), and the file lives in a private directory removed at shutdown.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import shutil
import signal
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

#: How long ffmpeg may take to open the display and the output file.
START_DEADLINE_S = 20.0
#: How long ffmpeg may take to finish the file after SIGINT.
STOP_DEADLINE_S = 20.0
#: ffmpeg prints this once input and output are set up, right before capturing.
_READY_MARK = "Output #0"


class RecordingError(Exception):
    """A recording request that cannot be served; `status` is the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Recorder:
    """Owns at most one ffmpeg capture of the display and its output file."""

    def __init__(self, max_seconds: float, fps: int) -> None:
        self.max_seconds = max_seconds
        self.fps = fps
        self._dir: Path | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=20)
        self._lock = asyncio.Lock()

    @property
    def path(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="cua-guest-recording-"))
        return self._dir / "recording.mp4"

    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def start(self, display: str, size: tuple[int, int]) -> None:
        """Start capturing `display` (width, height); 400 if one is already running."""
        async with self._lock:
            if self.running():
                raise RecordingError(400, "Recording is already in progress.")
            if shutil.which("ffmpeg") is None:
                raise RecordingError(501, "cannot record: ffmpeg is not installed")
            await self._reset()
            self.path.unlink(missing_ok=True)
            argv = [
                "ffmpeg", "-nostdin", "-hide_banner", "-nostats", "-loglevel", "info", "-y",
                "-f", "x11grab", "-draw_mouse", "1", "-framerate", str(self.fps),
                "-video_size", f"{size[0]}x{size[1]}", "-i", display,
                "-t", f"{self.max_seconds:g}",
                "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
                str(self.path),
            ]  # fmt: skip
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            self._proc = proc
            self._tail.clear()
            try:
                await asyncio.wait_for(self._until_ready(proc), START_DEADLINE_S)
            except TimeoutError:
                await self._reset()
                raise RecordingError(
                    500, f"ffmpeg did not start capturing within {START_DEADLINE_S:g} s"
                ) from None
            except RecordingError:
                await self._reset()
                raise
            self._drain = asyncio.create_task(self._drain_stderr(proc))

    async def stop(self) -> Path:
        """Finish the recording and return the MP4; 400 if none was started."""
        async with self._lock:
            proc = self._proc
            if proc is None:
                raise RecordingError(400, "No recording in progress to stop.")
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGINT)  # ffmpeg writes the index and exits
                try:
                    await asyncio.wait_for(proc.wait(), STOP_DEADLINE_S)
                except TimeoutError:
                    await self._reset()
                    raise RecordingError(
                        500, f"ffmpeg did not finish the file within {STOP_DEADLINE_S:g} s"
                    ) from None
            await self._stop_drain()
            self._proc = None
            # 255 is ffmpeg's exit status after SIGINT; 0 when -t ended the capture.
            if proc.returncode not in (0, 255) or not _nonempty(self.path):
                raise RecordingError(
                    500, f"recording failed (ffmpeg exit {proc.returncode}): {self._last_lines()}"
                )
            return self.path

    async def close(self) -> None:
        """Kill any capture and delete the recording directory (guest shutdown)."""
        async with self._lock:
            await self._reset()
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None

    async def _until_ready(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            text = line.decode(errors="replace").rstrip()
            self._tail.append(text)
            if text.startswith(_READY_MARK):
                return
        await proc.wait()
        raise RecordingError(
            500, f"ffmpeg exited with {proc.returncode} before recording: {self._last_lines()}"
        )

    async def _drain_stderr(self, proc: asyncio.subprocess.Process) -> None:
        """Keep reading ffmpeg's messages so a full pipe never stalls the capture."""
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            self._tail.append(line.decode(errors="replace").rstrip())

    async def _stop_drain(self) -> None:
        if self._drain is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._drain, 2.0)
            self._drain = None

    async def _reset(self) -> None:
        """Kill a capture that is still running and forget it."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain
            self._drain = None

    def _last_lines(self) -> str:
        return " | ".join(list(self._tail)[-3:]) or "no output"


def _nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False
