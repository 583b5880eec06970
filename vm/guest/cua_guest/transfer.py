"""Bounded writes of uploaded and downloaded files.

The desktop's /tmp (and often its home) is RAM-backed: an unbounded upload or
download would take the desktop's memory. Every byte written goes through
`stream_to`, which stops at the configured limit; the caller turns TooLarge
into 413 and removes the partial file.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import BinaryIO


class TooLarge(Exception):
    """More bytes than the guest's limit (--max-upload-bytes)."""


#: Room for a multipart body's headers and boundaries around a file at the limit.
MULTIPART_SLACK = 64 * 1024


def check_declared_size(declared: int | None, limit: int, what: str, slack: int = 0) -> None:
    """Refuse at once when the sender announces more than the limit (+ framing slack)."""
    if declared is not None and declared > limit + slack:
        raise TooLarge(_message(what, limit, f"{declared} bytes announced"))


async def stream_to(sink: BinaryIO, chunks: AsyncIterator[bytes], limit: int, what: str) -> int:
    """Write chunks to sink off the event loop; return the size, or raise TooLarge."""
    loop = asyncio.get_running_loop()
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise TooLarge(_message(what, limit, "more was sent"))
        await loop.run_in_executor(None, sink.write, chunk)
    return size


def _message(what: str, limit: int, seen: str) -> str:
    return (
        f"{what}: larger than the guest's limit of {limit} bytes ({seen}); "
        "raise it with cua-guest --max-upload-bytes or $CUA_GUEST_MAX_UPLOAD_BYTES"
    )
