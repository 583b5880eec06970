"""VLC getters that ask the running desktop: the HTTP interface's status.xml and
the default video player, following OSWorld's `getters/vlc.py`.

OSWorld fetches `http://<vm>:8080/requests/status.xml` from the host; here the
request is made by the desktop's own Python against localhost, so it works
whatever the network between host and desktop looks like.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
from collections import Counter
from typing import Any

from cua_rl.atomic_file import write_bytes_atomic
from cua_rl.errors import GuestError, GuestUnavailable
from cua_rl.evaluation.getters.apps_config import check_dest
from cua_rl.evaluation.registry import GetterContext, getter

log = logging.getLogger(__name__)

VLC_HTTP_PORT = 8080
VLC_HTTP_PASSWORD = "password"
"""OSWorld's desktops start VLC with `--http-password password` on port 8080."""

_FETCH_STATUS = """
import base64, sys, urllib.request
url, password = sys.argv[1], sys.argv[2]
request = urllib.request.Request(url)
token = base64.b64encode((":" + password).encode()).decode()
request.add_header("Authorization", "Basic " + token)
try:
    with urllib.request.urlopen(request, timeout=10) as response:
        print(base64.b64encode(response.read()).decode())
except Exception as exc:
    print("ERROR", exc, file=sys.stderr)
    sys.exit(1)
"""


@getter("vlc_playing_info", required=("dest",), check=check_dest)
async def vlc_playing_info(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """VLC's status.xml saved under `dest`, or None when the HTTP interface does not
    answer (VLC not running, or started without it). Optional `port` and
    `password` override OSWorld's 8080 / "password"."""
    port = int(config.get("port", VLC_HTTP_PORT))
    url = f"http://localhost:{port}/requests/status.xml"
    password = str(config.get("password", VLC_HTTP_PASSWORD))
    try:
        result = await ctx.client.execute(
            ["python3", "-c", _FETCH_STATUS, url, password], timeout=30.0
        )
    except GuestUnavailable:
        raise
    except GuestError as exc:
        log.info("vlc_playing_info: the desktop refused the request: %s", exc)
        return None
    if not result.ok:
        log.info("vlc_playing_info: VLC did not answer: %s", result.error.strip()[-300:])
        return None
    try:
        body = base64.b64decode(result.output.strip(), validate=True)
    except binascii.Error:
        return None
    target = ctx.cache_dir / config["dest"]
    await asyncio.to_thread(write_bytes_atomic, target, body)
    return str(target)


# OSWorld's list of video/* subtypes asked of xdg-mime (duplicates dropped: they
# only double every count, which leaves the most common answer unchanged).
VIDEO_SUBTYPES = (
    "3gp",
    "3gpp",
    "3gpp2",
    "avi",
    "divx",
    "dv",
    "fli",
    "flv",
    "mp2t",
    "mp4",
    "mp4v-es",
    "mpeg",
    "mpeg-system",
    "msvideo",
    "ogg",
    "quicktime",
    "vnd.divx",
    "vnd.mpegurl",
    "vnd.rn-realvideo",
    "webm",
    "x-anim",
    "x-avi",
    "x-flc",
    "x-fli",
    "x-flv",
    "x-m4v",
    "x-matroska",
    "x-mpeg",
    "x-mpeg-system",
    "x-mpeg2",
    "x-ms-asf",
    "x-ms-asf-plugin",
    "x-ms-asx",
    "x-ms-wm",
    "x-ms-wmv",
    "x-ms-wmx",
    "x-ms-wvx",
    "x-msvideo",
    "x-nsv",
    "x-ogm",
    "x-ogm+ogg",
    "x-theora",
    "x-theora+ogg",
)
# x-ogm+ogg appears once in OSWorld's list, every other subtype twice.
_WEIGHT = {"x-ogm+ogg": 1}

_QUERY_DEFAULTS = """
import json, subprocess, sys
out = {}
for sub in json.loads(sys.argv[1]):
    try:
        proc = subprocess.run(["xdg-mime", "query", "default", "video/" + sub],
                              capture_output=True, text=True, timeout=20)
        out[sub] = proc.stdout
    except Exception:
        out[sub] = ""
print(json.dumps(out))
"""


@getter("default_video_player")
async def default_video_player(ctx: GetterContext, config: dict[str, Any]) -> str:
    """The desktop file most video types open with (`xdg-mime query default`), as the
    command printed it (e.g. "vlc.desktop\\n"), or "unknown" when none is set."""
    result = await ctx.client.execute(
        ["python3", "-c", _QUERY_DEFAULTS, json.dumps(list(VIDEO_SUBTYPES))], timeout=120.0
    )
    try:
        answers = json.loads(result.output) if result.ok else {}
    except ValueError:
        answers = {}
    votes: Counter[str] = Counter()
    for sub in VIDEO_SUBTYPES:  # insertion order breaks ties as OSWorld's list order does
        app = answers.get(sub, "")
        if app:
            votes[app] += _WEIGHT.get(sub, 2)
    return votes.most_common(1)[0][0] if votes else "unknown"
