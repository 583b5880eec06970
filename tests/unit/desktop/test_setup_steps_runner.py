"""run_setup_steps against a recording guest server on 127.0.0.1.

The guest here only records requests and answers like OSWorld's server does;
what the steps do on a real desktop is covered by
tests/integration/desktop/test_setup_steps_live.py.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.setup_step_params import OpenParams
from cua_rl.desktop.setup_steps import SETUP_STEPS, SetupContext, StepRun, StepSpec, run_setup_steps
from cua_rl.errors import GuestUnavailable, SetupStepError


@dataclass
class Guest:
    url: str
    calls: list[tuple[str, Any]] = field(default_factory=list)
    uploads: dict[str, bytes] = field(default_factory=dict)
    executions: int = 0


@pytest.fixture
async def guest() -> AsyncIterator[Guest]:
    state = Guest(url="")

    async def execute(request: web.Request) -> web.Response:
        body = await request.json()
        state.calls.append(("execute", body["command"]))
        state.executions += 1
        text = " ".join(body["command"]) if isinstance(body["command"], list) else body["command"]
        if "guest-crash" in text:
            return web.json_response({"status": "error", "message": "exec failed"}, status=500)
        code = 1 if text.startswith("diff") else 0
        if "count-to-3" in text:
            code = 0 if state.executions >= 3 else 7
        return web.json_response(
            {"status": "success", "output": f"out:{text}", "error": "err!", "returncode": code}
        )

    async def upload(request: web.Request) -> web.Response:
        form = await request.post()
        data = form["file_data"]
        state.uploads[str(form["file_path"])] = data.file.read()  # type: ignore[union-attr]
        state.calls.append(("upload", str(form["file_path"])))
        return web.Response(text="ok")

    def setup_route(name: str, missing: str = "") -> Any:
        async def handle(request: web.Request) -> web.Response:
            body = await request.json()
            state.calls.append((name, body))
            if missing and missing in str(body):
                return web.json_response(
                    {"status": "error", "message": f"{name}: not found"}, status=404
                )
            return web.json_response({"status": "success", "message": "ok"})

        return handle

    async def asset(request: web.Request) -> web.Response:
        if request.match_info["name"] == "gone.txt":
            raise web.HTTPNotFound()
        return web.Response(body=b"asset:" + request.match_info["name"].encode())

    app = web.Application()
    app.router.add_post("/execute", execute)
    app.router.add_post("/setup/upload", upload)
    app.router.add_post("/setup/launch", setup_route("launch"))
    app.router.add_post("/setup/open_file", setup_route("open", missing="missing"))
    app.router.add_post("/setup/activate_window", setup_route("activate", missing="Absent"))
    app.router.add_post("/setup/close_window", setup_route("close", missing="Absent"))
    app.router.add_post("/setup/change_wallpaper", setup_route("wallpaper"))
    app.router.add_post("/execute_with_verification", setup_route("verify", missing="never"))
    app.router.add_get("/assets/{name}", asset)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield state
    await runner.cleanup()


@pytest.fixture
async def client(guest: Guest) -> AsyncIterator[GuestClient]:
    async with GuestClient(guest.url, timeout=10) as c:
        yield c


def ctx(tmp_path: Path, **kw: Any) -> SetupContext:
    return SetupContext(
        screen_width=1920,
        screen_height=1080,
        output_dir=tmp_path / "out",
        **{"window_wait_s": 0.0, **kw},
    )


def step(kind: str, **params: Any) -> dict[str, Any]:
    return {"type": kind, "parameters": params}


async def test_steps_run_in_order_with_osworld_semantics(
    guest: Guest, client: GuestClient, tmp_path: Path
) -> None:
    steps = [
        step(
            "download", files=[{"url": f"{guest.url}/assets/a.xlsx", "path": "/home/user/a.xlsx"}]
        ),
        step(
            "execute",
            command=["xdotool", "mousemove", "{SCREEN_WIDTH_HALF}", "{SCREEN_HEIGHT_HALF}"],
        ),
        step("command", command="echo {CLIENT_PASSWORD} | sudo -S ls", shell="true"),
        step("launch", command="code --new-window '/home/user/my dir'"),
        step("open", path="/home/user/a.xlsx"),
        step("sleep", seconds=0),
        step("activate_window", window_name="a.xlsx - LibreOffice Calc", strict=True),
        step("close_window", window_name="Mail", by_class=True),
        step("change_wallpaper", path="/home/user/w.png"),
        step("execute_with_verification", command=["gedit"], verification={"window_exists": "x"}),
        step("execute", command=["diff", "a", "b"], stdout="diff.out", stderr="diff.err"),
    ]
    warnings = await run_setup_steps(
        client, steps, task_id="t1", cache=FileCache(tmp_path / "c"), context=ctx(tmp_path)
    )
    assert warnings == []
    assert guest.uploads == {"/home/user/a.xlsx": b"asset:a.xlsx"}
    assert guest.calls == [
        ("upload", "/home/user/a.xlsx"),
        ("execute", ["xdotool", "mousemove", "960", "540"]),
        ("execute", "echo password | sudo -S ls"),
        ("launch", {"command": ["code", "--new-window", "/home/user/my dir"], "shell": False}),
        ("open", {"path": "/home/user/a.xlsx"}),
        (
            "activate",
            {"window_name": "a.xlsx - LibreOffice Calc", "strict": True, "by_class": False},
        ),
        ("close", {"window_name": "Mail", "strict": False, "by_class": True}),
        ("wallpaper", {"path": "/home/user/w.png"}),
        (
            "verify",
            {
                "command": ["gedit"],
                "shell": False,
                "verification": {"window_exists": "x"},
                "max_wait_time": 10.0,
                "check_interval": 1.0,
            },
        ),
        ("execute", ["diff", "a", "b"]),  # exit code 1 is data for the evaluator
    ]
    assert (tmp_path / "out" / "diff.out").read_text() == "out:diff a b"
    assert (tmp_path / "out" / "diff.err").read_text() == "err!"


async def test_best_effort_failures_warn_unless_strict(
    guest: Guest, client: GuestClient, tmp_path: Path
) -> None:
    steps = [
        step("activate_window", window_name="Absent window"),
        step("sleep", seconds=0),
        step("execute", command=["guest-crash"]),
    ]
    cache = FileCache(tmp_path)
    warnings = await run_setup_steps(
        client,
        steps,
        task_id="t2",
        cache=cache,
        context=ctx(tmp_path),
        phase="evaluator.postconfig",
    )
    assert len(warnings) == 2
    assert warnings[0].startswith("task t2: evaluator.postconfig[0] ('activate_window'): ")
    assert "not found" in warnings[0] and "exec failed" in warnings[1]
    with pytest.raises(
        SetupStepError,
        match=r"t2: config\[0\] \('activate_window'\): failed on "
        r"the desktop: .*activate: not found",
    ):
        await run_setup_steps(
            client, steps, task_id="t2", cache=cache, context=ctx(tmp_path, strict=True)
        )


async def test_postconfig_window_steps_warn_even_when_strict(
    guest: Guest, client: GuestClient, tmp_path: Path
) -> None:
    # Task 5bc63fb9's postconfig activates 'gemini_results.docx - LibreOffice Writer', a
    # document only the agent creates: an agent that did nothing scores 0, it is no error.
    steps = [step("activate_window", window_name="Absent.docx - LibreOffice Writer", strict=True)]
    warnings = await run_setup_steps(
        client,
        steps,
        task_id="t6",
        cache=FileCache(tmp_path),
        phase="evaluator.postconfig",
        context=ctx(tmp_path, strict=True),
    )
    assert len(warnings) == 1 and "not found" in warnings[0]


async def test_closing_a_window_that_is_not_open_succeeds_even_when_strict(
    guest: Guest, client: GuestClient, tmp_path: Path
) -> None:
    # OSWorld's guest answers 200 whatever `wmctrl -c` found: a postconfig that closes
    # a dialog the agent never opened ("Message Filters") must not fail the evaluation.
    steps = [step("close_window", window_name="Absent dialog", strict=True)]
    warnings = await run_setup_steps(
        client,
        steps,
        task_id="t5",
        cache=FileCache(tmp_path),
        phase="evaluator.postconfig",
        context=ctx(tmp_path, strict=True),
    )
    assert warnings == []
    assert guest.calls == [
        ("close", {"window_name": "Absent dialog", "strict": True, "by_class": False})
    ]


async def test_failed_open_raises_with_guest_message(
    guest: Guest, client: GuestClient, tmp_path: Path
) -> None:
    with pytest.raises(SetupStepError, match=r"task t3: config\[1\] \('open'\): .*open: not found"):
        await run_setup_steps(
            client,
            [step("sleep", seconds=0), step("open", path="/missing.txt")],
            task_id="t3",
            cache=FileCache(tmp_path),
            context=ctx(tmp_path),
        )


async def test_malformed_step_stops_before_anything_runs(
    guest: Guest, client: GuestClient, tmp_path: Path
) -> None:
    steps = [step("execute", command=["ls"]), step("teleport", where=["x"])]
    with pytest.raises(SetupStepError, match=r"t4: config\[1\]: unknown step type"):
        await run_setup_steps(
            client, steps, task_id="t4", cache=FileCache(tmp_path), context=ctx(tmp_path)
        )
    assert guest.calls == []


async def test_download_404_names_task_step_and_url(
    guest: Guest, client: GuestClient, tmp_path: Path
) -> None:
    url = f"{guest.url}/assets/gone.txt"
    with pytest.raises(SetupStepError) as info:
        await run_setup_steps(
            client,
            [step("download", files=[{"url": url, "path": "/x"}])],
            task_id="t5",
            cache=FileCache(tmp_path),
            context=ctx(tmp_path),
        )
    assert str(info.value).startswith("task t5: config[0] ('download'): cannot download " + url)


async def test_until_reruns_execute_until_condition(
    guest: Guest, client: GuestClient, tmp_path: Path
) -> None:
    steps = [step("execute", command=["count-to-3"], until={"returncode": 0})]
    await run_setup_steps(
        client, steps, task_id="t6", cache=FileCache(tmp_path), context=ctx(tmp_path)
    )
    assert guest.executions == 3


async def test_stdout_needs_an_output_dir(client: GuestClient, tmp_path: Path) -> None:
    context = SetupContext(screen_width=10, screen_height=10)
    with pytest.raises(SetupStepError, match="output_dir"):
        await run_setup_steps(
            client,
            [step("execute", command=["ls"], stdout="o.txt")],
            task_id="t7",
            cache=FileCache(tmp_path),
            context=context,
        )


async def test_upload_file_resolves_against_local_root(
    guest: Guest, client: GuestClient, tmp_path: Path
) -> None:
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "a.txt").write_text("A")
    steps = [step("upload_file", files=[{"local_path": "assets/a.txt", "path": "/tmp/a.txt"}])]
    await run_setup_steps(
        client,
        steps,
        task_id="t8",
        cache=FileCache(tmp_path),
        context=ctx(tmp_path, local_root=tmp_path),
    )
    assert guest.uploads == {"/tmp/a.txt": b"A"}
    steps = [step("upload_file", files=[{"local_path": "nope.txt", "path": "/tmp/a.txt"}])]
    with pytest.raises(SetupStepError, match=r"t8: config\[0\] \('upload_file'\): .*nope.txt"):
        await run_setup_steps(
            client,
            steps,
            task_id="t8",
            cache=FileCache(tmp_path),
            context=ctx(tmp_path, local_root=tmp_path),
        )


async def test_dead_desktop_raises_guest_unavailable(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with GuestClient(f"http://127.0.0.1:{port}", timeout=2) as dead:
        with pytest.raises(GuestUnavailable):  # the caller aborts the episode, not the task
            await run_setup_steps(
                dead,
                [step("launch", command=["x"])],
                task_id="t9",
                cache=FileCache(tmp_path),
                context=ctx(tmp_path),
            )


async def test_registry_is_extended_by_name(
    client: GuestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    async def handler(run: StepRun[OpenParams]) -> None:
        seen.append(run.params.path)

    monkeypatch.setitem(SETUP_STEPS, "custom_open", StepSpec(params=OpenParams, run=handler))
    await run_setup_steps(
        client,
        [step("custom_open", path="/p")],
        task_id="t10",
        cache=FileCache(tmp_path),
        context=ctx(tmp_path),
    )
    assert seen == ["/p"]
