"""The host side of `episode.record`: the MP4 lands at RUN_DIR/recordings/<id>.mp4,
a recording left running is replaced, and a dead guest costs one log line."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer
from tests_support.guest_server import RunningGuest
from tests_support.servers import free_port

from cua_rl.desktop.client import GuestClient
from cua_rl.errors import EpisodeAborted
from cua_rl.inference.config import InferencePoolConfig
from cua_rl.inference.pool import InferencePool
from cua_rl.rollout.actor import run_episode
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.episode_recording import EpisodeRecording, recording_path
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import TaskVariant, TrajectoryStatus

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


class _GuestEpisodeDesktop:
    """The smallest real EpisodeDesktop: a guest, no task setup, score 0."""

    def __init__(self, client: GuestClient) -> None:
        self.client = client
        self.screen = (1920, 1080)

    async def prepare(self, variant: TaskVariant) -> None:
        self.screen = await self.client.screen_size()

    async def screenshot(self) -> bytes:
        return await self.client.screenshot("png")

    async def act(self, code: str) -> None:
        await self.client.act(code)

    async def evaluate(self, variant: TaskVariant, last_action: object) -> float:
        return 0.0


@pytest.mark.parametrize("mode", ["ok", "empty_choices"])
async def test_run_episode_with_record_stores_the_mp4(
    osw_guest: RunningGuest, tmp_path: Path, mode: str
) -> None:
    """episode.record through the real actor: a finished episode and one aborted by a
    bad model answer both leave RUN_DIR/recordings/<trajectory id>.mp4."""
    server = FakeModelServer(FakeModelConfig(fault=mode))
    await server.start()
    policy = InferencePool([server.url], InferencePoolConfig(max_attempts=1))
    store = AsyncRunStore.open(tmp_path)
    variant = TaskVariant(
        task_id="t0",
        domain="guest",
        evaluator_name="default",
        instruction="do it",
        config=(),
        evaluator={"func": "none"},
    )
    try:
        async with GuestClient(osw_guest.url, osw_guest.token) as client:
            cfg = EpisodeConfig(max_steps=2, record=True, settle_max_s=0)
            episode = run_episode(
                variant,
                _GuestEpisodeDesktop(client),
                policy,
                store,
                cfg,
                trajectory_id=f"traj-{mode}",
            )
            if mode == "ok":
                assert (await episode).status == TrajectoryStatus.FINISHED
            else:
                with pytest.raises(EpisodeAborted):
                    await episode
    finally:
        await store.close()
        await policy.close()
        await server.stop()
    video = recording_path(tmp_path, f"traj-{mode}")
    assert video.read_bytes()[4:8] == b"ftyp"
