"""`check_provider` on two planted local providers it must fail: one leaks a process
past its owner's SIGKILL, one's guest answers without the token. Our providers pass
it in test_sandbox_escapes.py (local, container, qemu: the last test, sharing the
scene's desktops) and aws/test_aws_osworld.py (moto)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support.desktops import local_desktops_unavailable
from tests_support.planted_providers import LeakyLocalProvider, OpenGuestLocalProvider

from cua_rl.desktop import check_provider
from cua_rl.desktop.conformance import ProviderCheckFailed
from cua_rl.desktop.providers.local.config import LocalProviderConfig

pytestmark = pytest.mark.desktop

if (_reason := local_desktops_unavailable()) is not None:
    pytest.skip(_reason, allow_module_level=True)


def _config(tmp_path: Path) -> LocalProviderConfig:
    return LocalProviderConfig(state_dir=tmp_path / "state", ready_timeout_s=60)


async def test_a_process_left_after_the_owners_sigkill_fails_cleanup(tmp_path: Path) -> None:
    provider = LeakyLocalProvider(_config(tmp_path))
    try:
        report = await check_provider(provider, checks=("cleanup",), cleanup_deadline_s=2)
    finally:
        await provider.close()
    assert report.failures and report.failures[0].startswith(
        "cleanup: 2 s after the owner's SIGKILL, process "
    )
    assert "(sleep 300)" in report.failures[0] and len(report.failures) == 1, report
    with pytest.raises(ProviderCheckFailed, match="1 check\\(s\\) failed\ncleanup: "):
        report.raise_if_failed()


async def test_a_guest_answering_without_the_token_fails_auth(tmp_path: Path) -> None:
    provider = OpenGuestLocalProvider(_config(tmp_path))
    try:
        report = await check_provider(provider, checks=("auth",))
    finally:
        await provider.close()
    assert report.failures == [
        "auth: GET /platform without a token answered 200 (expected 401 or 403)"
    ], report
