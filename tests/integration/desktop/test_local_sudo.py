"""The rootless `sudo` of a local desktop (`local.sudo`), as OSWorld's setups use
it: `echo password | sudo -S apt install PKG -y` succeeds for a package the host
has and fails with apt's 100 for one it lacks, `sudo mkdir ~/...` makes the folder
as `user`, and root's own work fails as it would for `user`. One desktop."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from tests_support.desktops import local_desktops_unavailable

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.desktop.providers.local.provider import LocalProvider
from cua_rl.tasks.rootless_sudo import host_has_package

pytestmark = [pytest.mark.desktop, pytest.mark.asyncio(loop_scope="module")]

if (_reason := local_desktops_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def guest(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GuestClient]:
    provider = LocalProvider(
        LocalProviderConfig(state_dir=tmp_path_factory.mktemp("sudo") / "state")
    )
    handle = await provider.start("sudo")
    try:
        yield provider.client(handle)
    finally:
        await provider.stop(handle)
        await provider.close()


async def _run(guest: GuestClient, command: str) -> tuple[int, str]:
    result = await guest.execute(command, shell=True, timeout=30)
    return result.returncode, (result.output or "") + (result.error or "")


@pytest.mark.skipif(not host_has_package("bash"), reason="no Debian package database here")
async def test_apt_install_of_a_package_the_host_has_succeeds(guest: GuestClient) -> None:
    code, out = await _run(
        guest,
        "echo password | sudo -S apt-get update -y && "
        "echo password | sudo -S apt-get install bash -y",
    )
    assert code == 0, out
    assert "already installed" in out


async def test_apt_install_of_a_missing_package_fails_as_apt_does(guest: GuestClient) -> None:
    code, out = await _run(guest, "echo password | sudo -S apt install -y cua-no-such-package")
    assert code == 100, out
    assert "cua-no-such-package" in out


async def test_sudo_runs_the_command_as_user_without_reading_the_password(
    guest: GuestClient,
) -> None:
    code, out = await _run(
        guest,
        "echo password | sudo -S mkdir ~/Desktop/made_by_sudo && "
        "stat -c %U ~/Desktop/made_by_sudo && "
        "echo password | sudo -S cat",
    )
    assert code == 0, out
    assert out.split() == ["user"], out  # `cat` got nothing: sudo took the password line


async def test_what_only_root_could_do_still_fails(guest: GuestClient) -> None:
    code, out = await _run(guest, "echo password | sudo -S touch /etc/cua-rl-owned")
    assert code != 0 and ("Permission denied" in out or "Read-only" in out), out
    code, out = await _run(guest, "sudo -u root id")
    assert code == 1 and "no root" in out, out
