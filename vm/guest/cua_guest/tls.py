"""TLS for a guest reachable over a network.

The bearer token protects every route, but over plain HTTP it travels in the
clear, so a guest bound to a non-loopback address serves HTTPS. The certificate
is either given (`--tls-cert/--tls-key`, e.g. from the image build) or a
self-signed pair made once in a directory (`--tls-self-signed DIR`); either way
the SHA-256 fingerprint of the certificate is printed and written next to it, so
the host can pin exactly that certificate (no CA needed).

`python -m cua_guest.tls DIR` makes the pair and prints the fingerprint without
starting a server (for image builds). The pair is made with the `cryptography`
package when installed (the `tls` extra), else with the `openssl` command.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import sys
from pathlib import Path

CERT_NAME = "guest.crt"
KEY_NAME = "guest.key"
FINGERPRINT_NAME = "guest.sha256"
#: Self-signed certificates are valid this long; regenerate by deleting the directory.
VALIDITY_DAYS = 3650


class TlsError(Exception):
    """The certificate or key cannot be used (the message names the file)."""


def ensure_self_signed(directory: Path) -> tuple[Path, Path]:
    """The pair in `directory`, made (key 0600) if it does not exist yet."""
    cert, key = directory / CERT_NAME, directory / KEY_NAME
    if cert.is_file() and key.is_file():
        return cert, key
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TlsError(f"--tls-self-signed {directory}: cannot create it ({exc})") from None
    try:
        import cryptography  # noqa: F401
    except ImportError:
        _openssl_pair(cert, key)
    else:
        _cryptography_pair(cert, key)
    return cert, key


def _openssl_pair(cert: Path, key: Path) -> None:
    """The same pair (EC P-256, 10 years) with the openssl command."""
    if shutil.which("openssl") is None:
        raise TlsError(
            "--tls-self-signed needs the 'cryptography' package (pip install "
            "'cua-guest[tls]') or the openssl command; or give --tls-cert/--tls-key"
        )
    argv = [
        "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-days", str(VALIDITY_DAYS), "-subj", f"/CN={socket.gethostname()[:64]}",
        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        "-keyout", str(key), "-out", str(cert),
    ]  # fmt: skip
    os.close(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))  # never readable by others
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise TlsError(f"openssl could not make a certificate: {done.stderr.strip()[-300:]}")


def _cryptography_pair(cert: Path, key: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, socket.gethostname()[:64])])
    now = datetime.datetime.now(datetime.UTC)
    alt = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALIDITY_DAYS))
        .add_extension(alt, critical=False)
        .sign(private, hashes.SHA256())
    )
    key_bytes = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as sink:
        sink.write(key_bytes)
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))


def server_context(cert: Path, key: Path) -> tuple[ssl.SSLContext, str]:
    """A TLS 1.2+ server context and the certificate's SHA-256 fingerprint (hex)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
        der = ssl.PEM_cert_to_DER_cert(_first_certificate(cert.read_text(encoding="ascii")))
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise TlsError(f"--tls-cert {cert} / --tls-key {key}: not a usable pair ({exc})") from None
    return context, hashlib.sha256(der).hexdigest()


def _first_certificate(pem: str) -> str:
    """The leaf (first) certificate of a PEM chain file."""
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = pem.find(begin)
    stop = pem.find(end, start)
    if start < 0 or stop < 0:
        raise ValueError("no PEM certificate in the file")
    return pem[start : stop + len(end)] + "\n"


def write_fingerprint(cert: Path, fingerprint: str) -> Path:
    """Write the fingerprint next to the certificate for the host to fetch."""
    target = cert.parent / FINGERPRINT_NAME
    try:
        target.write_text(fingerprint + "\n", encoding="ascii")
    except OSError:
        return cert  # a read-only certificate directory: the printed line is enough
    return target


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> None:
    """`python -m cua_guest.tls DIR`: make (or keep) the pair, print the fingerprint."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        sys.exit("usage: python -m cua_guest.tls DIR (makes DIR/guest.crt, .key, .sha256)")
    try:
        cert, key = ensure_self_signed(Path(args[0]))
        _, fingerprint = server_context(cert, key)
    except TlsError as exc:
        sys.exit(f"cua-guest: {exc}")
    write_fingerprint(cert, fingerprint)
    print(fingerprint)


if __name__ == "__main__":
    main()
