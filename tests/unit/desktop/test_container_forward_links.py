"""The container forwarder connects to the guest socket itself, never through a
link the desktop planted in its writable run dir (docs/sandbox.md)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cua_rl.desktop.unix_forward import connect_no_follow


def test_connects_to_a_socket_and_refuses_links_and_files(tmp_path: Path) -> None:
    target = tmp_path / "real.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(target))
        server.listen()
        with connect_no_follow(str(target)) as sock:
            server.settimeout(5)
            peer, _ = server.accept()
            peer.close()
            assert sock.family == socket.AF_UNIX
        (tmp_path / "link.sock").symlink_to(target)
        with pytest.raises(OSError, match="not a socket"):
            connect_no_follow(str(tmp_path / "link.sock"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match="not a socket"):
        connect_no_follow(str(tmp_path / "file"))
    with pytest.raises(FileNotFoundError):
        connect_no_follow(str(tmp_path / "missing.sock"))
