"""Request validation names the bad field; images decode from data URLs only."""

import base64
import io

import pytest
from PIL import Image

from cua_rl.errors import RequestError
from cua_rl.inference.openai_schema import decode_images, parse_request


def _png_url() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.mark.parametrize(
    ("payload", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "user", "content": "hi"}], "n": 0}, "n"),
        ({"messages": [{"role": "user", "content": "hi"}], "temperature": -1}, "temperature"),
        ({"messages": [{"role": "user", "content": "hi"}], "top_p": 0}, "top_p"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
        ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "hi"}], "stop": [""]}, "stop"),
        ([1, 2], "body"),
    ],
)
def test_invalid_fields_are_named(payload: object, param: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_request(payload)
    assert info.value.param == param


def test_stop_string_becomes_list_and_budget_prefers_max_completion_tokens() -> None:
    req = parse_request(
        {
            "messages": [{"role": "user", "content": "x"}],
            "stop": "END",
            "max_tokens": 5,
            "max_completion_tokens": 7,
        }
    )
    assert req.stop == ["END"]
    assert req.token_budget(256) == 7


def test_images_decode_in_order_and_bad_urls_name_the_part() -> None:
    good = {"type": "image_url", "image_url": {"url": _png_url()}}
    bad = {"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}
    req = parse_request({"messages": [{"role": "user", "content": [good, good]}]})
    assert [im.size for im in decode_images(req)] == [(8, 8), (8, 8)]
    req = parse_request({"messages": [{"role": "user", "content": [good, bad]}]})
    with pytest.raises(RequestError) as info:
        decode_images(req)
    assert info.value.param == "messages.0.content.1.image_url.url"
