"""Running code on the desktop: /execute, /run_python, /run_bash_script and /act.

Shapes follow OSWorld's guest ({status, output, error, returncode}); one change:
a command that exceeds its timeout answers HTTP 200 with status "timeout" and
the output it produced so far, instead of a bare 500.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from cua_guest.act_worker import WorkerUnavailable
from cua_guest.bodies import (
    BadRequest,
    command_field,
    json_error,
    optional_bool,
    optional_number,
    read_json,
    require_str,
)
from cua_guest.procs import CommandNotRunnable, ProcResult, run_command, shell_argv
from cua_guest.state import GUEST
from cua_guest.windows import list_windows

routes = web.RouteTableDef()

EXECUTE_TIMEOUT_S = 120.0
RUN_PYTHON_TIMEOUT_S = 30.0
RUN_BASH_TIMEOUT_S = 100.0
MAX_TIMEOUT_S = 24 * 3600.0


def command_argv(body: dict[str, Any]) -> list[str]:
    """argv from OSWorld's {command, shell}: strings are shlex-split unless shell."""
    shell = optional_bool(body, "shell", False)
    command = command_field(body, shell)
    if shell:
        return shell_argv(command)
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError as exc:
            raise BadRequest(f"command: cannot split the string into arguments ({exc})") from None
    return [os.path.expanduser(arg) if arg.startswith("~/") else arg for arg in command]


def _result_json(result: ProcResult, timeout: float) -> dict[str, Any]:
    body: dict[str, Any] = {
        "status": "timeout" if result.timed_out else "success",
        "output": result.stdout,
        "error": result.stderr,
        "returncode": result.returncode,
    }
    if result.timed_out:
        body["message"] = f"the command timed out after {timeout:g} s; partial output returned"
    return body


def _not_runnable(exc: CommandNotRunnable) -> web.Response:
    return json_error(exc.status, str(exc), output="", error=str(exc), returncode=127)


@routes.post("/execute")
@routes.post("/setup/execute")
async def execute(request: web.Request) -> web.Response:
    body = await read_json(request)
    argv = command_argv(body)
    timeout = optional_number(body, "timeout", EXECUTE_TIMEOUT_S, low=0.001, high=MAX_TIMEOUT_S)
    try:
        result = await run_command(argv, timeout=timeout)
    except CommandNotRunnable as exc:
        return _not_runnable(exc)
    return web.json_response(_result_json(result, timeout))


@routes.post("/execute_with_verification")
@routes.post("/setup/execute_with_verification")
async def execute_with_verification(request: web.Request) -> web.Response:
    """Run a command, then poll until its verification holds (a window, a check command)."""
    body = await read_json(request)
    argv = command_argv(body)
    verification = body.get("verification") or {}
    if not isinstance(verification, dict):
        raise BadRequest("verification: expected an object with window_exists/command_success")
    window = verification.get("window_exists")
    check = verification.get("command_success")
    for name, value in (("window_exists", window), ("command_success", check)):
        if value is not None and not isinstance(value, str):
            raise BadRequest(f"verification.{name}: expected a string, got {value!r}")
    max_wait = optional_number(body, "max_wait_time", 10, low=0, high=MAX_TIMEOUT_S)
    interval = optional_number(body, "check_interval", 1, low=0.01, high=3600)
    timeout = optional_number(body, "timeout", EXECUTE_TIMEOUT_S, low=0.001, high=MAX_TIMEOUT_S)
    try:
        result = await run_command(argv, timeout=timeout)
    except CommandNotRunnable as exc:
        return _not_runnable(exc)
    response = _result_json(result, timeout)
    if result.timed_out or not verification:
        return web.json_response(response)

    start = time.monotonic()
    while True:
        passed = True
        if window:
            titles = [title.lower() for _, title in await list_windows()]
            passed = any(window.lower() in title for title in titles)
        if passed and check:
            try:
                checked = await run_command(shell_argv(check), timeout=5)
                passed = checked.returncode == 0
            except CommandNotRunnable:
                passed = False
        waited = time.monotonic() - start
        if passed:
            return web.json_response({**response, "verification": "passed", "wait_time": waited})
        if waited >= max_wait:
            failed = {**response, "status": "verification_failed", "verification": "failed"}
            return web.json_response({**failed, "wait_time": waited}, status=500)
        await asyncio.sleep(min(interval, max(0.0, max_wait - waited)))


