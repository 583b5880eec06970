"""The host forwarder as local desktops run it: a process serving 127.0.0.1:PORT
from a Unix socket, as the desktop user once bound, refusing planted links."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cua_rl.desktop.providers.local.user import DesktopUser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _echo_server(path: Path, tag: bytes) -> socket.socket:
    """A Unix server answering each connection with `tag` + what it read first."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen()

    def loop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(tag + conn.recv(100))

    threading.Thread(target=loop, daemon=True).start()
    return server


def _ask(port: int) -> bytes:
    """What the forwarded port answers to b"hi" (b"" when the connection is dropped)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"hi")
        try:
            return conn.recv(100)
        except ConnectionResetError:
            return b""


@pytest.fixture
def root_dir() -> Iterator[Path]:
    """A directory `user` can traverse (pytest's tmp_path is under a 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="cua-unix-forward-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def forwarder(root_dir: Path) -> Iterator[tuple[int, Path, subprocess.Popen]]:
    if os.geteuid() != 0:
        pytest.skip("the forwarder drops privileges: needs root")
    try:
        user = DesktopUser.lookup("user")
    except Exception as exc:  # noqa: BLE001 - any lookup failure means no account
        pytest.skip(f"no desktop account `user`: {exc}")
    sock_dir = root_dir / "sock"
    sock_dir.mkdir()
    os.chown(sock_dir, user.uid, user.gid)
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cua_rl.desktop.unix_forward",
            "--user",
            f"{user.uid}:{user.gid}",
            "--forward",
            f"{port}:{sock_dir}/guest.sock",
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "forwarder not up"
            time.sleep(0.05)
    try:
        yield port, sock_dir, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_forwards_to_the_socket_as_the_user_and_refuses_links(
    forwarder: tuple[int, Path, subprocess.Popen], root_dir: Path
) -> None:
    port, sock_dir, proc = forwarder
    status = Path(f"/proc/{proc.pid}/status").read_text()
    uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    assert set(uid_line.split()[1:]) == {str(DesktopUser.lookup("user").uid)}
    assert _ask(port) == b""  # no guest yet: a dropped connection, the forwarder lives on
    trap = _echo_server(root_dir / "trap.sock", b"trap:")
    guest = _echo_server(sock_dir / "real.sock", b"guest:")
    try:
        (sock_dir / "guest.sock").symlink_to(root_dir / "trap.sock")
        assert _ask(port) == b""
        (sock_dir / "guest.sock").unlink()
        (sock_dir / "real.sock").rename(sock_dir / "guest.sock")
        assert _ask(port) == b"guest:hi"
    finally:
        trap.close()
        guest.close()
    assert proc.poll() is None
