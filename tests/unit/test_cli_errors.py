"""Every command reports our errors and OS refusals as one line, in one place."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests_support.mounts import fill, tmpfs

from cua_rl.cli import cli
from cua_rl.errors import ConfigError, StoreError, describe_os_error, user_message


def _fails_with_one_line(args: list[str], *expected: str) -> str:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # not an uncaught error
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and result.output.strip().endswith(errors[0]), result.output
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


def test_translation_finds_our_error_in_groups_and_causes() -> None:
    wrapped = ExceptionGroup("tg", [ValueError("x"), ExceptionGroup("inner", [ConfigError("c")])])
    assert user_message(wrapped) == "c"
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/runs/a/run.sqlite")
        except OSError as exc:
            raise RuntimeError("write failed") from exc
    except RuntimeError as outer:
        assert user_message(outer) == "/runs/a/run.sqlite: no space left on device"
    assert user_message(KeyError("bug")) is None  # a bug keeps its traceback
    bind = OSError(
        errno.EADDRINUSE,
        "error while attempting to bind on address ('127.0.0.1', 8765): address already in use",
    )
    assert describe_os_error(bind) == "port 8765 on 127.0.0.1: address already in use"


def test_port_in_use(tmp_path: Path) -> None:
    from cua_rl.store.run_store import RunStore

    RunStore(tmp_path).close()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        _fails_with_one_line(
            ["view", str(tmp_path), "--port", str(port)], f"port {port} on 127.0.0.1", "in use"
        )


def test_serve_without_a_model(tmp_path: Path) -> None:
    _fails_with_one_line(
        ["serve", "--engine", "hf", "--model", str(tmp_path / "missing")],
        str(tmp_path / "missing"),
        "config.json",
    )


def test_run_dir_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "run"
    _fails_with_one_line(
        ["train", "--preset", "quickstart", "--out", str(out)],
        str(tmp_path / "file"),
        "not a directory",
    )


def test_read_only_run_dir(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "ro") as ro:
        _fails_with_one_line(
            ["train", "--preset", "quickstart", "--out", str(ro / "run")],
            str(ro / "run"),
            "read-only file system",
        )


def test_full_disk(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "full", "size=64k") as full:
        fill(full)
        _fails_with_one_line(
            ["train", "--preset", "quickstart", "--out", str(full / "run")],
            str(full / "run"),
            "no space left on device",
        )


def test_store_on_a_full_disk_is_a_store_error(tmp_path: Path) -> None:
    from cua_rl.store.run_store import RunStore

    with tmpfs(tmp_path / "full", "size=64k") as full:
        (full / "run").mkdir()
        fill(full)
        with pytest.raises((StoreError, OSError)) as caught:
            RunStore(full / "run")
        assert user_message(caught.value) is not None
        assert str(full / "run") in user_message(caught.value)
