"""TLS and user data for instances of our baked AMI (`image_kind: cua`).

The host makes each instance's certificate and key itself, before the launch, and
hands them (with the guest token) to the instance in its user data; the
certificate's SHA-256 fingerprint goes on the instance as a tag. So the host pins
the exact certificate from the first request on: no trust on first use, nothing
read back from the console. Each instance has its own pair and its own token, so
what one desktop can read of its user data (see docs/security.md) opens no other:
the token is an HMAC of the run's `guest_token` and the instance's fingerprint,
which any process of the run recomputes from the tag while the run's secret never
leaves the host.

The user data is a cloud-config: `write_files` runs in cloud-init's first stage,
before network-online.target and so before cua-guest.service starts; the
`systemctl restart` in `runcmd` makes the guest take the new pair even if an image
orders its units differently.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
from dataclasses import dataclass

import yaml

from cua_rl.errors import DesktopError

TLS_DIR = "/etc/cua-guest/tls"
TOKEN_PATH = "/etc/cua-guest/token"
GUEST_USER = "user"
"""The desktop session user of the OSWorld image, which the guest unit runs as."""
VALIDITY = datetime.timedelta(days=30)
"""Longer than any instance lives (`ttl_s` is at most 14 days); pins ignore it anyway."""
USER_DATA_LIMIT = 16 * 1024
"""EC2's limit on user data, before base64."""


@dataclass(frozen=True, slots=True)
class GuestPair:
    """One instance's certificate and key (PEM) and the certificate's SHA-256 (hex)."""

    cert_pem: str
    key_pem: str
    fingerprint: str

    def __repr__(self) -> str:  # never print the key
        return f"GuestPair(fingerprint={self.fingerprint!r})"


def make_pair(common_name: str, now: datetime.datetime | None = None) -> GuestPair:
    """A self-signed EC P-256 pair (what `python -m cua_guest.tls` makes in an image);
    about 1 ms (measured), so it runs on the event loop."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError as exc:
        raise DesktopError(
            "aws provider: image_kind 'cua' needs the 'cryptography' package "
            "(pip install 'cua-rl[aws]')"
        ) from exc
    now = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))  # clock skew
        .not_valid_after(now + VALIDITY)
        .sign(key, hashes.SHA256())
    )
    der = cert.public_bytes(serialization.Encoding.DER)
    return GuestPair(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM).decode(),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
        fingerprint=hashlib.sha256(der).hexdigest(),
    )


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]  # a base class chosen at run time (libyaml's when built)
    """Multi-line strings (PEM) as `|` blocks, so the user data reads as it is written.
    libyaml's dumper when present: 0.6 ms per user data against 6.5 ms in pure Python
    (measured), which matters on the event loop when a fleet launches at once."""


_Dumper.add_representer(
    str,
    lambda dumper, data: dumper.represent_scalar(
        "tag:yaml.org,2002:str", data, style="|" if "\n" in data else None
    ),
)


def instance_token(run_token: str, fingerprint: str) -> str:
    """The bearer token of the instance whose certificate has `fingerprint`: derived, so
    it needs no storage, and one instance's token tells nothing about another's or
    about `run_token`."""
    mac = hmac.new(
        run_token.encode(), b"cua-rl guest token\0" + fingerprint.encode(), hashlib.sha256
    )
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def cloud_config(pair: GuestPair, run_token: str, shutdown_minutes: int | None) -> str:
    """User data giving the guest its pair and its token (`instance_token`; both
    readable by root and the session user only), restarting it, and scheduling the
    ttl shutdown when asked."""
    token = instance_token(run_token, pair.fingerprint)
    private = {"permissions": "0640", "owner": f"root:{GUEST_USER}"}
    config = {
        "write_files": [
            {
                "path": f"{TLS_DIR}/guest.crt",
                "permissions": "0644",
                "owner": "root:root",
                "content": pair.cert_pem,
            },
            {"path": f"{TLS_DIR}/guest.key", **private, "content": pair.key_pem},
            {
                "path": f"{TLS_DIR}/guest.sha256",
                "permissions": "0644",
                "owner": "root:root",
                "content": pair.fingerprint + "\n",
            },
            {"path": TOKEN_PATH, **private, "content": token + "\n"},
        ],
        "runcmd": [["systemctl", "restart", "cua-guest.service"]],
    }
    if shutdown_minutes is not None:
        config["runcmd"].append(["shutdown", "-h", f"+{shutdown_minutes}", "cua-rl ttl reached"])
    text = "#cloud-config\n" + yaml.dump(config, Dumper=_Dumper, sort_keys=False, width=1000)
    if len(text.encode()) > USER_DATA_LIMIT:  # a token of absurd length
        raise DesktopError(
            f"aws provider: user data of {len(text.encode())} bytes exceeds EC2's {USER_DATA_LIMIT}"
        )
    return text
