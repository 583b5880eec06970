"""TLS on the guest: a self-signed pair made at start, its fingerprint pinned by the
host client; plain HTTP on a non-loopback address refused."""

from __future__ import annotations

import hashlib
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests_support.guest_server import RunningGuest, running_guest

from cua_rl.desktop.client import GuestClient
from cua_rl.errors import ConfigError, GuestError

pytestmark = pytest.mark.desktop


@pytest.fixture(scope="module")
def tls_guest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGuest]:
    tmp = tmp_path_factory.mktemp("tls-guest")
    with running_guest(
        tmp, args=("--tls-self-signed", str(tmp / "tls")), scheme="https"
    ) as running:
        yield running


def _fingerprint(tls_guest: RunningGuest) -> str:
    written = (tls_guest.tmp / "tls" / "guest.sha256").read_text().strip()
    der = ssl.PEM_cert_to_DER_cert((tls_guest.tmp / "tls" / "guest.crt").read_text())
    assert written == hashlib.sha256(der).hexdigest()
    assert written in tls_guest.log.read_text()  # printed at start for the operator
    assert (tls_guest.tmp / "tls" / "guest.key").stat().st_mode & 0o077 == 0
    return written


async def test_pinned_fingerprint_round_trip(tls_guest: RunningGuest) -> None:
    fingerprint = _fingerprint(tls_guest)
    colons = ":".join(fingerprint[i : i + 2] for i in range(0, 64, 2)).upper()
    for pin in (fingerprint, colons):
        async with GuestClient(tls_guest.url, tls_guest.token, tls_fingerprint=pin) as client:
            assert await client.healthy()
            assert await client.platform() == "Linux"
            result = await client.execute(["echo", "over tls"])
            assert result.output == "over tls\n"


async def test_wrong_fingerprint_or_system_cas_are_refused(tls_guest: RunningGuest) -> None:
    async with GuestClient(tls_guest.url, tls_guest.token, tls_fingerprint="ab" * 32) as client:
        with pytest.raises(GuestError, match="not the pinned one"):
            await client.platform()
    async with GuestClient(tls_guest.url, tls_guest.token) as client:  # self-signed: no CA
        assert not await client.healthy()


async def test_ca_file_round_trip(tls_guest: RunningGuest) -> None:
    ca = str(tls_guest.tmp / "tls" / "guest.crt")  # self-signed: it is its own CA
    async with GuestClient(tls_guest.url, tls_guest.token, ca_file=ca) as client:
        assert await client.platform() == "Linux"


def test_client_refuses_pins_it_cannot_apply() -> None:
    with pytest.raises(ConfigError, match="https"):
        GuestClient("http://127.0.0.1:1", "t", tls_fingerprint="ab" * 32)
    with pytest.raises(ConfigError, match="SHA-256"):
        GuestClient("https://127.0.0.1:1", "t", tls_fingerprint="abc")


def test_guest_refuses_plain_http_off_loopback(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t" * 20)
    base = [sys.executable, "-m", "cua_guest", "--token-file", str(token), "--port", "1"]
    result = subprocess.run(
        [*base, "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "refusing to serve plain HTTP on 0.0.0.0" in result.stderr
    result = subprocess.run(
        [*base, "--host", "0.0.0.0", "--tls-cert", str(token)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "--tls-key go together" in result.stderr


@pytest.mark.parametrize("backend", ["cryptography", "openssl"])
def test_tls_pair_for_image_builds(tmp_path: Path, backend: str) -> None:
    """`python -m cua_guest.tls DIR` (image build) prints the pinned fingerprint; the
    openssl command stands in when the cryptography package is absent."""
    block = "import sys; sys.modules['cryptography'] = None; " if backend == "openssl" else ""
    code = f"{block}from cua_guest.tls import main; main([{str(tmp_path / 'tls')!r}])"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    der = ssl.PEM_cert_to_DER_cert((tmp_path / "tls" / "guest.crt").read_text())
    assert done.stdout.strip() == hashlib.sha256(der).hexdigest()
    assert (tmp_path / "tls" / "guest.key").stat().st_mode & 0o077 == 0


def test_shipped_units_never_serve_plain_http_off_loopback() -> None:
    """The systemd unit and its cloud-init copy: TLS or loopback, and identical."""
    import shlex

    from cua_guest.main import parse_args
    from cua_guest.tls import is_loopback

    root = Path(__file__).resolve().parents[3]
    unit = (root / "infra" / "systemd" / "cua-guest.service").read_text()
    image = (root / "vm" / "images" / "cloud-init" / "cua-guest.yaml").read_text()
    starts = [
        line.strip().removeprefix("ExecStart=")
        for text in (unit, image)
        for line in text.splitlines()
        if line.strip().startswith("ExecStart=")
    ]
    assert len(starts) == 2 and starts[0] == starts[1]
    args = parse_args(shlex.split(starts[0])[3:])  # after `python -m cua_guest`
    assert is_loopback(args.host) or (args.tls_cert and args.tls_key) or args.tls_self_signed
    assert not args.allow_plain_http and not args.no_auth
