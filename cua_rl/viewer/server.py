"""The viewer's HTTP server: a JSON API under `/api/`, screenshots by content
hash under `/screenshots/`, episode recordings under `/recordings/`, and the
static page.

All SQLite work runs on one dedicated thread with one read-only connection, so
the event loop stays free and the connection is never shared between threads.
Screenshot names are matched against the store's naming scheme before any path
is built, and the resolved path must stay inside `screenshots/`: a request can
never read another file of the run directory or of the host. Recordings get the
same treatment: the name must be a plain trajectory id followed by `.mp4`, and
the resolved path must stay inside `recordings/`.

The same page opens an OSWorld results folder (`osworld_folder`): its database is
built in memory from the folder, and screenshots and recordings are served only
from the files found while reading it.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from cua_rl.store import read_only
from cua_rl.store.run_store import DB_NAME, SHOTS_DIR
from cua_rl.tasks.osworld_results import is_results_folder
from cua_rl.viewer import queries
from cua_rl.viewer.group_view import group_rollouts
from cua_rl.viewer.osworld_folder import OsworldFolder
from cua_rl.viewer.trajectory_detail import trajectory_detail

T = TypeVar("T")

STATIC_DIR = Path(__file__).parent / "static"
SHOT_NAME = re.compile(r"^[0-9a-f]{40}\.(png|jpg|bin)$")
"""`screenshot_hash` names: 40 hex digits and the extension from the magic bytes."""
RECORDINGS_DIR = "recordings"
"""Where the rollout store writes `<trajectory_id>.mp4` when `episode.record` is on."""
RECORDING_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}\.mp4$")
"""A trajectory id (no slash, no leading dot) and `.mp4`."""
CONTENT_TYPES = {"png": "image/png", "jpg": "image/jpeg", "bin": "application/octet-stream"}

DB_KEY = web.AppKey("db", "ViewerDatabase")
RUN_DIR_KEY = web.AppKey("run_dir", Path)
FOLDER_KEY = web.AppKey("osworld_folder", OsworldFolder)
"""Set when the viewer shows an OSWorld results folder instead of a run store."""


class ViewerDatabase:
    """The read-only connection and the one thread allowed to use it. A run store
    read while nothing wrote it is opened immutable (no side files, `store.read_only`),
    which sees no later write: once a writer starts on it or has written it (a
    resumed run), the connection is opened again before the next query."""

    def __init__(
        self, run_dir: Path, connect: Callable[[], sqlite3.Connection] | None = None
    ) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="viewer-db")
        self._connect = connect or (lambda: queries.open_readonly(run_dir))
        self._store = None if connect else run_dir.resolve() / DB_NAME
        self._conn: sqlite3.Connection = self._executor.submit(self._open).result()

    def _open(self) -> sqlite3.Connection:
        self._snapshot = None if self._store is None else read_only.Snapshot.take(self._store)
        return self._connect()

    def _query(self, fn: Callable[..., T], *args: Any) -> T:
        if (
            self._store is not None
            and self._snapshot is not None
            and self._snapshot.stale(self._store)
        ):
            self._conn.close()
            self._conn = self._open()
        return fn(self._conn, *args)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self._query(fn, *args))

    def close(self) -> None:
        self._executor.submit(self._conn.close).result()
        self._executor.shutdown(wait=True)


def _int(request: web.Request, name: str, default: int | None = None) -> int | None:
    raw = request.query.get(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise web.HTTPBadRequest(
            text=f"query parameter {name!r} must be an integer, got {raw!r}"
        ) from None


def _filter(request: web.Request) -> queries.TrajectoryFilter:
    outcome = _int(request, "outcome")
    if outcome not in (None, 1, -1):
        raise web.HTTPBadRequest(text=f"outcome must be 1 or -1, got {outcome}")
    aborted = request.query.get("aborted") or "include"
    if aborted not in ("include", "exclude", "only"):
        raise web.HTTPBadRequest(text=f"aborted must be include, exclude or only, got {aborted!r}")
    return queries.TrajectoryFilter(
        task_id=request.query.get("task") or None,
        outcome=outcome,
        policy_version=_int(request, "version"),
        aborted=aborted,
    )


async def api_overview(request: web.Request) -> web.Response:
    return web.json_response(await request.app[DB_KEY].run(queries.overview))


async def api_tasks(request: web.Request) -> web.Response:
    search = request.query.get("q", "")
    if len(search) > 200:
        raise web.HTTPBadRequest(
            text=f"query parameter 'q' is {len(search)} characters long; expected at most 200"
        )
    page = await request.app[DB_KEY].run(
        queries.tasks_page, _int(request, "offset", 0), _int(request, "limit"), search
    )
    return web.json_response(page)


async def api_task(request: web.Request) -> web.Response:
    task_id = request.match_info["task_id"]
    variants = await request.app[DB_KEY].run(queries.task_variants, task_id)
    return web.json_response({"task_id": task_id, "variants": variants})


async def api_task_history(request: web.Request) -> web.Response:
    page = await request.app[DB_KEY].run(
        queries.adaptation_history,
        request.match_info["task_id"],
        _int(request, "offset", 0),
        _int(request, "limit"),
    )
    return web.json_response(page)


async def api_trajectories(request: web.Request) -> web.Response:
    cursor = request.query.get("cursor") or None
    if cursor is not None:
        try:
            queries.decode_cursor(cursor)
        except ValueError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
    page = await request.app[DB_KEY].run(
        queries.trajectories_page, _filter(request), cursor, _int(request, "limit")
    )
    return web.json_response(page)


async def api_trajectory(request: web.Request) -> web.Response:
    tid = request.match_info["trajectory_id"]
    detail = await request.app[DB_KEY].run(trajectory_detail, tid)
    if detail is None:
        raise web.HTTPNotFound(text=f"trajectory {tid!r} is not in this run")
    detail["recording"] = (
        f"/recordings/{tid}.mp4" if _recording_file(request.app, f"{tid}.mp4") else None
    )
    return web.json_response(detail)


async def api_group(request: web.Request) -> web.Response:
    gid = request.match_info["group_id"]
    group = await request.app[DB_KEY].run(group_rollouts, gid)
    if group is None:
        raise web.HTTPNotFound(text=f"group {gid!r} has no trajectory in this run")
    return web.json_response(group)


def _recording_path(run_dir: Path, name: str) -> Path | None:
    """The recording file `name` inside `run_dir/recordings/`, or None when the
    name is not a recording name, leaves the directory, or the file is absent."""
    if not RECORDING_NAME.match(name):
        return None
    root = (run_dir / RECORDINGS_DIR).resolve()
    path = (root / name).resolve()
    return path if path.is_relative_to(root) and path.is_file() else None


def _recording_file(app: web.Application, name: str) -> Path | None:
    """The recording named `name`: in the run's recordings/, or one found in the
    OSWorld results folder."""
    folder = app.get(FOLDER_KEY)
    if folder is not None:
        return folder.recordings.get(name[:-4]) if RECORDING_NAME.match(name) else None
    return _recording_path(app[RUN_DIR_KEY], name)


async def recording(request: web.Request) -> web.FileResponse:
    name = request.match_info["name"]
    path = _recording_file(request.app, name)
    if path is None:
        raise web.HTTPNotFound(text=f"no recording {name!r} in this run")
    # FileResponse answers Range requests, which a <video> element uses to seek.
    return web.FileResponse(
        path, headers={"Content-Type": "video/mp4", "Cache-Control": "no-cache"}
    )


MISSING_HEADER = "X-Cua-Screenshot-Missing"
MISSING_SHOT_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="640" height="360" viewBox="0 0 640 360">'
    b'<rect width="640" height="360" fill="#eceff1" stroke="#90a4ae" stroke-width="4" '
    b'stroke-dasharray="12 8"/><text x="320" y="170" font-family="sans-serif" '
    b'font-size="26" fill="#455a64" text-anchor="middle">screenshot not kept</text>'
    b'<text x="320" y="210" font-family="sans-serif" font-size="16" fill="#607d8b" '
    b'text-anchor="middle">deleted by store.retention after its group was trained</text>'
    b"</svg>"
)
"""What a stored step's screenshot shows once retention deleted its file: an image
(so every `<img>` of the page still renders) that says why, never cached."""


async def screenshot(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if not SHOT_NAME.match(name):
        raise web.HTTPNotFound(text="not a screenshot name")
    folder = request.app.get(FOLDER_KEY)
    if folder is not None:
        found = folder.shots.get(name)
        if found is None:
            raise web.HTTPNotFound(text=f"screenshot {name} is not in this folder")
        return web.FileResponse(
            found,
            headers={
                "Content-Type": CONTENT_TYPES[name.rsplit(".", 1)[1]],
                "Cache-Control": "no-cache",
            },
        )
    root = (request.app[RUN_DIR_KEY] / SHOTS_DIR).resolve()
    path = (root / name[:2] / name).resolve()
    if not path.is_relative_to(root):
        raise web.HTTPNotFound(text=f"screenshot {name} is not in this run")
    if not path.is_file():  # deleted by store.retention (or never written): say so
        return web.Response(
            body=MISSING_SHOT_SVG,
            content_type="image/svg+xml",
            headers={"Cache-Control": "no-cache", MISSING_HEADER: "1"},
        )
    # Content-addressed: a name always means the same bytes, so caching is safe.
    return web.FileResponse(
        path,
        headers={
            "Content-Type": CONTENT_TYPES[name.rsplit(".", 1)[1]],
            "Cache-Control": "public, max-age=31536000, immutable",
        },
    )


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})


def make_app(run_dir: str | Path) -> web.Application:
    """The viewer application for one run directory, or for an OSWorld results folder
    (FileNotFoundError when `run_dir` is neither)."""
    run_dir = Path(run_dir).resolve()
    app = web.Application()
    app[RUN_DIR_KEY] = run_dir
    if not (run_dir / DB_NAME).is_file() and is_results_folder(run_dir):
        folder = OsworldFolder(run_dir)
        app[FOLDER_KEY] = folder
        app[DB_KEY] = ViewerDatabase(run_dir, folder.connect)
    else:
        app[DB_KEY] = ViewerDatabase(run_dir)

    async def close_db(app: web.Application) -> None:
        app[DB_KEY].close()

    app.on_cleanup.append(close_db)
    app.router.add_get("/", index)
    app.router.add_get("/api/overview", api_overview)
    app.router.add_get("/api/tasks", api_tasks)
    app.router.add_get("/api/tasks/{task_id}", api_task)
    app.router.add_get("/api/tasks/{task_id}/history", api_task_history)
    app.router.add_get("/api/trajectories", api_trajectories)
    app.router.add_get("/api/trajectories/{trajectory_id}", api_trajectory)
    app.router.add_get("/api/groups/{group_id}", api_group)
    app.router.add_get("/screenshots/{name}", screenshot)
    app.router.add_get("/recordings/{name}", recording)
    app.router.add_static("/static/", STATIC_DIR)
    return app
