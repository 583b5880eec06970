"""Auth, input validation, and the OSWorld info/file routes of the guest server."""

from __future__ import annotations

import aiohttp
import pytest

pytestmark = pytest.mark.desktop


@pytest.mark.parametrize("path", ["/healthz", "/screenshot", "/platform"])
async def test_missing_token_is_401(anon: aiohttp.ClientSession, path: str) -> None:
    async with anon.get(path) as response:
        assert response.status == 401
        assert (await response.json())["status"] == "error"


async def test_wrong_token_is_401(anon: aiohttp.ClientSession) -> None:
    for header in ("Bearer wrong-token", "Basic abc", "Bearer "):
        async with anon.post(
            "/execute", json={"command": ["true"]}, headers={"Authorization": header}
        ) as response:
            assert response.status == 401


async def test_healthz(client: aiohttp.ClientSession) -> None:
    async with client.get("/healthz") as response:
        assert response.status == 200
        assert await response.json() == {"status": "ok"}


async def test_bad_json_is_400(client: aiohttp.ClientSession) -> None:
    async with client.post(
        "/execute", data=b"{not json", headers={"Content-Type": "application/json"}
    ) as response:
        assert response.status == 400
        body = await response.json()
        assert body["status"] == "error" and "JSON object" in body["message"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/execute", {"shell": True}, "command"),
        ("/execute", {"command": [1, 2]}, "command"),
        ("/execute", {"command": ["true"], "timeout": "soon"}, "timeout"),
        ("/act", {}, "code"),
        ("/act", {"code": "pass", "timeout": -1}, "timeout"),
        ("/run_python", {"code": 5}, "code"),
        ("/list_directory", {}, "path"),
        ("/setup/open_file", {"path": ""}, "path"),
        ("/setup/activate_window", {"strict": True}, "window_name"),
        ("/run_bash_script", {"script": "true", "working_dir": "/no/such/dir"}, "working_dir"),
    ],
)
async def test_missing_or_bad_field_is_400_naming_it(
    client: aiohttp.ClientSession, path: str, body: dict, field: str
) -> None:
    async with client.post(path, json=body) as response:
        assert response.status == 400
        message = (await response.json())["message"]
        assert message.startswith(field), message


async def test_screen_size_and_platform(client: aiohttp.ClientSession) -> None:
    async with client.post("/screen_size") as response:
        assert await response.json() == {"width": 1920, "height": 1080}
    async with client.get("/platform") as response:
        assert await response.text() == "Linux"


async def test_upload_then_file_round_trips_bytes(client: aiohttp.ClientSession, guest) -> None:
    payload = bytes(range(256)) * 4096 + b"tail"  # 1 MiB of every byte value
    target = guest.home / "uploads" / "nested" / "blob.bin"
    form = aiohttp.FormData()
    form.add_field("file_path", str(target))
    form.add_field(
        "file_data", payload, filename="blob.bin", content_type="application/octet-stream"
    )
    async with client.post("/setup/upload", data=form) as response:
        assert response.status == 200, await response.text()
        assert str(len(payload)) in await response.text()
    async with client.post("/file", data={"file_path": str(target)}) as response:
        assert response.status == 200
        assert await response.read() == payload


async def test_file_missing_is_404(client: aiohttp.ClientSession, guest) -> None:
    async with client.post("/file", data={"file_path": str(guest.home / "nope.txt")}) as response:
        assert response.status == 404
    async with client.post("/file", data={}) as response:
        assert response.status == 400
        assert (await response.json())["message"].startswith("file_path")


async def test_upload_without_file_data_is_400(client: aiohttp.ClientSession, guest) -> None:
    form = aiohttp.FormData()
    form.add_field("file_path", str(guest.home / "x.bin"))
    form.add_field("other", b"x", filename="x")
    async with client.post("/setup/upload", data=form) as response:
        assert response.status == 400
        assert (await response.json())["message"].startswith("file_data")


async def test_list_directory_tree(client: aiohttp.ClientSession, guest) -> None:
    root = guest.home / "tree"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub" / "b.txt").write_text("b")
    async with client.post("/list_directory", json={"path": str(root)}) as response:
        tree = (await response.json())["directory_tree"]
    assert tree["type"] == "directory" and tree["name"] == "tree"
    children = {child["name"]: child for child in tree["children"]}
    assert children["a.txt"] == {"type": "file", "name": "a.txt"}
    assert children["sub"]["children"] == [{"type": "file", "name": "b.txt"}]


async def test_accessibility_answers_tree_or_clear_501(client: aiohttp.ClientSession) -> None:
    async with client.get("/accessibility") as response:
        body = await response.json()
        if response.status == 501:
            assert "pyatspi" in body["message"]
        else:
            assert response.status == 200 and body["AT"].startswith("<desktop-frame")
