"""The viewer in a real browser (Debian's Chromium driven by Playwright), served by
`cua-rl view` in its own process over a run store the test writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests_support.servers import free_port

from cua_rl.reward.advantages import step_rewards
from cua_rl.store.run_store import RunStore
from cua_rl.types import Trajectory, TrajectoryStatus

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.desktop,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium: apt install chromium"
    ),
]

sync_api = pytest.importorskip("playwright.sync_api")
viewer_runs = pytest.importorskip("tests_support.viewer_runs")


@contextmanager
def _serve(run_dir: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cua_rl.cli", "view", str(run_dir), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/overview", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read().decode() if proc.stdout else ""
                    pytest.fail(f"cua-rl view did not start: {out}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def browser_page() -> Iterator[sync_api.Page]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        page = browser.new_page(viewport={"width": 1500, "height": 950})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page
        browser.close()
        assert not errors, f"JavaScript errors on the page: {errors}"


def _open(page: sync_api.Page, url: str) -> None:
    page.goto(url)
    page.wait_for_function("window.viewerReady === true", timeout=15000)


def _center(page: sync_api.Page, selector: str) -> tuple[float, float]:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def _expected(page: sync_api.Page, point: tuple[int, int]) -> tuple[float, float]:
    """Where a screen-pixel point must be drawn on the displayed screenshot."""
    img = page.locator("#shot").bounding_box()
    assert img is not None
    w, h = viewer_runs.SCREEN
    return img["x"] + point[0] * img["width"] / w, img["y"] + point[1] * img["height"] / h


def _assert_near(got: tuple[float, float], want: tuple[float, float]) -> None:
    assert abs(got[0] - want[0]) < 2 and abs(got[1] - want[1]) < 2, (got, want)


def _wait_step(page: sync_api.Page, shot: str) -> None:
    page.wait_for_function(
        f"document.getElementById('shot').src.endsWith('/screenshots/{shot}')"
        " && document.getElementById('shot').complete",
        timeout=10000,
    )


def test_keyboard_walk_through_a_trajectory(tmp_path: Path, browser_page) -> None:
    built = viewer_runs.build_run(tmp_path / "run", n_trajectories=3, n_steps=4)
    page = browser_page
    with _serve(built.run_dir) as url:
        _open(page, url)
        assert page.locator("#trajs li").count() == 3
        page.keyboard.press("ArrowDown")  # newest first: traj-2 (the failure)
        shots = built.shots["traj-2"]
        _wait_step(page, shots[0])
        assert "failure" in page.locator("#traj-head").inner_text()
        # step 0: left_click at (320, 180)
        _assert_near(_center(page, ".mark-point .mark-dot"), _expected(page, (320, 180)))
        scores = list(viewer_runs.vote_scores(2, 0))
        votes = page.locator("#votes .vote")
        assert [int(votes.nth(i).get_attribute("data-score")) for i in range(3)] == scores
        assert "reasoning 1 on step 0 of traj-2" in votes.nth(1).inner_text()
        rewards = step_rewards(-1, [viewer_runs.vote_scores(2, i) for i in range(4)])
        assert page.locator("#reward").inner_text() == f"R = {rewards[0]:.2f}"
        assert page.locator("#advantage").inner_text().startswith("A = ")
        # step 1: type, drawn as a label, no point
        page.keyboard.press("ArrowRight")
        _wait_step(page, shots[1])
        assert page.locator(".mark-point").count() == 0
        assert 'type "hello world"' in (page.locator(".mark-label").text_content() or "")
        # step 2: drag from (100, 600) to (900, 300)
        page.keyboard.press("ArrowRight")
        _wait_step(page, shots[2])
        _assert_near(_center(page, ".mark-start"), _expected(page, (100, 600)))
        _assert_near(_center(page, ".mark-point .mark-dot"), _expected(page, (900, 300)))
        assert page.locator(".mark-path").count() == 1
        assert "step 2 of traj-2" in page.locator("#response").inner_text()
        page.keyboard.press("ArrowLeft")
        _wait_step(page, shots[1])
        page.keyboard.press("ArrowRight")
        _wait_step(page, shots[2])
        page.screenshot(path=str(tmp_path / "viewer.png"))
        # next trajectory: traj-1 from its first step; and back
        page.keyboard.press("ArrowDown")
        _wait_step(page, built.shots["traj-1"][0])
        assert "success" in page.locator("#traj-head").inner_text()
        page.keyboard.press("ArrowUp")
        _wait_step(page, shots[0])
        # the task panel shows variants and the adaptation history
        page.locator("#tasks tbody tr", has_text="t1").click()
        page.wait_for_selector("#history li .accepted")
        assert "t1:harder@1" in page.locator("#variants").inner_text()
        page.screenshot(path=str(tmp_path / "viewer_task.png"))
        assert (tmp_path / "viewer.png").read_bytes()[:4] == b"\x89PNG"


def test_live_updates_while_the_run_writes(tmp_path: Path, browser_page) -> None:
    built = viewer_runs.build_run(tmp_path / "run", n_trajectories=2, n_steps=2)
    page = browser_page
    with _serve(built.run_dir) as url:
        _open(page, url)
        assert page.locator("#trajs li").count() == 2
        store = RunStore(built.run_dir)  # a writer, while the viewer reads
        store.save_trajectory(
            Trajectory(
                id="late",
                variant_id="t2:default",
                steps=(),
                status=TrajectoryStatus.FINISHED,
                score=1.0,
            )
        )
        store.close()
        page.wait_for_selector('#trajs li[data-id="late"]', timeout=15000)


def test_ten_thousand_trajectories_stay_paged(tmp_path: Path, browser_page) -> None:
    run_dir = tmp_path / "run"
    viewer_runs.build_run(run_dir, n_trajectories=1, n_steps=2)
    viewer_runs.add_bulk_trajectories(run_dir, 10_000)
    page = browser_page
    with _serve(run_dir) as url:
        start = time.monotonic()
        body = urllib.request.urlopen(f"{url}/api/trajectories?limit=100000", timeout=10).read()
        elapsed = time.monotonic() - start
        assert body.count(b'"trajectory_id"') == 200  # capped at MAX_PAGE
        assert elapsed < 5, f"first page took {elapsed:.2f} s"  # generous: shared CI cores
        _open(page, url)
        assert page.locator("#trajs li").count() == 50
        assert "page 1 · 10001 trajectories" in page.locator("#traj-pager").inner_text()
        first = page.locator("#trajs li").first.get_attribute("data-id")
        page.locator("#traj-pager button").last.click()
        page.wait_for_function("document.querySelector('#traj-pager').innerText.includes('page 2')")
        assert page.locator("#trajs li").count() == 50
        assert page.locator("#trajs li").first.get_attribute("data-id") != first


def test_search_group_view_failed_runs_and_recording(tmp_path: Path, browser_page) -> None:
    built = viewer_runs.build_run(tmp_path / "run", n_trajectories=3, n_steps=3)
    viewer_runs.add_failed_trajectories(built.run_dir)
    has_ffmpeg = shutil.which("ffmpeg") is not None
    if has_ffmpeg:
        viewer_runs.write_recording(built.run_dir, "traj-0")
    page = browser_page
    with _serve(built.run_dir) as url:
        _open(page, url)
        # the task list shows instruction and domain, and the search narrows it
        row = page.locator('#tasks tbody tr[data-task="t1"]')
        assert "Do t1 with default" in row.inner_text() and "os" in row.inner_text()
        page.fill("#f-search", "do t2")
        page.wait_for_function(
            "document.querySelectorAll('#tasks tbody tr[data-task]').length"
            " === 1 && document.querySelector('#tasks tbody tr[data-task="
            '"t2"]\') !== null',
            timeout=10000,
        )
        page.fill("#f-search", "no such task")
        page.wait_for_selector("text=no task matches", timeout=10000)
        # a setup failure with 0 steps: status and reason, no broken image
        page.locator('#trajs li[data-id="setup-failed"]').click()
        page.wait_for_selector("#no-steps:not([hidden])", timeout=10000)
        text = page.locator("#no-steps").inner_text()
        assert "setup failed" in text and viewer_runs.SETUP_REASON in text
        assert not page.locator("#step-view").is_visible()
        broken = page.evaluate(
            "[...document.querySelectorAll('img')].filter(i => i.offsetParent"
            " !== null && (!i.getAttribute('src') || (i.complete &&"
            " i.naturalWidth === 0))).length"
        )
        assert broken == 0
        page.locator('#trajs li[data-id="aborted-0"]').click()
        page.wait_for_function(
            f"document.getElementById('no-steps').innerText.includes({viewer_runs.ABORT_REASON!r})",
            timeout=10000,
        )
        # the group side by side: one column per rollout, step i of each in row i
        page.locator("#open-group").click()
        page.wait_for_selector("#group-panel:not([hidden]) .col-head", timeout=10000)
        assert page.locator("#group-grid .col-head").count() == 5
        assert page.locator("#group-grid figure img").count() == 9
        page.wait_for_function(
            "[...document.querySelectorAll('#group-grid figure img')]"
            ".every(i => i.complete && i.naturalWidth > 0)",
            timeout=10000,
        )
        failed_head = page.locator('#group-grid .col-head[data-id="setup-failed"]').inner_text()
        assert viewer_runs.SETUP_REASON in failed_head
        page.screenshot(path=str(tmp_path / "viewer_group.png"), full_page=True)
        # a click on a thumbnail opens that rollout at that step
        page.locator("#group-grid figure").nth(3 + 1).click()  # row 1, second column
        _wait_step(page, built.shots["traj-1"][1])
        if has_ffmpeg:
            page.locator('#trajs li[data-id="traj-0"]').click()
            page.wait_for_selector("#recording:not([hidden])", timeout=10000)
            assert page.locator("#recording").get_attribute("src") == "/recordings/traj-0.mp4"
            page.locator('#trajs li[data-id="traj-1"]').click()
            page.wait_for_selector("#recording[hidden]", state="attached", timeout=10000)
