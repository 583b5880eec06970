"""The `python -m cua_guest` command line refuses to run without a token."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.desktop


def test_refuses_to_start_without_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != "CUA_GUEST_TOKEN"}
    result = subprocess.run(
        [sys.executable, "-m", "cua_guest", "--host", "127.0.0.1", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "CUA_GUEST_TOKEN" in result.stderr and "--token-file" in result.stderr


def test_refuses_empty_token_file(tmp_path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("\n")
    result = subprocess.run(
        [sys.executable, "-m", "cua_guest", "--port", "1", "--token-file", str(token_file)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "empty" in result.stderr
