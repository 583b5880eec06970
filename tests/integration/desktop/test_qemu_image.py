"""The minimal image booted for real under QEMU (TCG here, KVM where a probe boot
works): the guest answers on 127.0.0.1 through the restricted user-mode network,
takes a screenshot, and a snapshot reset brings back a healthy desktop."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cua_rl.desktop.providers.qemu.config import QemuProviderConfig
from cua_rl.desktop.providers.qemu.provider import QemuProvider

pytestmark = pytest.mark.desktop


async def test_boot_screenshot_and_snapshot_reset(tmp_path: Path,
                                                  minimal_qcow2_image: Path) -> None:
    provider = QemuProvider(QemuProviderConfig(
        image=minimal_qcow2_image, state_dir=tmp_path / "vms", memory_mb=1024, cpus=2,
        vnc=False, ready_timeout_s=420, firmware=None))
    handle = None
    try:
        began = time.monotonic()
        handle = await provider.start("vm1")
        print(f"\nqemu desktop boot took {time.monotonic() - began:.1f} s "
              f"(kvm={handle.info['kvm']}, snapshot={handle.info['snapshot']})")
        assert handle.url.startswith("http://127.0.0.1:") and handle.token
        client = provider.client(handle)
        png = await client.screenshot()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert await client.screen_size() == (1920, 1080)
        who = await client.execute(["id", "-un"])
        assert who.ok and who.output.strip() == "user", who
        assert handle.info["snapshot"], "the booted desktop was not snapshotted"
        await client.upload_file("/home/user/Desktop/made.txt", b"x")
        handle = await provider.reset(handle)
        print(f"qemu snapshot reset took {handle.info['reset_s']:.1f} s")
        client = provider.client(handle)
        assert await provider.health(handle)
        assert await client.get_file("/home/user/Desktop/made.txt") is None
        assert (await client.screenshot())[:8] == b"\x89PNG\r\n\x1a\n"
        assert (await client.execute(["id", "-un"])).output.strip() == "user"
    finally:
        if handle is not None:
            await provider.stop(handle)
        await provider.close()
