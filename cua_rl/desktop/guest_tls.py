"""How a `GuestClient` verifies a guest served over HTTPS (docs/guest-protocol.md):
a pinned SHA-256 certificate fingerprint, a CA file, or the system's CAs."""

from __future__ import annotations

import ssl

import aiohttp

from cua_rl.errors import ConfigError


def tls_settings(
    url: str, fingerprint: str | None, ca_file: str | None
) -> aiohttp.Fingerprint | ssl.SSLContext | bool:
    """What aiohttp verifies an https guest with: a pinned certificate fingerprint, a CA
    file, or (neither) the system's CAs. Pinning over plain http is refused: it would
    silently protect nothing."""
    if fingerprint is None and ca_file is None:
        return True
    if not url.startswith("https://"):
        raise ConfigError(f"guest {url}: a TLS fingerprint or CA file needs an https:// URL")
    if fingerprint is not None and ca_file is not None:
        raise ConfigError(f"guest {url}: give a TLS fingerprint or a CA file, not both")
    if ca_file is not None:
        try:
            return ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"guest CA file {ca_file}: cannot load it ({exc})") from None
    assert fingerprint is not None
    digest = fingerprint.replace(":", "").strip().lower()
    try:
        raw = bytes.fromhex(digest)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise ConfigError(
            f"guest {url}: TLS fingerprint must be a SHA-256 digest (64 hex digits, colons "
            f"allowed), got {fingerprint[:80]!r}"
        )
    return aiohttp.Fingerprint(raw)
