"""The stand-in generator reads from a task what its URL does not say: the type a
`.file`/`.data` URL is saved as, the metadata title a setup waits for in a window
title, and the position a video is played from (tests_support/asset_files.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests_support.asset_files import StandIn, standins_for, write_asset_tree

from cua_rl.types import TaskVariant

HUB = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main"


def _task(task_id: str, *steps: dict[str, Any], evaluator: dict | None = None) -> TaskVariant:
    return TaskVariant(
        task_id=task_id,
        domain="vlc",
        evaluator_name="default",
        instruction="x",
        config=steps,
        evaluator=evaluator or {"func": "infeasible"},
    )


def _download(url: str, path: str) -> dict[str, Any]:
    return {"type": "download", "parameters": {"files": [{"url": url, "path": path}]}}


def _window(name: str) -> dict[str, Any]:
    return {"type": "activate_window", "parameters": {"window_name": name}}


SLIDES = f"{HUB}/libreoffice_impress/358aa0a7/note-taking-strategies.file"
TRAILER = f"{HUB}/vlc/fba2c100/Interstellar%20Movie%20-%20Official%20Trailer.mp4"
LECTURE = f"{HUB}/vlc/386dbd0e/lecture_pdf.pdf"
PLAIN = f"{HUB}/libreoffice_calc/x/plain.xlsx"
GOLD = f"{HUB}/libreoffice_impress/550ce7e7/New_Club_with_strike.data"
TASKS = (
    _task(
        "slides",
        _download(SLIDES, "/home/user/Desktop/note-taking-strategies.pptx"),
        {"type": "open", "parameters": {"path": "/home/user/Desktop/x.pptx"}},
        evaluator={
            "func": ["compare_pptx_files"],
            "expected": [{"type": "cloud_file", "path": GOLD, "dest": "New_Club_Gold.pptx"}],
        },
    ),
    _task(
        "trailer",
        _download(TRAILER, "/home/user/Desktop/Interstellar.mp4"),
        {
            "type": "launch",
            "parameters": {
                "command": "vlc --start-time=120.5 --stop-time=121 x.mp4",
                "shell": True,
            },
        },
        _window("Interstellar Movie - Official Trailer - VLC media player"),
    ),
    _task(
        "lecture",
        _download(LECTURE, "/home/user/Desktop/lecture.pdf"),
        _window("lecture.pdf \u2014 6.006 Lecture 2: Data Structures"),
    ),
    _task("plain", _download(PLAIN, "/home/user/plain.xlsx"), _window("plain.xlsx - Calc")),
)


def test_standins_follow_what_the_task_says() -> None:
    assert standins_for(TASKS) == {
        SLIDES: StandIn("pptx"),
        GOLD: StandIn("pptx"),
        TRAILER: StandIn("mp4", "Interstellar Movie - Official Trailer", 123),
        LECTURE: StandIn("pdf", "6.006 Lecture 2: Data Structures"),
    }


def test_written_standins_carry_type_title_and_length(tmp_path: Path) -> None:
    from pptx import Presentation

    urls = [SLIDES, TRAILER, LECTURE, PLAIN]
    assert write_asset_tree(urls, tmp_path / "tree", standins_for(TASKS)) == 4
    files = {p.name: p for p in (tmp_path / "tree").rglob("*") if p.is_file()}
    assert len(Presentation(str(files["note-taking-strategies.file"])).slides) == 1
    title = "6.006 Lecture 2: Data Structures".encode("utf-16-be")  # as Pillow writes it
    assert b"/Title (\xfe\xff" + title + b")" in files["lecture_pdf.pdf"].read_bytes()
    if subprocess.run(["which", "ffprobe"], capture_output=True).returncode != 0:
        pytest.skip("ffprobe not installed (ffmpeg)")
    probe = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-print_format",
            "json",
            "-show_format",
            str(files["Interstellar Movie - Official Trailer.mp4"]),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    fmt = json.loads(probe.stdout)["format"]
    assert fmt["tags"]["title"] == "Interstellar Movie - Official Trailer"
    assert float(fmt["duration"]) > 121


def test_history_standin_is_one_chromium_keeps(tmp_path: Path) -> None:
    # Chromium razes a History without its `meta` table when it starts, which dropped
    # the visits a setup added (a "delete the history" task then passed untouched).
    import shutil
    import sqlite3

    if not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        pytest.skip("no Chromium to write an empty History")
    url = f"{HUB}/chrome/44ee5668/history_empty.sqlite?download=true"
    write_asset_tree([url], tmp_path / "tree")
    (found,) = [p for p in (tmp_path / "tree").rglob("*") if p.is_file()]
    with sqlite3.connect(found) as db:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        assert int(meta["version"]) > 0
        db.execute("SELECT url, title, last_visit_time FROM urls").fetchall()
    db.close()


PROFILE = f"{HUB}/thunderbird/dd84e895-72fd-4023-a336-97689ded257c/thunderbird-profile.tar.gz"


def test_thunderbird_profile_standin_is_a_profile_thunderbird_opens(tmp_path: Path) -> None:
    # Setups extract this into /home/user and launch Thunderbird, whose evaluators read
    # ~/.thunderbird/t5q2a5hp.default-release/...: a tarball holding a README left
    # Thunderbird making a new profile, so no task could be solved.
    import email
    import email.policy
    import mailbox
    import tarfile

    task = _task("tb", _download(PROFILE, "/home/user/thunderbird-profile.tar.gz"))
    standins = standins_for([task])
    assert standins == {PROFILE: StandIn("gz", kind="thunderbird-profile")}
    write_asset_tree([PROFILE], tmp_path / "a", standins)
    write_asset_tree([PROFILE], tmp_path / "b", standins)
    (first,) = [p for p in (tmp_path / "a").rglob("*") if p.is_file()]
    (second,) = [p for p in (tmp_path / "b").rglob("*") if p.is_file()]
    assert first.read_bytes() == second.read_bytes()  # deterministic
    with tarfile.open(first) as archive:
        archive.extractall(tmp_path / "home", filter="data")
    tb = tmp_path / "home" / ".thunderbird"
    assert "Path=t5q2a5hp.default-release" in (tb / "profiles.ini").read_text()
    assert "Default=t5q2a5hp.default-release" in (tb / "installs.ini").read_text()
    profile = tb / "t5q2a5hp.default-release"
    prefs = (profile / "prefs.js").read_text()
    assert 'user_pref("mail.identity.id1.useremail", "anonym-x2024@outlook.com");' in prefs
    assert 'user_pref("mail.server.server1.login_at_startup", false);' in prefs
    for asked in ("htmlSigText", "auto_quote", "activeThemeID", "applyIncomingFilters"):
        assert asked not in prefs  # the untouched profile must not solve a task
    filters = profile / "ImapMail" / "outlook.office365.com" / "msgFilterRules.dat"
    assert "name=" not in filters.read_text()
    inbox = mailbox.mbox(
        profile / "Mail" / "Local Folders" / "Inbox",
        factory=lambda f: email.message_from_binary_file(f, policy=email.policy.default),
    )
    assert sorted(str(m["subject"]) for m in inbox) == [
        "A Test E-mail",
        "\u6b61\u8fce\u4f7f\u7528\u65b0\u7684 Outlook.com \u5e33\u6236",
    ]
    assert len(mailbox.mbox(profile / "Mail" / "Local Folders" / "Bills")) == 2
