"""VLC settings/status metrics and audio/video metrics on files the tests generate."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cua_rl.evaluation import get_metric


def run(name: str, *args: object, **options: object) -> float:
    return float(get_metric(name).func(*args, **options))


VLCRC = """\
# qt-bgcone
#qt-bgcone=1
qt-max-volume=200
#qt-minimal-view=0
#one-instance-when-started-from-file=1
play-and-exit=1
#global-key-play-pause=
input-record-path=/home/user/Desktop
qt-slider-colours=10;20;30;0;0;0;50;50;50;99;99;99
"""


def test_vlcrc_settings(tmp_path: Path) -> None:
    rc = tmp_path / "vlcrc"
    rc.write_text(VLCRC)
    path = str(rc)
    assert run("check_qt_bgcone", path, {"expected_qt_bgcone": 1}) == 1.0
    assert run("check_qt_bgcone", path, {"expected_qt_bgcone": 0}) == 0.0
    assert run("check_qt_max_volume", path, {"expected_qt_max_volume": 200}) == 1.0
    assert run("check_qt_minimal_view", path, {"expected_qt_minimal_view": 1}) == 0.0
    assert (
        run(
            "check_one_instance_when_started_from_file",
            path,
            {"expected_one_instance_when_started_from_file": 0},
        )
        == 0.0
    )
    assert run("check_play_and_exit", path, {"expected_play_and_exit": 1}) == 1.0
    assert run("check_global_key_play_pause", path, {"expected_global_key_play_pause": 0}) == 1.0
    desktop = {"recording_file_path": "/home/user/Desktop"}
    assert run("is_vlc_recordings_folder", path, desktop) == 1.0
    assert run("is_vlc_recordings_folder", path, {"recording_file_path": "/tmp"}) == 0.0
    assert run("check_qt_slider_colours", path, {"type": "blackish"}) == 1.0
    assert (
        run(
            "check_qt_slider_colours",
            path,
            {"type": "match", "expected_qt_slider_colours": "1;2;3"},
        )
        == 0.0
    )
    rc.write_text(VLCRC.replace("#global-key-play-pause=", "global-key-play-pause=Space"))
    assert run("check_global_key_play_pause", path, {"expected_global_key_play_pause": 1}) == 1.0
    rc.write_text("# empty\n")
    assert run("check_qt_slider_colours", path, {"type": "blackish"}) == 0.0  # VLC's default
    assert run("check_qt_bgcone", None, {"expected_qt_bgcone": 1}) == 0.0


def test_is_vlc_fullscreen() -> None:
    screen = {"width": 1920, "height": 1080}
    assert run("is_vlc_fullscreen", screen, {"width": 1920, "height": 1080}) == 1.0
    assert run("is_vlc_fullscreen", screen, {"width": 800, "height": 600}) == 0.0
    assert run("is_vlc_fullscreen", screen, None) == 0.0


def status_xml(state: str, meta: dict[str, str]) -> str:
    infos = "".join(f'<info name="{k}">{v}</info>' for k, v in meta.items())
    return (
        f"<?xml version='1.0' encoding='utf-8'?><root><state>{state}</state><information>"
        f'<category name="meta">{infos}</category></information></root>'
    )


def test_is_vlc_playing(tmp_path: Path) -> None:
    status = tmp_path / "status.xml"
    status.write_text(status_xml("playing", {"filename": "Never Gonna Give You Up.mp4"}))
    rule = {"type": "file_name", "file_name": "Never Gonna Give You Up.mp4"}
    assert run("is_vlc_playing", str(status), rule) == 1.0
    assert run("is_vlc_playing", str(status), {**rule, "file_name": "other.mp4"}) == 0.0
    status.write_text(status_xml("paused", {"filename": "Never Gonna Give You Up.mp4"}))
    assert run("is_vlc_playing", str(status), rule) == 0.0
    url = "https://example.org/streaming/master.m3u8"
    status.write_text(status_xml("playing", {"filename": "master.m3u8"}))
    assert run("is_vlc_playing", str(status), {"type": "url", "url": url}) == 1.0
    status.write_text(status_xml("playing", {"filename": "https://example.org/other.m3u8"}))
    assert run("is_vlc_playing", str(status), {"type": "url", "url": url}) == 0.0
    assert run("is_vlc_playing", None, rule) == 0.0


def write_tone(path: Path, freqs: list[float], seconds: float = 1.5) -> str:
    np = pytest.importorskip("numpy")
    soundfile = pytest.importorskip("soundfile")
    rate = 22050
    t = np.arange(int(rate * seconds)) / rate
    chunks = np.array_split(t, len(freqs))
    signal = np.concatenate(
        [0.4 * np.sin(2 * np.pi * f * c) for f, c in zip(freqs, chunks, strict=True)]
    )
    soundfile.write(path, signal.astype("float32"), rate)
    return str(path)


def test_compare_audios(tmp_path: Path) -> None:
    pytest.importorskip("librosa")
    pytest.importorskip("fastdtw")
    melody = write_tone(tmp_path / "a.wav", [440, 660, 550, 880])
    same = write_tone(tmp_path / "b.wav", [440, 660, 550, 880])
    other = write_tone(tmp_path / "c.wav", [200, 3000, 120, 5000])
    assert run("compare_audios", melody, same) == pytest.approx(1.0, abs=1e-6)
    assert run("compare_audios", melody, other) < run("compare_audios", melody, same) - 0.1
    assert run("compare_audios", None, melody) == 0.0
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"not audio")
    assert run("compare_audios", str(broken), melody) == 0.0
    assert run("compare_audios", str(broken), str(broken)) == 1.0  # OSWorld: both unreadable


def write_video(path: Path, colours: list[tuple[int, int, int]], frames_each: int = 5) -> str:
    np = pytest.importorskip("numpy")
    cv2 = pytest.importorskip("cv2")
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48))
    for i, colour in enumerate(colours):
        for _ in range(frames_each):
            frame = np.zeros((48, 64, 3), np.uint8)
            frame[:, :] = colour
            frame[(i * 7) % 40 : (i * 7) % 40 + 8, ::2] = 255 - np.array(colour, np.uint8)
            writer.write(frame)
    writer.release()
    return str(path)


def test_compare_videos(tmp_path: Path) -> None:
    pytest.importorskip("imagehash")
    clip = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (120, 120, 0)]
    a = write_video(tmp_path / "a.avi", clip)
    b = write_video(tmp_path / "b.avi", clip)
    shorter = write_video(tmp_path / "c.avi", clip[:2])
    assert run("compare_videos", a, b) == 1.0
    assert run("compare_videos", a, shorter) == 0.0  # one ends before the other


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg not installed")
def test_check_mp3_meta(tmp_path: Path) -> None:
    mutagen = pytest.importorskip("mutagen.easyid3")
    wav = write_tone(tmp_path / "song.wav", [440])
    mp3 = tmp_path / "song.mp3"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", wav, str(mp3)], check=True)
    rules = {
        "title": {"method": "eq", "ref": "Missing You"},
        "artist": {"method": "eq", "ref": "Cheng Xiang"},
    }
    assert run("check_mp3_meta", str(mp3), rules) == 0.0  # untagged
    tags = mutagen.EasyID3()
    tags["title"], tags["artist"] = "Missing You", "Cheng Xiang"
    tags.save(str(mp3))
    assert run("check_mp3_meta", str(mp3), rules) == 1.0
    assert run("check_mp3_meta", str(mp3), {"title": {"method": "eq", "ref": "Other"}}) == 0.0
