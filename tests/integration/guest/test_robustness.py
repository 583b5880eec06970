"""One test per robustness bug found with OSWorld's host controller (issue 19):
each malformed input gets a clear JSON error with the right status, never a 500,
a traceback or a dropped connection."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from urllib.parse import unquote

import aiohttp
import pytest
from tests_support.guest_server import OSW_UPLOAD_LIMIT, RunningGuest
from tests_support.osworld_protocol import OSWorldProtocol

pytestmark = pytest.mark.desktop


async def _raw_request(url: str, head: bytes) -> tuple[int, bytes]:
    """Send bytes aiohttp's client would refuse to send (a non-ASCII header)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 10)
    try:
        writer.write(head)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize(
    "credential", [b"Bearer \xff\xfe", "Bearer tök".encode(), b"Bearer \x80" + b"a" * 40]
)
async def test_non_ascii_credential_is_401_json(osw_guest: RunningGuest, credential: bytes) -> None:
    head = (
        b"GET /platform HTTP/1.1\r\nHost: guest\r\nConnection: close\r\n"
        b"Authorization: " + credential + b"\r\n\r\n"
    )
    status, body = await _raw_request(osw_guest.url, head)
    assert status == 401
    assert json.loads(body)["status"] == "error"


@pytest.mark.parametrize("name", ["line\nbreak.txt", 'say "hi".txt', "größe €.txt", "back\\slash"])
async def test_file_with_any_name_downloads_with_a_safe_header(
    osw: OSWorldProtocol, osw_guest: RunningGuest, name: str
) -> None:
    path = osw_guest.tmp / "home" / "names" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"content")
    status, body, headers = await osw.file(str(path))
    assert (status, body) == (200, b"content")
    disposition = headers["Content-Disposition"]
    assert "\n" not in disposition and "\r" not in disposition
    assert unquote(disposition.split("filename*=UTF-8''")[1]) == name
    fallback = disposition.split('filename="')[1].split('"')[0]
    assert fallback.isascii() and '"' not in fallback


async def test_list_directory_lists_unreadable_entries_as_files(
    osw: OSWorldProtocol, osw_guest: RunningGuest
) -> None:
    top = osw_guest.tmp / "home" / "perm"
    (top / "noexec" / "child_dir").mkdir(parents=True)
    (top / "noexec" / "child_file").write_text("x")
    (top / "noread").mkdir()
    (top / "noexec").chmod(0o600)  # listable, but its entries cannot be examined
    (top / "noread").chmod(0o000)
    try:
        status, body, _ = await osw.list_directory(str(top))
    finally:
        (top / "noexec").chmod(0o700)
        (top / "noread").chmod(0o700)
    assert status == 200, body
    children = {c.get("name", "?"): c for c in json.loads(body)["directory_tree"]["children"]}
    noexec = children["noexec"]
    assert sorted(c["name"] for c in noexec["children"]) == ["child_dir", "child_file"]
    assert "noread" in children or any("error" in c for c in children.values())


@pytest.mark.parametrize("route", ["/execute", "/list_directory", "/setup/launch"])
async def test_deeply_nested_json_is_400(osw: OSWorldProtocol, route: str) -> None:
    for depth in (100, 100_000):
        body = b"[" * depth + b"]" * depth
        status, reply, _ = await osw.call(
            "POST",
            route,
            data=b'{"command": ' + body + b"}",
            headers={"Content-Type": "application/json"},
        )
        assert status == 400, reply[:200]
        assert "nested deeper" in json.loads(reply)["message"]


@pytest.mark.parametrize("route", ["/setup/upload", "/file", "/window_size"])
async def test_garbage_multipart_is_400(osw: OSWorldProtocol, route: str) -> None:
    for content_type in (
        "multipart/form-data; boundary=xyz",
        "multipart/form-data",  # no boundary at all
    ):
        status, reply, _ = await osw.call(
            "POST",
            route,
            data=b"\x00garbage--xyz\r\nnot a part\r\n",
            headers={"Content-Type": content_type},
        )
        assert status == 400, (route, content_type, reply[:200])
        assert json.loads(reply)["status"] == "error"


async def test_upload_over_the_limit_is_413_and_leaves_nothing(
    osw: OSWorldProtocol, osw_guest: RunningGuest
) -> None:
    target = osw_guest.tmp / "home" / "big" / "too_big.bin"
    status, body, _ = await osw.upload(str(target), b"\0" * (OSW_UPLOAD_LIMIT + 1))
    assert status == 413
    assert "--max-upload-bytes" in json.loads(body)["message"]
    assert not target.exists()
    assert _entries(target.parent) == []
    status, _, _ = await osw.upload(str(target), b"\0" * OSW_UPLOAD_LIMIT)  # at the limit: fine
    assert status == 200 and target.stat().st_size == OSW_UPLOAD_LIMIT


def _entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


async def test_oversized_json_body_is_413_json(osw: OSWorldProtocol) -> None:
    payload = b'{"code": "' + b"x" * (65 * 1024 * 1024) + b'"}'
    try:
        status, body, _ = await osw.call(
            "POST", "/run_python", data=payload, headers={"Content-Type": "application/json"}
        )
    except aiohttp.ClientError:
        pytest.fail("the guest dropped the connection instead of answering 413")
    assert status == 413 and json.loads(body)["status"] == "error"
