"""The host side of `episode.record`: the MP4 lands at RUN_DIR/recordings/<id>.mp4,
a recording left running is replaced, and a dead guest costs one log line."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests_support.guest_server import RunningGuest
from tests_support.servers import free_port

from cua_rl.desktop.client import GuestClient
from cua_rl.rollout.episode_recording import EpisodeRecording, recording_path

pytestmark = pytest.mark.desktop


@dataclass
class _Desktop:
    client: GuestClient


async def test_recording_saved_at_the_viewer_path(osw_guest: RunningGuest, tmp_path: Path) -> None:
    async with GuestClient(osw_guest.url, osw_guest.token) as client:
        await client.start_recording()  # a recording a cancelled episode left behind
        path = recording_path(tmp_path, "traj-1")
        assert path == tmp_path / "recordings" / "traj-1.mp4"
        recording = EpisodeRecording(_Desktop(client), path)
        await recording.start()
        assert recording.started
        await recording.save()
        assert path.read_bytes()[4:8] == b"ftyp"
        assert list(path.parent.iterdir()) == [path]


async def test_dead_guest_logs_one_line_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with GuestClient(f"http://127.0.0.1:{free_port()}", "t", timeout=2) as client:
        recording = EpisodeRecording(_Desktop(client), recording_path(tmp_path, "traj-2"))
        with caplog.at_level(logging.WARNING, logger="cua_rl.rollout.episode_recording"):
            await recording.start()
            await recording.save()
    assert not recording.started
    assert len(caplog.records) == 1 and "could not start" in caplog.records[0].getMessage()
    assert not (tmp_path / "recordings").exists()
