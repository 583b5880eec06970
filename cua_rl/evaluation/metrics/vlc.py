"""VLC metrics: settings read from `vlcrc`, the HTTP interface's status.xml and
the window size, following OSWorld's `metrics/vlc.py`.

vlcrc lists every option once, commented out (`#key=default`) until the user
changes it. OSWorld takes the value of the *last line containing* `key=`,
comment or not, and a built-in default when there is none; that rule is kept
here so that scores match. A missing file (None) scores 0.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from xml.etree import ElementTree

from cua_rl.evaluation.registry import metric

log = logging.getLogger(__name__)

PathLike = str | Path | None


def _read(path: PathLike) -> str | None:
    if not path or not os.path.isfile(path):
        return None
    return Path(path).read_bytes().decode("utf-8", errors="replace")


def vlcrc_value(text: str, needle: str, default: str) -> str:
    """Value after the last '=' of the last line containing `needle`, else `default`."""
    value = default
    for line in text.split("\n"):
        if needle in line:
            value = line.split("=")[-1].strip()
    return value


def _expected(rule: Mapping[str, Any], key: str) -> str:
    value = rule[key]
    return str(value) if isinstance(value, int) else value


def _setting_check(key: str, default: str) -> Any:
    def check(actual_config_path: PathLike, rule: Mapping[str, Any]) -> float:
        text = _read(actual_config_path)
        if text is None:
            return 0.0
        wanted = _expected(rule, f"expected_{key.replace('-', '_')}")
        return float(vlcrc_value(text, f"{key}=", default) == wanted)

    check.__doc__ = f"vlcrc `{key}` (default {default}) equals `rule.expected_...`."
    return check


# (metric name, vlcrc key, VLC's default when the key is absent)
_SETTINGS = (
    ("check_qt_bgcone", "qt-bgcone", "1"),
    ("check_qt_max_volume", "qt-max-volume", "125"),
    ("check_qt_minimal_view", "qt-minimal-view", "0"),
    ("check_one_instance_when_started_from_file", "one-instance-when-started-from-file", "1"),
    ("check_play_and_exit", "play-and-exit", "0"),
)
for _name, _key, _default in _SETTINGS:
    metric(_name)(_setting_check(_key, _default))


@metric("check_global_key_play_pause")
def check_global_key_play_pause(actual_config_path: PathLike, rule: Mapping[str, Any]) -> float:
    """Whether a global play/pause hotkey is set ("1") or not ("0"), vs the rule."""
    text = _read(actual_config_path)
    if text is None:
        return 0.0
    value = vlcrc_value(text, "global-key-play-pause=", "")
    state = "0" if value == "" else "1"
    return float(state == _expected(rule, "expected_global_key_play_pause"))


_SLIDER_DEFAULT = "153;210;153;20;210;20;255;199;15;245;39;29"


@metric("check_qt_slider_colours")
def check_qt_slider_colours(actual_config_path: PathLike, rule: Mapping[str, Any]) -> float:
    """`rule.type` "match": the colour string equals `expected_qt_slider_colours`;
    "blackish": every RGB triple has all components below 100."""
    text = _read(actual_config_path)
    if text is None:
        return 0.0
    colours = vlcrc_value(text, "qt-slider-colours", _SLIDER_DEFAULT)
    if rule["type"] == "match":
        return float(colours == rule["expected_qt_slider_colours"])
    if rule["type"] == "blackish":
        try:
            values = [int(v) for v in colours.split(";")]
        except ValueError:
            return 0.0
        triples = zip(values[0::3], values[1::3], values[2::3], strict=False)
        return float(all(all(c < 100 for c in rgb) for rgb in triples))
    return 0.0  # OSWorld returns None for other types


@metric("is_vlc_recordings_folder")
def is_vlc_recordings_folder(actual_config_path: PathLike, rule: Mapping[str, Any]) -> float:
    """The first uncommented `input-record-path` line's value equals `rule.recording_file_path`."""
    text = _read(actual_config_path)
    if text is None:
        return 0.0
    for line in text.split("\n"):
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return float(line.split("=")[-1].strip() == rule["recording_file_path"])
    return 0.0


@metric("is_vlc_fullscreen")
def is_vlc_fullscreen(actual_window_size: Any, screen_size: Any) -> float:
    """1 when both sizes are known and equal (the window fills the screen)."""
    if not actual_window_size or not screen_size:
        return 0.0
    return float(
        actual_window_size["width"] == screen_size["width"]
        and actual_window_size["height"] == screen_size["height"]
    )


_META = 'information/category[@name="meta"]/info[@name="{}"]'
_FILE_FIELDS = ("filename", "title", "uri", "location", "name")
_URL_FIELDS = ("url", "URI", "location", "title", "filename")
_STREAM_FIELDS = (
    'information/category[@name="Stream 0"]/info[@name="Codec"]',
    'information/category[@name="Stream 0"]/info[@name="Type"]',
    'information/category[@name="Stream 0"]/info[@name="Language"]',
)


def _first_text(tree: ElementTree.Element, paths: list[str]) -> str | None:
    for path in paths:
        element = tree.find(path)
        if element is not None and element.text:
            return element.text
    return None


def _file_matches(info: str, wanted: str) -> bool:
    return os.path.basename(info) == wanted or info.endswith(wanted)


def _url_matches(info: str, wanted: str) -> bool:
    if wanted in info or info.endswith(wanted):
        return True
    expected = urlparse(wanted)
    if info == os.path.basename(expected.path):  # HLS streams show only the file name
        return True
    if "://" in info:
        actual = urlparse(info)
        return expected.netloc == actual.netloc and expected.path in actual.path
    return False


@metric("is_vlc_playing")
def is_vlc_playing(actual_status_path: PathLike, rule: Mapping[str, Any]) -> float:
    """VLC's status.xml says "playing" and the current item is `rule.file_name`
    (`type` "file_name") or `rule.url` (`type` "url").

    The item is read from the first non-empty meta field in OSWorld's order
    (for URLs also the first stream's codec/type/language fields).
    """
    text = _read(actual_status_path)
    if text is None:
        return 0.0
    try:
        tree = ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return 0.0
    state = tree.find("state")
    if state is None or state.text != "playing":
        return 0.0
    if rule["type"] == "file_name":
        info = _first_text(tree, [_META.format(f) for f in _FILE_FIELDS])
        return float(info is not None and _file_matches(info, rule["file_name"]))
    if rule["type"] == "url":
        info = _first_text(tree, [_META.format(f) for f in _URL_FIELDS] + list(_STREAM_FIELDS))
        return float(info is not None and _url_matches(info, rule["url"]))
    log.error("is_vlc_playing: unknown rule type %r", rule["type"])
    return 0.0
