from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from tests_support.viewer_runs import add_bulk_trajectories, build_run

from cua_rl.viewer.server import make_app


@pytest.fixture
async def client(tmp_path: Path):
    built = build_run(tmp_path / "run")
    (tmp_path / "secret.txt").write_text("not for the viewer")
    async with TestClient(TestServer(make_app(built.run_dir))) as c:
        c.built = built
        yield c


async def test_page_and_static_files(client) -> None:
    page = await client.get("/")
    assert page.status == 200 and "cua-rl viewer" in await page.text()
    for name in ("app.js", "overlay.js", "style.css"):
        assert (await client.get(f"/static/{name}")).status == 200


async def test_json_api(client) -> None:
    ov = await (await client.get("/api/overview")).json()
    assert ov["runs"][0]["trajectories"] == 3
    tasks = await (await client.get("/api/tasks?limit=1")).json()
    assert tasks["total"] == 2 and len(tasks["items"]) == 1
    task = await (await client.get("/api/tasks/t1")).json()
    assert len(task["variants"]) == 2
    history = await (await client.get("/api/tasks/t1/history")).json()
    assert history["items"][0]["kind"] == "adapt_decision"
    page = await (await client.get("/api/trajectories?limit=2&outcome=1")).json()
    assert [t["trajectory_id"] for t in page["items"]] == ["traj-1", "traj-0"]
    assert page["next_cursor"] is None
    first = await (await client.get("/api/trajectories?limit=1")).json()
    nxt = await (
        await client.get("/api/trajectories", params={"limit": "1", "cursor": first["next_cursor"]})
    ).json()
    assert nxt["items"][0]["trajectory_id"] == "traj-1"
    detail = await (await client.get("/api/trajectories/traj-0")).json()
    assert len(detail["steps"]) == 4 and len(detail["steps"][0]["votes"]) == 3


@pytest.mark.parametrize("query", ["outcome=2", "limit=x", "aborted=maybe", "cursor=bad"])
async def test_bad_queries_are_400(client, query: str) -> None:
    resp = await client.get(f"/api/trajectories?{query}")
    assert resp.status == 400


async def test_unknown_trajectory_is_404(client) -> None:
    assert (await client.get("/api/trajectories/nope")).status == 404


async def test_screenshots_by_hash_and_no_traversal(client) -> None:
    name = client.built.shots["traj-0"][0]
    resp = await client.get(f"/screenshots/{name}")
    assert resp.status == 200 and resp.content_type == "image/png"
    path = client.built.run_dir / "screenshots" / name[:2] / name
    assert await resp.read() == path.read_bytes()
    for bad in (
        "..%2F..%2Fsecret.txt",
        "..%2Frun.sqlite",
        "%2Fetc%2Fpasswd",
        name.upper(),
        name + "x",
    ):
        assert (await client.get(f"/screenshots/{bad}")).status == 404, bad
    assert (await client.get("/static/..%2F..%2Fsecret.txt")).status in (403, 404)


async def test_a_deleted_screenshot_shows_a_placeholder(client) -> None:
    """What retention leaves: the step still names its screenshot, the file is gone;
    the page gets an image that says so (never cached), and the API still answers."""
    name = client.built.shots["traj-0"][1]
    (client.built.run_dir / "screenshots" / name[:2] / name).unlink()
    detail = await (await client.get("/api/trajectories/traj-0")).json()
    assert detail["steps"][1]["screenshot_before"] == name
    resp = await client.get(f"/screenshots/{name}")
    assert resp.status == 200 and resp.content_type == "image/svg+xml"
    assert resp.headers["X-Cua-Screenshot-Missing"] == "1"
    assert resp.headers["Cache-Control"] == "no-cache"
    assert b"screenshot not kept" in await resp.read()
    group = await (await client.get("/api/groups/g1")).json()
    assert group["members"]
    never = await client.get("/screenshots/" + "0" * 40 + ".png")
    assert never.status == 200 and never.content_type == "image/svg+xml"


async def test_pages_stay_bounded_on_a_large_run(tmp_path: Path) -> None:
    build_run(tmp_path, n_trajectories=1)
    add_bulk_trajectories(tmp_path, 3000)
    async with TestClient(TestServer(make_app(tmp_path))) as c:
        page = await (await c.get("/api/trajectories?limit=100000")).json()
        assert page["total"] == 3001 and len(page["items"]) == 200
        tasks = await (await c.get("/api/tasks?limit=100000")).json()
        assert len(tasks["items"]) <= 200
