"""The aws provider with our own AMI (`image_kind: cua`) against moto's EC2: the host
makes each instance's TLS pair, and a guest serving any other certificate is refused;
a real guest serving the pair from the user data is reached pinned (fixtures:
conftest.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("moto.server")

import base64  # noqa: E402
import ssl  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import yaml  # noqa: E402
from aiohttp import web  # noqa: E402
from tests_support.moto_ec2 import describe, make_config, tags_of  # noqa: E402
from tests_support.servers import free_port  # noqa: E402

from cua_rl.desktop.providers.aws.provider import AwsProvider  # noqa: E402
from cua_rl.desktop.providers.aws.tls import make_pair  # noqa: E402
from cua_rl.desktop.providers.base import GuestClients  # noqa: E402
from cua_rl.errors import DesktopError, GuestError  # noqa: E402


async def test_cua_instance_serving_another_certificate_fails_naming_it(
    network: dict[str, Any], tmp_path: Path
) -> None:
    """A guest with a certificate other than the one the provider made (a man in the
    middle, an image that ignored its user data) is never trusted: the launch fails
    with the fingerprint it got, and the instance is terminated."""
    impostor = make_pair("impostor")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text(impostor.cert_pem)
    key.write_text(impostor.key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def platform(_: web.Request) -> web.Response:
        return web.Response(text="Linux")

    app = web.Application()
    app.router.add_get("/platform", platform)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    provider = AwsProvider(
        make_config(network, image_kind="cua", guest_token="t" * 24, ready_timeout_s=2),
        guest_url=lambda instance: f"https://127.0.0.1:{port}",
    )
    try:
        with pytest.raises(DesktopError, match=f"not the pinned one.*{impostor.fingerprint}"):
            await provider.start("d-mitm")
        assert await provider.list() == []
    finally:
        await provider.close()
        await runner.cleanup()


@pytest.mark.desktop
async def test_cua_image_a_real_tls_guest_with_the_pair_from_the_user_data(
    network: dict[str, Any], tmp_path: Path
) -> None:
    """image_kind 'cua' end to end, EC2 faked only: the provider makes the pair, moto keeps
    the user data and tags, a real guest serves HTTPS with the pair from that user data,
    and clients built from handles (the pool's cache, health) pin its fingerprint."""
    from tests_support.guest_server import TOKEN, running_guest

    ec2 = network["ec2"]
    launcher = AwsProvider(
        make_config(network, image_kind="cua", guest_token=TOKEN, wait_ready=False)
    )
    try:
        handle = await launcher.start("d-tls")
        instance_id = handle.info["instance_id"]
        assert handle.url == f"https://{handle.info['private_ip']}:5000"
        assert handle.token and handle.token != TOKEN  # the instance's own token
        assert tags_of(describe(ec2, instance_id))["cua-rl:tls-sha256"] == handle.tls_fingerprint
        user_data = base64.b64decode(
            ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")[
                "UserData"
            ]["Value"]
        ).decode()
        files = {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}
        guest_dir = tmp_path / "etc"
        guest_dir.mkdir()
        for path, content in files.items():
            (guest_dir / Path(path).name).write_text(content)
        (guest_dir / "guest.key").chmod(0o600)
        assert (guest_dir / "token").read_text().strip() == handle.token
        args = (
            "--tls-cert",
            str(guest_dir / "guest.crt"),
            "--tls-key",
            str(guest_dir / "guest.key"),
        )
        (tmp_path / "guest").mkdir()
        with running_guest(
            tmp_path / "guest", args=args, scheme="https", token=handle.token
        ) as guest:
            # another process of the run: knows the instance from its tags only
            other = AwsProvider(
                make_config(network, image_kind="cua", guest_token=TOKEN),
                guest_url=lambda instance: guest.url,
            )
            clients = GuestClients()
            try:
                (listed,) = await other.list()
                assert listed.tls_fingerprint == handle.tls_fingerprint
                assert listed.token == handle.token  # recomputed from the tag
                assert await other.health(listed)
                result = await clients.get(listed).execute(["echo", "pinned"])
                assert result.output == "pinned\n"
                forged = replace(listed, id="d-forged", tls_fingerprint="ab" * 32)
                with pytest.raises(GuestError, match="not the pinned one"):
                    await clients.get(forged).platform()
                assert not await other.health(forged)
                unpinned = replace(listed, id="d-unpinned", tls_fingerprint=None)
                assert not await other.health(unpinned)  # self-signed: no system CA has it
                run_secret = replace(listed, id="d-run-token", token=TOKEN)
                with pytest.raises(GuestError, match="HTTP 401"):
                    await clients.get(run_secret).platform()
            finally:
                await clients.close()
                await other.close()
        await launcher.stop(handle)
    finally:
        await launcher.close()
