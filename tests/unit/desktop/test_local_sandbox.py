"""The sandbox's command line and the guest venv's key, as pure logic (the escape
suite checks the real thing: tests/integration/desktop/test_sandbox_escapes.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cua_rl.desktop.providers.local.etc_view import etc_entries
from cua_rl.desktop.providers.local.guest_env import content_hash, venv_path
from cua_rl.desktop.providers.local.sandbox import (
    CHROME_EXE,
    DEV_SHM_BYTES,
    OPENBOX_KEYS,
    OSWORLD_BUS,
    SESSION_BUS,
    SESSION_SCRIPT,
    SHIM_BIN,
    ListenFds,
    SandboxFds,
    SandboxSpec,
    bwrap_argv,
    host_forwarder,
    sandbox_env,
)
from cua_rl.desktop.providers.local.user import chrome_shim

SPEC = SandboxSpec(
    desktop_id="d1",
    display=201,
    width=800,
    height=600,
    window_manager="openbox",
    uid=1001,
    gid=1001,
    user="user",
    guest_port=4321,
)


def test_env_is_an_allowlist() -> None:
    env = sandbox_env(
        {
            "HF_TOKEN": "secret",
            "PYTHONPATH": "/work",
            "PATH": "/root/.pyenv/shims",
            "LANG": "de_DE.UTF-8",
            "LC_TIME": "C",
            "AWS_SECRET_ACCESS_KEY": "x",
        },
        SPEC,
    )
    assert "HF_TOKEN" not in env and "PYTHONPATH" not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert env["LANG"] == "de_DE.UTF-8" and env["LC_TIME"] == "C"
    assert "/root" not in env["PATH"] and env["DISPLAY"] == ":201"


LISTEN = ListenFds(guest=11, cdp=12)


def test_bwrap_gets_its_own_namespaces_and_a_clear_env() -> None:
    argv = bwrap_argv(SPEC, {"A": "1"}, SandboxFds(token=7, shim=None), "/stage", LISTEN)
    assert argv[0] == "bwrap" and "--unshare-all" in argv and "--clearenv" in argv
    assert "--share-net" not in argv and "--die-with-parent" in argv
    assert argv[argv.index("--uid") + 1] == "1001"
    binds = {argv[i + 1] for i, a in enumerate(argv) if a in ("--bind", "--ro-bind")}
    etc = {b for b in binds if b.startswith("/etc/")}
    assert binds - etc <= {
        "/usr",
        "/var/cache/fontconfig",
        "/var/lib/dbus",
        "/var/lib/dpkg",
        "/stage/home",
        "/stage/guest",
        "/bin",
        "/sbin",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
    }, binds
    assert "/etc" not in binds and etc and etc <= set(etc_entries()), etc  # the allowlist
    # Own network: the guest and DevTools serve on listening sockets handed over as
    # descriptors; the directory holding their paths is never bound inside.
    assert argv[-2:] == ["11", "12"]
    assert not any("/stage/sock" in a for a in argv)


def test_osworlds_bus_path_and_terminal_key_lead_to_the_desktops_own() -> None:
    argv = bwrap_argv(SPEC, {}, SandboxFds(token=7, shim=None), "/stage", LISTEN)
    # Tasks export DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus (OSWorld's uid).
    at = argv.index(OSWORLD_BUS)
    assert OSWORLD_BUS == "/run/user/1000/bus" and argv[at - 2 : at] == ["--symlink", SESSION_BUS]
    assert sandbox_env({}, SPEC)["DBUS_SESSION_BUS_ADDRESS"] == f"unix:path={SESSION_BUS}"
    # Ctrl+Alt+T: openbox runs on its default rc.xml plus GNOME's terminal key.
    assert 'key="C-A-t"' in OPENBOX_KEYS and "gnome-terminal" in OPENBOX_KEYS
    assert OPENBOX_KEYS in SESSION_SCRIPT and "--config-file" in SESSION_SCRIPT


def test_a_desktop_without_network_needs_its_listening_sockets() -> None:
    with pytest.raises(ValueError, match="ListenFds"):
        bwrap_argv(SPEC, {}, SandboxFds(token=7, shim=None), "/stage")


def test_network_option_shares_the_host_net_without_forwarders() -> None:
    spec = replace(SPEC, window_manager="", network=True)
    argv = bwrap_argv(spec, {}, SandboxFds(token=7, shim=8), "/stage")
    assert "--share-net" in argv and argv[-3:] == ["4321", "", ""]


def test_chrome_shim_execs_chromium_as_an_executable_named_chrome(tmp_path: Path) -> None:
    # `pkill chrome` (OSWorld's postconfigs) matches /proc/PID/comm, which Chromium
    # sets from /proc/self/exe: a bind mount named chrome, its siblings linked beside.
    install = tmp_path / "chromium"
    install.mkdir()
    for name in ("chromium", "icudtl.dat", "locales"):
        (install / name).touch()
    spec = replace(SPEC, window_manager="", chrome_binary=str(install / "chromium"), guest_port=0)
    argv = bwrap_argv(spec, {}, SandboxFds(token=7, shim=8), "/stage", LISTEN)
    binds = [argv[i + 1 : i + 3] for i, a in enumerate(argv) if a == "--ro-bind"]
    assert [str(install / "chromium"), CHROME_EXE] in binds
    assert CHROME_EXE.rsplit("/", 1)[1] == "chrome"
    links = {argv[i + 2]: argv[i + 1] for i, a in enumerate(argv) if a == "--symlink"}
    assert links["/tmp/.cua-chrome/icudtl.dat"] == str(install / "icudtl.dat")
    assert "/tmp/.cua-chrome/locales" in links
    assert CHROME_EXE not in bwrap_argv(SPEC, {}, SandboxFds(token=7, shim=None), "/stage", LISTEN)
    exec_line = chrome_shim().splitlines()[-1]
    assert exec_line.startswith(f"exec {CHROME_EXE} $CHROMIUM_FLAGS ")
    assert exec_line.endswith('"$@"')  # the task's own flags last


def test_host_forwarder_serves_each_socket_and_drops_to_the_user() -> None:
    argv = host_forwarder("/py", {"guest": 40001, "cdp": 40002}, "/stage/sock", 1001, 1002)
    assert argv[:3] == ["/py", "-m", "cua_rl.desktop.unix_forward"]
    assert argv[argv.index("--user") + 1] == "1001:1002"
    forwards = [argv[i + 1] for i, a in enumerate(argv) if a == "--forward"]
    assert forwards == ["40001:/stage/sock/guest.sock", "40002:/stage/sock/cdp.sock"]


def test_guest_venv_is_keyed_by_content(tmp_path: Path) -> None:
    src = tmp_path / "guest"
    (src / "cua_guest" / "__pycache__").mkdir(parents=True)
    (src / "pyproject.toml").write_text("[project]\nname='cua-guest'\n")
    (src / "cua_guest" / "__init__.py").write_text("A = 1\n")
    first = content_hash(src)
    (src / "cua_guest" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert content_hash(src) == first
    (src / "cua_guest" / "__init__.py").write_text("A = 2\n")
    assert content_hash(src) != first
    assert venv_path(src, Path("/opt/x")) == Path("/opt/x") / f"guest-venv-{content_hash(src)}"


def test_limits_size_every_tmpfs_and_no_nested_user_namespace() -> None:
    spec = replace(SPEC, window_manager="", tmp_bytes=64 << 20, guest_port=0)
    argv = bwrap_argv(spec, {}, SandboxFds(token=7, shim=None), "/stage", LISTEN)
    sized = {
        argv[i + 3]: argv[i + 1]
        for i, a in enumerate(argv)
        if a == "--size" and argv[i + 2] == "--tmpfs"
    }
    assert sized == {
        "/tmp": str(64 << 20),
        "/run": str(64 << 20),
        "/var/tmp": str(64 << 20),
        "/home": str(1 << 20),
        "/dev/shm": str(DEV_SHM_BYTES),
    }
    # /dev read-only once its /dev/shm is mounted (bwrap runs its arguments in order)
    assert argv.index("--remount-ro") > argv.index("/dev/shm") > argv.index("--dev")
    assert argv[argv.index("--remount-ro") + 1] == "/dev"
    assert {"--unshare-user", "--disable-userns"} <= set(argv)


def test_seccomp_program_denies_each_listed_call_and_other_abis() -> None:
    import struct

    from cua_rl.desktop.providers.local.seccomp import DENIED_X86_64, program

    code = program()
    insns = [struct.unpack("=HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    assert len(insns) == 5 + len(set(DENIED_X86_64.values())) + 2
    deny, allow = len(insns) - 1, len(insns) - 2
    assert insns[deny] == (0x06, 0, 0, 0x00050000 | 1) and insns[allow][3] == 0x7FFF0000
    for index, (op, jt, _jf, k) in enumerate(insns[5:allow], start=5):
        assert op == 0x15 and index + 1 + jt == deny, (index, k)
    assert {k for op, *_, k in insns[5:allow]} == set(DENIED_X86_64.values())
    spec = replace(SPEC, window_manager="", guest_port=0)
    argv = bwrap_argv(spec, {}, SandboxFds(token=7, shim=None, seccomp=9), "/stage", LISTEN)
    assert argv[argv.index("--seccomp") + 1] == "9"


def test_the_desktops_sudo_is_the_rootless_script_first_on_path() -> None:
    argv = bwrap_argv(SPEC, {}, SandboxFds(token=7, shim=None, sudo=9), "/stage", LISTEN)
    at = argv.index(f"{SHIM_BIN}/sudo")
    assert argv[at - 2 : at] == ["--file", "9"] and argv[at - 3] == "0755"
    assert SandboxFds(token=7, shim=None, sudo=9).all() == (7, 9)