@routes.post("/run_python")
async def run_python(request: web.Request) -> web.Response:
    """Run a Python snippet in a fresh interpreter (the guest's, which has pyautogui)."""
    body = await read_json(request)
    code = require_str(body, "code")
    timeout = optional_number(body, "timeout", RUN_PYTHON_TIMEOUT_S, low=0.001, high=MAX_TIMEOUT_S)
    with tempfile.TemporaryDirectory(prefix="cua_run_python_") as tmp:
        script = Path(tmp) / "snippet.py"
        script.write_text(code, encoding="utf-8")
        result = await run_command([sys.executable, str(script)], timeout=timeout)
    out, err = result.stdout, result.stderr
    if result.timed_out:
        status = "timeout"
        err = err or f"Execution timeout: the code ran longer than {timeout:g} s"
    elif result.returncode != 0:
        status = "error"
        err = err or f"Process exited with code {result.returncode}"
    else:
        status = "success"
    message = out + ("\n" if out and err else "") + err
    return web.json_response(
        {
            "status": status,
            "message": message,
            "need_more": False,
            "output": out,
            "error": err,
            "return_code": result.returncode,
        }
    )


def _working_dir(body: dict[str, Any]) -> str | None:
    """The optional working_dir field, expanded; it must be an existing directory."""
    working_dir = body.get("working_dir")
    if working_dir is None:
        return None
    if not isinstance(working_dir, str):
        raise BadRequest(f"working_dir: expected a string path, got {working_dir!r}")
    path = Path(working_dir).expanduser()
    if not path.is_dir():
        raise BadRequest(f"working_dir: {path} does not exist or is not a directory")
    return str(path)


@routes.post("/run_bash_script")
async def run_bash_script(request: web.Request) -> web.Response:
    """Run a bash script with stderr merged into stdout, as OSWorld does."""
    body = await read_json(request)
    script = require_str(body, "script")
    timeout = optional_number(body, "timeout", RUN_BASH_TIMEOUT_S, low=0.001, high=MAX_TIMEOUT_S)
    working_dir = _working_dir(body)
    if "#!/bin/bash" not in script:
        script = "#!/bin/bash\n\n" + script
    bash = shutil.which("bash") or "/bin/sh"
    with tempfile.TemporaryDirectory(prefix="cua_run_bash_") as tmp:
        path = Path(tmp) / "script.sh"
        path.write_text(script, encoding="utf-8")
        result = await run_command(
            [bash, str(path)], timeout=timeout, cwd=working_dir, merge_stderr=True
        )
    if result.timed_out:
        return web.json_response(
            {
                "status": "timeout",
                "output": result.stdout,
                "error": "",
                "returncode": -1,
                "message": f"Script execution timed out after {timeout:g} seconds",
            }
        )
    return web.json_response(
        {
            "status": "success" if result.returncode == 0 else "error",
            "output": result.stdout,
            "error": "",
            "returncode": result.returncode,
        }
    )


@routes.post("/act")
async def act(request: web.Request) -> web.Response:
    """Run pyautogui code in the persistent worker: {code, timeout?} -> {status, output, error}."""
    body = await read_json(request)
    code = require_str(body, "code")
    worker = request.app[GUEST].worker
    timeout = optional_number(body, "timeout", worker.default_timeout, low=0.001, high=3600)
    try:
        return web.json_response(await worker.run(code, timeout))
    except WorkerUnavailable as exc:
        return json_error(503, str(exc))
