"""Parsing the guest's Server-Timing header: figures only, never trusted for control."""

from __future__ import annotations

from cua_rl.desktop.server_timing import server_timing


def test_durations_and_the_encoder_are_read() -> None:
    headers = {"Server-Timing": "grab;dur=1.75, encode;dur=7.3", "X-Cua-Encoder": "turbo"}
    assert server_timing(headers) == {"grab": 1.75, "encode": 7.3, "encoder_turbo": 0.0}


def test_what_does_not_parse_is_left_out() -> None:
    headers = {
        "Server-Timing": "grab;dur=abc, a b;dur=1, encode;desc=x, ok;dur=2",
        "X-Cua-Encoder": "not one",
    }
    assert server_timing(headers) == {"ok": 2.0}
    assert server_timing({}) == {}
