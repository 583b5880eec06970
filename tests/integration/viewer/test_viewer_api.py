"""The viewer's JSON API and files over a real aiohttp server and a real run store:
task search, a group's rollouts side by side, step-less (setup-failed, aborted)
trajectories with their reasons, and episode recordings served without traversal."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from tests_support import viewer_runs

from cua_rl.viewer.server import make_app


@pytest.fixture
async def client(tmp_path: Path):
    built = viewer_runs.build_run(tmp_path / "run", n_trajectories=3, n_steps=3)
    viewer_runs.add_failed_trajectories(built.run_dir)
    (tmp_path / "secret.mp4").write_bytes(b"not for the viewer")
    async with TestClient(TestServer(make_app(built.run_dir))) as c:
        c.built = built
        yield c


async def test_task_list_has_instruction_and_domain_and_search(client) -> None:
    tasks = await (await client.get("/api/tasks")).json()
    t1 = next(t for t in tasks["items"] if t["task_id"] == "t1")
    assert t1["domain"] == "os" and t1["instruction"] == "Do t1 with default"
    assert t1["aborted"] == 2  # the setup failure and the abort
    for q, want in (
        ("T2", ["t2"]),
        ("with harder", ["t1"]),
        ("OS", ["t1", "t2"]),
        ("nothing like this", []),
    ):
        page = await (await client.get("/api/tasks", params={"q": q})).json()
        assert [t["task_id"] for t in page["items"]] == want, q
        assert page["total"] == len(want)
    assert (await client.get("/api/tasks", params={"q": "x" * 201})).status == 400


async def test_group_side_by_side(client) -> None:
    group = await (await client.get("/api/groups/g1")).json()
    members = {m["trajectory_id"]: m for m in group["members"]}
    assert set(members) == {"traj-0", "traj-1", "traj-2", "setup-failed", "aborted-0"}
    assert group["instruction"] == "Do t1 with default"
    for tid in ("traj-0", "traj-1", "traj-2"):
        assert [s["screenshot_before"] for s in members[tid]["steps"]] == client.built.shots[tid]
    assert members["setup-failed"]["steps"] == []
    assert members["setup-failed"]["error"] == viewer_runs.SETUP_REASON
    assert (await client.get("/api/groups/nope")).status == 404


async def test_step_less_trajectories_carry_status_and_reason(client) -> None:
    for tid, status, reason in (
        ("setup-failed", "setup_failed", viewer_runs.SETUP_REASON),
        ("aborted-0", "aborted", viewer_runs.ABORT_REASON),
    ):
        detail = await (await client.get(f"/api/trajectories/{tid}")).json()
        assert (detail["status"], detail["error"], detail["steps"]) == (status, reason, [])
        assert detail["outcome"] is None and detail["recording"] is None


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg: apt install ffmpeg")
async def test_recordings_are_served_safely(client) -> None:
    mp4 = viewer_runs.write_recording(client.built.run_dir, "traj-0")
    detail = await (await client.get("/api/trajectories/traj-0")).json()
    assert detail["recording"] == "/recordings/traj-0.mp4"
    assert (await (await client.get("/api/trajectories/traj-1")).json())["recording"] is None
    resp = await client.get("/recordings/traj-0.mp4")
    assert resp.status == 200 and resp.content_type == "video/mp4"
    assert await resp.read() == mp4.read_bytes()
    part = await client.get("/recordings/traj-0.mp4", headers={"Range": "bytes=0-99"})
    assert part.status == 206 and await part.read() == mp4.read_bytes()[:100]
    for bad in (
        "..%2Fsecret.mp4",
        "..%2F..%2Fsecret.mp4",
        "%2Fetc%2Fpasswd",
        ".hidden.mp4",
        "traj-0.mp4x",
        "traj-1.mp4",
        "..%2Frun.sqlite",
    ):
        assert (await client.get(f"/recordings/{bad}")).status == 404, bad
    # A symlink inside recordings/ that points out of it is refused too.
    (client.built.run_dir / "recordings" / "link.mp4").symlink_to(
        client.built.run_dir.parent / "secret.mp4"
    )
    assert (await client.get("/recordings/link.mp4")).status == 404
