"""The container desktop's root init (vm/guest/cua_guest/container_init.py): it
reads only a real token file, leaves the listener on descriptor 3 alone, and
drops every id and capability. Each case that changes descriptors or ids runs in
a child interpreter (the test process keeps its own)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cua_guest import container_init


def _child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )


def test_read_token_takes_a_regular_file_only(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("abc-123_x\n")
    assert container_init.read_token(str(tmp_path)) == "abc-123_x"
    (tmp_path / "token").unlink()
    (tmp_path / "secret").write_text("host secret")
    (tmp_path / "token").symlink_to(tmp_path / "secret")
    with pytest.raises(SystemExit):  # a link is never followed
        container_init.read_token(str(tmp_path))
    (tmp_path / "token").unlink()
    (tmp_path / "token").write_text("two words")
    with pytest.raises(SystemExit):
        container_init.read_token(str(tmp_path))


@pytest.mark.parametrize("fd3_taken", [False, True])
def test_the_listener_ends_on_descriptor_3(tmp_path: Path, fd3_taken: bool) -> None:
    path = tmp_path / "guest.sock"
    path.write_text("left over")  # replaced: only root's own files are ever there
    result = _child(f"""
        import os, socket, stat
        os.closerange(3, 64)
        if {fd3_taken}:
            os.open("/dev/null", os.O_RDONLY)  # fd 3 is something else first
        from cua_guest.container_init import bind_listener
        bind_listener({str(path)!r})
        sock = socket.socket(fileno=3)
        print(os.get_inheritable(3), sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN),
              oct(stat.S_IMODE(os.stat({str(path)!r}).st_mode)),
              sum(os.readlink(f"/proc/self/fd/{{n}}") == os.readlink("/proc/self/fd/3")
                  for n in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{{n}}")))
    """)
    assert result.returncode == 0, result.stderr
    # inheritable, listening, root-only, and no second descriptor of it left open
    assert result.stdout.split() == ["True", "1", "0o600", "1"], result.stdout
    assert stat.S_ISSOCK(path.stat().st_mode)
    client = socket.socket(socket.AF_UNIX)  # the child is gone, and its listener with it
    with pytest.raises(ConnectionRefusedError):
        client.connect(str(path))
    client.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
def test_drop_to_leaves_no_id_and_no_capability() -> None:
    result = _child("""
        import os
        from cua_guest.container_init import drop_to
        entry = drop_to("nobody")
        status = dict(line.split(":", 1) for line in open("/proc/self/status"))
        print(entry.pw_uid, os.getresuid(), os.getresgid(), os.getgroups(),
              status["CapPrm"].strip(), status["CapEff"].strip())
    """)
    assert result.returncode == 0, result.stderr
    uid, rest = result.stdout.split(" ", 1)
    assert rest.strip().endswith("0000000000000000 0000000000000000"), result.stdout
    assert f"({uid}, {uid}, {uid})" in rest, result.stdout


def test_devtools_socket_is_bound_on_descriptor_4_beside_the_guests(tmp_path: Path) -> None:
    """With CUA_CDP_LISTEN the init binds a second root-only socket and hands it to the
    session as descriptor 4 (`CUA_CDP_LISTEN=fd:4`); without it nothing is bound."""
    guest, cdp = tmp_path / "guest.sock", tmp_path / "cdp.sock"
    result = _child(f"""
        import os, socket
        os.closerange(3, 64)
        from cua_guest.container_init import CDP_FD, LISTEN_FD, bind_listener
        bind_listener({str(guest)!r}, LISTEN_FD)
        bind_listener({str(cdp)!r}, CDP_FD)
        for fd in (LISTEN_FD, CDP_FD):
            sock = socket.socket(fileno=fd)
            print(fd, sock.getsockname(), os.get_inheritable(fd))
            sock.detach()
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == [f"3 {guest} True", f"4 {cdp} True"]
    assert oct(stat.S_IMODE(cdp.stat().st_mode)) == "0o600"
    bad = subprocess.run(
        [sys.executable, "-m", "cua_guest.container_init", "/bin/true"],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "CUA_RUN_DIR": str(tmp_path),
            "CUA_GUEST_LISTEN": f"unix:{guest}",
            "CUA_CDP_LISTEN": "tcp:9222",
        },
    )
    assert bad.returncode == 2 and "CUA_CDP_LISTEN='tcp:9222'" in bad.stderr
