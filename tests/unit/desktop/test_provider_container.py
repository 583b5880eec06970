"""The container provider's command line: no network, no privileges, limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.desktop.providers.container.config import ContainerProviderConfig
from cua_rl.desktop.providers.container.limits import check_host_uid
from cua_rl.desktop.providers.container.provider import ContainerProvider
from cua_rl.desktop.providers.factory import make_provider
from cua_rl.errors import DesktopError
from cua_rl.images.recipe import UID


def provider(tmp_path: Path, **kw) -> ContainerProvider:
    return ContainerProvider(ContainerProviderConfig(state_dir=tmp_path, engine="docker", **kw))


def test_run_argv_isolates_and_limits_the_desktop(tmp_path: Path) -> None:
    limits = {"memory_mb": 3072, "pids": 700, "home_mb": 64, "tmp_mb": 32}
    argv = provider(tmp_path, cpus=1.5, limits=limits, image="img:1").run_argv("d1", 41000)
    joined = " ".join(argv)
    assert argv[:2] == ["docker", "run"] and argv[-1] == "img:1"
    assert "--network none" in joined and "--cap-drop ALL" in joined
    assert "--hostname cua-desktop" in joined  # as local desktops and VMs
    # root only for the init that binds the guest's socket, then `user` (issue 29)
    assert "--user 0:0" in joined and "no-new-privileges" in joined
    caps = [argv[i + 1] for i, a in enumerate(argv) if a in ("--cap-add", "--cap-drop")]
    assert caps == ["ALL", "SETUID", "SETGID"], caps
    assert "--cpus 1.5" in joined and "--memory 3072m --memory-swap 3072m" in joined
    assert "--pids-limit 700" in joined and "--cpu-shares 512" in joined
    # bounded storage: a read-only root, every writable place a capped tmpfs
    assert "--read-only" in argv and "--log-opt max-size=1m" in joined
    tmpfs = {argv[i + 1].split(":")[0]: argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"}
    assert set(tmpfs) == {"/home/user", "/tmp", "/var/tmp", "/run"}, tmpfs
    assert f"size=64m,mode=755,exec,uid={UID},gid={UID}" in tmpfs["/home/user"]
    assert all("size=32m" in tmpfs[p] for p in ("/tmp", "/var/tmp", "/run"))
    assert "--label cua-rl.desktop=d1" in joined and "--label cua-rl.port=41000" in joined
    assert f"{tmp_path}/d1/run:/run/cua" in joined
    assert "-p" not in argv and "--publish" not in argv


def test_chromiums_devtools_get_a_socket_of_their_own_when_asked(tmp_path: Path) -> None:
    """Issue 50: the host reaches a container's Chromium on 9222 as a local desktop's,
    through a second socket the root init binds in the run dir (`cdp.sock`)."""
    argv = provider(tmp_path).run_argv("d1", 41000, cdp_port=41001)
    joined = " ".join(argv)
    assert "--label cua-rl.cdp-port=41001" in joined
    assert "-e CUA_CDP_LISTEN=unix:/run/cua/cdp.sock" in joined
    assert "CUA_CDP_LISTEN" not in " ".join(provider(tmp_path).run_argv("d1", 41000))
    handle = provider(tmp_path)._handle("d1", 41000, "tok", "running", 41001)
    assert handle.cdp_port == 41001 and handle.guest_client().cdp_port == 41001


@pytest.mark.parametrize(
    "arg", ["--network=host", "--privileged", "--cap-add", "--user=1000", "-u"]
)
def test_extra_args_cannot_open_the_sandbox(tmp_path: Path, arg: str) -> None:
    with pytest.raises(DesktopError, match="may not contain"):
        provider(tmp_path, extra_args=[arg]).run_argv("d1", 41000)


def test_registry_builds_it_from_config() -> None:
    from pydantic import TypeAdapter

    from cua_rl.desktop.providers.config import ProviderConfig

    config = TypeAdapter(ProviderConfig).validate_python({"type": "container", "engine": "docker"})
    assert isinstance(make_provider(config, owner_pid=1), ContainerProvider)


def test_without_limits_the_root_is_the_engines_writable_overlay(tmp_path: Path) -> None:
    argv = provider(tmp_path, limits={"enabled": False}).run_argv("d1", 41000)
    assert "--read-only" not in argv and "--tmpfs" not in argv and "--memory" not in argv
    assert (
        provider(tmp_path, limits={"enabled": False})
        ._handle("d1", 41000, None, "running")
        .info["limits"]
        is None
    )


def test_limits_are_reported_in_the_handle(tmp_path: Path) -> None:
    info = provider(tmp_path)._handle("d1", 41000, None, "running").info["limits"]
    assert info["pids"] == 2048 and info["memory_mb"] == 4096 and info["uid"] == UID
    assert info["root"] == "read-only" and info["run_dir"] == "host disk"  # not mounted


def test_the_desktops_uid_must_be_no_host_account(tmp_path: Path) -> None:
    check_host_uid(UID, subid_files=())  # no account holds it here
    with pytest.raises(DesktopError, match="host account 'root'"):
        check_host_uid(0, subid_files=())
    subuid = tmp_path / "subuid"
    subuid.write_text("garbage\nuser:100000:65536\n")
    check_host_uid(UID, subid_files=(str(subuid),))
    with pytest.raises(DesktopError, match=r"subuid's range of 'user' \(100000\+65536\)"):
        check_host_uid(100000, subid_files=(str(subuid),))
