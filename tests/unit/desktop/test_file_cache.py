"""FileCache against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from cua_rl.desktop.file_cache import FileCache
from cua_rl.errors import SetupStepError


@dataclass
class AssetServer:
    base: str
    hits: dict[str, int] = field(default_factory=dict)
    fail_first: set[str] = field(default_factory=set)


@pytest.fixture
async def server() -> AsyncIterator[AssetServer]:
    state = AssetServer(base="")

    async def asset(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        state.hits[name] = state.hits.get(name, 0) + 1
        if name in state.fail_first and state.hits[name] == 1:
            return web.Response(status=503)
        if name.startswith("missing"):
            raise web.HTTPNotFound()
        await asyncio.sleep(0.05)  # keep concurrent fetches overlapping
        return web.Response(body=f"content of {name}".encode())

    app = web.Application()
    app.router.add_get("/files/{name}", asset)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.base = f"http://127.0.0.1:{port}/files"
    yield state
    await runner.cleanup()


async def test_concurrent_fetches_download_once(server: AssetServer, tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "cache")
    url = f"{server.base}/report.xlsx"
    paths = await asyncio.gather(*(cache.fetch(url) for _ in range(8)))
    assert server.hits["report.xlsx"] == 1
    assert {p for p in paths} == {cache.path_for(url)}
    assert paths[0].read_bytes() == b"content of report.xlsx"
    assert paths[0].name == "report.xlsx"  # apps pick a handler by extension
    assert paths[0].parent.name == FileCache.key(url)
    # a new instance on the same root (another process) reuses the file
    assert await FileCache(tmp_path / "cache").fetch(url) == paths[0]
    assert server.hits["report.xlsx"] == 1


async def test_404_names_url_and_how_to_preseed(server: AssetServer, tmp_path: Path) -> None:
    cache = FileCache(tmp_path, backoff_s=0.01)
    url = f"{server.base}/missing.pdf"
    with pytest.raises(SetupStepError) as info:
        await cache.fetch(url)
    message = str(info.value)
    assert url in message and "404" in message
    assert "network access" in message and str(cache.path_for(url)) in message
    assert server.hits["missing.pdf"] == 1  # a 404 is not retried
    assert _files_under(tmp_path) == []  # no partial file left


async def test_unreachable_host_says_machine_may_be_offline(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/a.txt"
    with pytest.raises(SetupStepError, match="no network access") as info:
        await FileCache(tmp_path, attempts=2, backoff_s=0.01, timeout_s=5).fetch(url)
    assert url in str(info.value) and "seed" in str(info.value)


async def test_transient_5xx_is_retried(server: AssetServer, tmp_path: Path) -> None:
    server.fail_first.add("flaky.txt")
    path = await FileCache(tmp_path, backoff_s=0.01).fetch(f"{server.base}/flaky.txt")
    assert path.read_bytes() == b"content of flaky.txt"
    assert server.hits["flaky.txt"] == 2


async def test_seeded_file_is_used_without_network(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "cache")
    url = "https://unreachable.invalid/datasets/x/tally_book.xlsx"
    source = tmp_path / "local.xlsx"
    source.write_bytes(b"seeded")
    seeded = cache.seed(url, source)
    assert seeded == tmp_path / "cache" / FileCache.key(url) / "tally_book.xlsx"
    assert (await cache.fetch(url)).read_bytes() == b"seeded"


async def test_preseeded_directory_may_use_another_file_name(tmp_path: Path) -> None:
    cache = FileCache(tmp_path)
    url = "https://unreachable.invalid/file?download=1"
    folder = tmp_path / FileCache.key(url)
    folder.mkdir()
    (folder / "whatever.bin").write_bytes(b"x")
    assert (await cache.fetch(url)).name == "whatever.bin"


async def test_file_url_and_plain_path_are_read_in_place(tmp_path: Path) -> None:
    local = tmp_path / "my file.txt"
    local.write_text("hello")
    cache = FileCache(tmp_path / "cache")
    assert await cache.fetch(local.as_uri()) == local
    assert await cache.fetch(str(local)) == local
    assert not (tmp_path / "cache").exists()
    with pytest.raises(SetupStepError, match="no such local file"):
        await cache.fetch((tmp_path / "absent.txt").as_uri())


async def test_unsupported_scheme_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SetupStepError, match="unsupported URL scheme 'ftp'"):
        await FileCache(tmp_path).fetch("ftp://example.org/a.txt")


def _files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


async def test_full_disk_is_not_retried_and_names_the_file(
    server: AssetServer, tmp_path: Path
) -> None:
    import errno

    from tests_support.mounts import fill, tmpfs

    with tmpfs(tmp_path / "full", "size=64k") as full:
        cache = FileCache(full / "cache", backoff_s=0.01)
        url = f"{server.base}/big.bin"
        await asyncio.to_thread(cache.path_for(url).parent.mkdir, parents=True)
        fill(full)
        with pytest.raises(OSError) as caught:
            await cache.fetch(url)
        assert caught.value.errno == errno.ENOSPC
        assert str(full / "cache") in str(caught.value.filename)
        assert server.hits["big.bin"] == 1  # a retry cannot free the disk


async def test_a_mirror_serves_the_file_under_its_original_url(
    server: AssetServer, tmp_path: Path
) -> None:
    url = "https://huggingface.co/datasets/o/r/resolve/main/report.xlsx"
    cache = FileCache(
        tmp_path, mirrors={"https://huggingface.co/datasets/o/r/resolve/main": server.base}
    )
    path = await cache.fetch(url)
    assert path == cache.path_for(url) and server.hits["report.xlsx"] == 1
    assert path.read_bytes() == b"content of report.xlsx"
