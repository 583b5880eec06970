"""A PNG writer tuned for speed on screenshots.

Pillow's PNG encoder picks a filter per row, which costs ~70-80 ms for a 1080p
screen even at compression level 1. GUI screenshots are large flat areas, so
unfiltered rows with zlib level 1 compress almost as well (about 10 % larger) in
about a quarter of the time. The output is a standard 8-bit RGB PNG.
"""

from __future__ import annotations

import struct
import zlib

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def encode_rgb_png(rgb: bytes, width: int, height: int, level: int = 1) -> bytes:
    """Encode packed 8-bit RGB rows (width*3 bytes each) as a PNG file."""
    stride = width * 3
    if len(rgb) != stride * height:
        raise ValueError(f"expected {stride * height} bytes of RGB, got {len(rgb)}")
    compressor = zlib.compressobj(level)
    view = memoryview(rgb)
    parts: list[bytes] = []
    for row in range(height):
        parts.append(compressor.compress(b"\x00"))  # filter type 0: row stored as is
        parts.append(compressor.compress(view[row * stride : (row + 1) * stride]))
    parts.append(compressor.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        (
            _SIGNATURE,
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", b"".join(parts)),
            _chunk(b"IEND", b""),
        )
    )


def _chunk(tag: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(data, zlib.crc32(tag)) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)
