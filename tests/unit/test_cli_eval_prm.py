"""`cua-rl eval-prm` on bad input: one clear line, and a bad answer costs its step only."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests_support.fake_answers import GARBAGE, NOT_JSON, votes
from tests_support.fake_model_server import FakeModelConfig, FakeModelServer
from tests_support.held_out_runs import PLAN, build_held_out_run, marker

from cua_rl.cli import cli


def _one_error_line(args: list[str], exit_code: int = 1) -> str:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == exit_code, result.output
    assert isinstance(result.exception, SystemExit)  # not an uncaught error
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.output
    return errors[0]


def test_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    line = _one_error_line(
        ["eval-prm", str(tmp_path), "--out", str(tmp_path / "out"), "--url", "http://127.0.0.1:9"]
    )
    assert str(tmp_path) in line and "run.sqlite" in line
    assert not (tmp_path / "out").exists()  # refused before anything was written
    (tmp_path / "run.sqlite").write_bytes(b"this is not a database at all" * 100)
    line = _one_error_line(
        ["eval-prm", str(tmp_path), "--out", str(tmp_path / "out"), "--url", "http://127.0.0.1:9"]
    )
    assert "not a readable cua-rl run store" in line


@pytest.mark.parametrize(
    "args, says",
    [
        (["--model", "tiny", "--url", "http://127.0.0.1:9"], "one of them"),
        ([], "one of them"),
        (
            ["--url", "http://127.0.0.1:9", "--label-votes", "5"],
            "--label-votes goes with --label-url",
        ),
        (["--url", "http://127.0.0.1:9", "--threads", "2"], "--threads goes with --model"),
        (["--model", "tiny", "--served-name", "x"], "--served-name goes with --url"),
    ],
)
def test_usage_errors(tmp_path: Path, args: list[str], says: str) -> None:
    line = _one_error_line(
        ["eval-prm", str(tmp_path), "--out", str(tmp_path / "o"), *args], exit_code=2
    )
    assert says in line


async def _eval_prm(run_dir: Path, out: Path, url: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cua_rl.cli",
        "eval-prm",
        str(run_dir),
        "--out",
        str(out),
        "--url",
        url,
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, stdout.decode(), stderr.decode()


async def test_a_judge_answering_garbage_loses_steps_not_the_command(tmp_path: Path) -> None:
    build_held_out_run(tmp_path / "run").close()
    server = FakeModelServer(
        FakeModelConfig(answer=votes({marker("ta2", 1): NOT_JSON}, default=(GARBAGE, GARBAGE, 1)))
    )
    await server.start()
    try:
        code, stdout, stderr = await _eval_prm(tmp_path / "run", tmp_path / "out", server.url)
    finally:
        await server.stop()
    assert code == 0, stderr
    report = json.loads(stdout)
    o = report["overall"]
    assert (o["steps"], o["failed_requests"], o["unparseable_votes"]) == (6, 1, 12)
    # every verdict +1: right on ta1 (3 steps) and tb1 (2), wrong on ta2/0 (it failed)
    assert o["outcome_accuracy"] == pytest.approx(5 / 6)
    lost = [line for line in stderr.splitlines() if "lost" in line]
    assert len(lost) == 1 and "step 1 of ta2" in lost[0] and server.url in lost[0]
    assert {Path(p).name for p in report["files"]} == {"report.json", "report.md", "report.png"}


async def test_a_run_whose_every_step_is_lost_fails_after_its_report(tmp_path: Path) -> None:
    build_held_out_run(tmp_path / "run").close()
    every = {marker(p.tid, i): NOT_JSON for p in PLAN for i in range(p.steps)}
    server = FakeModelServer(FakeModelConfig(answer=votes(every)))
    await server.start()
    try:
        code, stdout, stderr = await _eval_prm(tmp_path / "run", tmp_path / "out", server.url)
    finally:
        await server.stop()
    assert code == 1 and stdout == ""
    assert stderr.strip().splitlines()[-1].startswith("Error: ")
    assert "no step was judged (7 lost" in stderr and "report.md" in stderr
    assert (tmp_path / "out" / "report.md").is_file()
