"""/execute, /run_python and /run_bash_script, including timeouts with partial output."""

from __future__ import annotations

import time

import aiohttp
import pytest

pytestmark = pytest.mark.desktop


async def test_execute_echo(client: aiohttp.ClientSession) -> None:
    async with client.post("/execute", json={"command": ["echo", "hello guest"]}) as response:
        assert await response.json() == {
            "status": "success",
            "output": "hello guest\n",
            "error": "",
            "returncode": 0,
        }


async def test_execute_shell_string_and_alias(client: aiohttp.ClientSession) -> None:
    body = {"command": "echo out; echo err >&2; exit 3", "shell": True}
    async with client.post("/setup/execute", json=body) as response:
        result = await response.json()
    assert result == {"status": "success", "output": "out\n", "error": "err\n", "returncode": 3}


async def test_execute_timeout_returns_partial_output(client: aiohttp.ClientSession) -> None:
    body = {"command": "echo first; sleep 30; echo never", "shell": True, "timeout": 1}
    started = time.monotonic()
    async with client.post("/execute", json=body) as response:
        result = await response.json()
    assert time.monotonic() - started < 10
    assert result["status"] == "timeout"
    assert result["output"] == "first\n"
    assert "timed out" in result["message"]


async def test_execute_missing_program_is_json_error(client: aiohttp.ClientSession) -> None:
    async with client.post("/execute", json={"command": ["no-such-program-xyz"]}) as response:
        assert response.status == 404  # the request's fault, not the server's (issue 29)
        body = await response.json()
        assert body["status"] == "error" and "no-such-program-xyz" in body["message"]
    async with client.post("/setup/launch", json={"command": ["no-such-app-xyz"]}) as response:
        assert response.status == 404 and "no-such-app-xyz" in (await response.json())["message"]


async def test_run_python(client: aiohttp.ClientSession) -> None:
    async with client.post("/run_python", json={"code": "print(6 * 7)"}) as response:
        result = await response.json()
    assert result["status"] == "success" and result["output"] == "42\n"
    async with client.post("/run_python", json={"code": "raise SystemExit(2)"}) as response:
        result = await response.json()
    assert result["status"] == "error" and result["return_code"] == 2


async def test_run_bash_script_merges_stderr_and_times_out(client: aiohttp.ClientSession) -> None:
    body = {"script": "cd /; pwd; echo oops >&2", "working_dir": "/tmp"}
    async with client.post("/run_bash_script", json=body) as response:
        result = await response.json()
    assert result == {"status": "success", "output": "/\noops\n", "error": "", "returncode": 0}
    body = {"script": "echo partial; sleep 30", "timeout": 1}
    async with client.post("/run_bash_script", json=body) as response:
        result = await response.json()
    assert result["status"] == "timeout" and result["output"] == "partial\n"


async def test_execute_with_verification(client: aiohttp.ClientSession) -> None:
    body = {"command": ["true"], "verification": {"command_success": "test 1 -eq 1"}}
    async with client.post("/execute_with_verification", json=body) as response:
        assert (await response.json())["verification"] == "passed"
    body = {
        "command": ["true"],
        "verification": {"command_success": "false"},
        "max_wait_time": 0.3,
        "check_interval": 0.1,
    }
    async with client.post("/execute_with_verification", json=body) as response:
        assert response.status == 500
        assert (await response.json())["status"] == "verification_failed"
