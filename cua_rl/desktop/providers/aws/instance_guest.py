"""The guest on an EC2 instance of the `aws` provider, as the pool reaches it: its
address and URL, the certificate fingerprint a handle pins and the token it carries
(`instance_handle`), and waiting until it answers (`wait_guest`).

It is apart from aws/provider.py, which launches, waits for, resets and stops the
instances themselves: these functions only read an instance's description (from
DescribeInstances) and the provider's config, and the fleet hosts
(aws/fleet_hosts.py) read the slots' fingerprints with the same `pinned_fingerprint`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from cua_rl.desktop.providers.aws.api import tag
from cua_rl.desktop.providers.aws.config import (
    TAG_DESKTOP,
    TAG_EXPIRES,
    TAG_RUN,
    TAG_TLS,
    AwsProviderConfig,
)
from cua_rl.desktop.providers.aws.tls import instance_token
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.errors import DesktopError, GuestError, GuestUnavailable

log = logging.getLogger(__name__)

FINGERPRINT = re.compile(r"[0-9a-f]{64}")
GuestUrl = Callable[[dict[str, Any]], str]


def address(config: AwsProviderConfig, instance: dict[str, Any]) -> str | None:
    key = "PublicIpAddress" if config.address == "public" else "PrivateIpAddress"
    return instance.get(key)


def default_url(config: AwsProviderConfig, instance: dict[str, Any]) -> str:
    scheme = "https" if config.image_kind == "cua" else "http"
    return f"{scheme}://{address(config, instance)}:{config.guest_port}"


def pinned_fingerprint(instance: dict[str, Any], key: str) -> str | None:
    """The fingerprint in tag `key`; None (with a warning) for a malformed one."""
    pin = tag(instance, key)
    if pin is not None and not FINGERPRINT.fullmatch(pin):
        log.warning(
            "aws provider: instance %s: tag %s is not a SHA-256 fingerprint "
            "(%r); not pinning, so its guest will be refused",
            instance["InstanceId"],
            key,
            pin[:80],
        )
        return None
    return pin


def instance_handle(
    config: AwsProviderConfig, instance: dict[str, Any], guest_url: GuestUrl, provider: str
) -> DesktopHandle:
    """The handle of one instance's desktop (fleet hosts add their slot to it)."""
    state = instance.get("State", {}).get("Name", "")
    desktop_id = tag(instance, TAG_DESKTOP) or instance["InstanceId"]
    url = guest_url(instance) if address(config, instance) else ""
    # image_kind 'cua': the pin from the launch tag; an instance without one (launched
    # by hand) gets none, and the client then refuses its self-signed certificate
    pin = pinned_fingerprint(instance, TAG_TLS) if config.image_kind == "cua" else None
    token = config.guest_token
    if config.image_kind == "cua":  # the run's token itself never leaves the host
        token = instance_token(token, pin) if token and pin else None
    return DesktopHandle(
        id=desktop_id,
        url=url,
        token=token,
        provider=provider,
        tls_fingerprint=pin,
        info={
            "instance_id": instance["InstanceId"],
            "state": state,
            "alive": state == "running",
            "private_ip": instance.get("PrivateIpAddress"),
            "public_ip": instance.get("PublicIpAddress"),
            "expires_at": tag(instance, TAG_EXPIRES),
            "run": tag(instance, TAG_RUN),
            "limits": {"instance_type": instance.get("InstanceType"), "ttl_s": config.ttl_s},
        },
    )


async def wait_guest(handle: DesktopHandle, deadline_s: float) -> None:
    """Wait until the handle's guest answers (the provider's default probe)."""
    async with handle.guest_client() as client:
        try:
            await client.wait_ready(deadline_s, interval_s=1.0)
        except GuestUnavailable as exc:
            raise DesktopError(
                f"aws provider: instance {handle.info['instance_id']}: "
                f"{exc}{await _last_answer(handle)}"
            ) from exc


async def _last_answer(handle: DesktopHandle) -> str:
    """Why a guest is not ready, for the error: readiness polls only say "no", and a
    certificate that is not the pinned one must be named, not reported as a timeout."""
    async with handle.guest_client(timeout=5.0) as client:
        try:
            await client.platform()
        except (GuestError, GuestUnavailable) as exc:
            return f" (last answer: {exc})"
    return ""
