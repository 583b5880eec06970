"""A run stopped by SIGTERM unwinds like Ctrl-C and is reported as interrupted in
one line, not as a failure with a traceback."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from click.testing import CliRunner

from cua_rl.cli import cli
from cua_rl.errors import CuaRlError
from cua_rl.runtime.stoppable import RunInterrupted, run_stoppable, sigterm_as_interrupt


def test_sigterm_cancels_the_run_and_unwinds_it() -> None:
    unwound = []

    async def run() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(30)
        finally:
            unwound.append(True)

    with pytest.raises(RunInterrupted) as caught:
        run_stoppable(run())
    assert unwound == [True]
    assert isinstance(caught.value, CuaRlError) and caught.value.interrupted


def test_sigterm_runs_the_cleanup_of_synchronous_code_as_ctrl_c_does() -> None:
    cleaned = []
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        with sigterm_as_interrupt():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(300):  # the handler runs between bytecodes: at once
                    time.sleep(0.1)
            finally:
                cleaned.append(True)
    assert cleaned == [True]
    assert signal.getsignal(signal.SIGTERM) == before  # the previous handler is back


def test_an_interrupted_run_is_one_line(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object, **kwargs: object) -> dict[str, object]:
        raise RunInterrupted(
            "interrupted; run the same command with --resume (train) or again (eval) to continue"
        )

    monkeypatch.setattr("cua_rl.runtime.run_launch.launch_rollout", interrupted)
    result = CliRunner().invoke(
        cli, ["rollout", "--preset", "quickstart", "--out", str(tmp_path / "run")]
    )
    assert result.exit_code == 1
    assert result.output == (
        "Error: interrupted; run the same command with --resume "
        "(train) or again (eval) to continue\n"
    )
