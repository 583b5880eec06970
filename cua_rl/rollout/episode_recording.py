"""Screen recordings of episodes (`episode.record`), kept beside the run's data.

A recording is a by-product for people (the viewer plays it), never part of
the experiment: any failure to start or save it is logged in one line and the
episode goes on. The file is RUN_DIR/recordings/<trajectory id>.mp4, the path
the viewer looks for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from cua_rl.desktop.client import GuestClient
from cua_rl.errors import GuestError, GuestUnavailable

log = logging.getLogger(__name__)

RECORDINGS_DIR = "recordings"
#: Bound on stopping a recording and fetching it, so a sick guest costs little.
END_TIMEOUT_S = 30.0


def recording_path(run_dir: Path, trajectory_id: str) -> Path:
    return run_dir / RECORDINGS_DIR / f"{trajectory_id}.mp4"


class EpisodeRecording:
    """Start at episode start, `save` at episode end; both best-effort."""

    def __init__(self, desktop: object, path: Path) -> None:
        client = getattr(desktop, "client", None)
        self.client = client if isinstance(client, GuestClient) else None
        self.path = path
        self.started = False

    async def start(self) -> None:
        if self.client is None:
            log.warning(
                "recording %s: this desktop has no guest client; not recorded", self.path.stem
            )
            return
        try:
            try:
                await self.client.start_recording()
            except GuestUnavailable:
                raise
            except GuestError:
                # Most likely a recording a cancelled episode left running: drop it, retry once.
                with contextlib.suppress(GuestError):
                    await self.client.end_recording(timeout=END_TIMEOUT_S)
                await self.client.start_recording()
            self.started = True
        except GuestError as exc:
            log.warning(
                "recording %s: could not start (%s); episode not recorded", self.path.stem, exc
            )

    async def save(self) -> None:
        """Stop the recording and write the MP4; also frees the guest's recorder
        when the episode ended early."""
        if not self.started or self.client is None:
            return
        self.started = False
        try:
            video = await self.client.end_recording(timeout=END_TIMEOUT_S)
            await asyncio.get_running_loop().run_in_executor(None, self._write, video)
        except (GuestError, OSError) as exc:
            log.warning("recording %s: could not save (%s)", self.path.stem, exc)

    def _write(self, video: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".mp4.part")
        partial.write_bytes(video)
        partial.replace(self.path)
