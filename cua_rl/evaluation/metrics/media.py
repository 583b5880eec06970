"""Audio and video metrics, following OSWorld's `compare_audios`/`compare_videos`
(`metrics/vlc.py`) and `check_mp3_meta` (`metrics/others.py`).

Audio: librosa loads both files (mono, 22.05 kHz), 20 MFCCs per frame are
normalised per coefficient, aligned with FastDTW under cosine distance, and the
mean distance along the path d becomes the score exp(-d). Video: the first 100
frame pairs are compared by perceptual hash.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.metrics.rules import match_value_to_rule
from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)

PathLike = str | Path | None


def _load_audio(path: PathLike) -> tuple[Any, int] | None:
    """Samples and rate, or None when the file is missing, empty or undecodable."""
    librosa = require("librosa", "librosa", metric="compare_audios")
    if not path or not Path(path).is_file():
        return None
    try:
        samples, rate = librosa.load(str(path))
    except Exception as exc:  # noqa: BLE001 - librosa surfaces decoder errors of many types
        log.info("compare_audios: cannot decode %s: %s", path, exc)
        return None
    return (samples, rate) if samples.shape[0] else None


@metric("compare_audios")
def compare_audios(audio_path_1: PathLike, audio_path_2: PathLike, **_: Any) -> float:
    """Similarity in (0, 1] of two recordings; 1 when both are empty/undecodable,
    0 when only one is (OSWorld's rules). Extra options (from compare_archive)
    are ignored."""
    librosa = require("librosa", "librosa", metric="compare_audios")
    fastdtw = require("fastdtw", "fastdtw", metric="compare_audios")
    distance = require("scipy.spatial.distance", "scipy", metric="compare_audios")
    if not audio_path_1 or not audio_path_2:
        return 0.0
    first, second = _load_audio(audio_path_1), _load_audio(audio_path_2)
    if first is None and second is None:
        return 1.0
    if first is None or second is None:
        return 0.0
    try:
        mfcc1 = librosa.feature.mfcc(y=first[0], sr=first[1])
        mfcc2 = librosa.feature.mfcc(y=second[0], sr=second[1])
    except Exception as exc:  # noqa: BLE001 - e.g. a clip shorter than one analysis frame
        log.info("compare_audios: MFCC extraction failed: %s", exc)
        return 0.0
    mfcc1 = librosa.util.normalize(mfcc1, axis=1)
    mfcc2 = librosa.util.normalize(mfcc2, axis=1)
    total, path = fastdtw.fastdtw(mfcc1.T, mfcc2.T, dist=distance.cosine)
    if not path:
        return 0.0
    return float(math.exp(-(total / len(path))))


@metric("compare_videos")
def compare_videos(
    video_path1: PathLike,
    video_path2: PathLike,
    max_frames_to_check: int = 100,
    threshold: int = 5,
    **_: Any,
) -> float:
    """1 when the videos have the same frames: over the first `max_frames_to_check`
    frame pairs at most `threshold` may differ by a perceptual-hash distance above
    `threshold`, and if either ends within them both must end together."""
    cv2 = require("cv2", "opencv-python-headless", metric="compare_videos")
    imagehash = require("imagehash", "imagehash", metric="compare_videos")
    image = require("PIL.Image", "pillow", metric="compare_videos")
    if not video_path1 or not video_path2:
        return 0.0
    first, second = cv2.VideoCapture(str(video_path1)), cv2.VideoCapture(str(video_path2))
    try:
        mismatches = 0
        for _frame in range(max_frames_to_check):
            ok1, frame1 = first.read()
            ok2, frame2 = second.read()
            if not ok1 or not ok2:
                return float(ok1 == ok2)
            hash1 = imagehash.phash(image.fromarray(cv2.cvtColor(frame1, cv2.COLOR_BGR2RGB)))
            hash2 = imagehash.phash(image.fromarray(cv2.cvtColor(frame2, cv2.COLOR_BGR2RGB)))
            if hash1 - hash2 > threshold:
                mismatches += 1
                if mismatches > threshold:
                    return 0.0
        return 1.0
    finally:
        first.release()
        second.release()


@metric("check_mp3_meta")
def check_mp3_meta(result: PathLike, meta: Mapping[str, Mapping[str, Any]]) -> float:
    """Every ID3 field named in `meta` (EasyID3 names: title, artist, ...) matches its
    rule; multi-valued fields are joined with commas, a missing field is ""."""
    easyid3 = require("mutagen.easyid3", "mutagen", metric="check_mp3_meta")
    id3 = require("mutagen.id3", "mutagen", metric="check_mp3_meta")
    if not result or not Path(result).is_file():
        return 0.0
    try:
        tags = easyid3.EasyID3(str(result))
    except id3.ID3NoHeaderError:
        tags = {}
    for key, rule in meta.items():
        value = tags.get(key, "")
        if isinstance(value, list):
            value = ",".join(value)
        if not match_value_to_rule(value, rule):
            return 0.0
    return 1.0
