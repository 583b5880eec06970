"""A stand-in for Ray actor handles, so the Ray runtime's plain classes are
tested without Ray: `handle.method.remote(...)` runs the method on this event
loop, with arguments and result copied through pickle as Ray would."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable
from typing import Any

import pytest


class _Method:
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def remote(self, *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        args, kwargs = pickle.loads(pickle.dumps((args, kwargs)))

        async def call() -> Any:
            return pickle.loads(pickle.dumps(await self.fn(*args, **kwargs)))

        return asyncio.ensure_future(call())


class InProcessHandle:
    def __init__(self, target: Any) -> None:
        self.target = target

    def __getattr__(self, name: str) -> _Method:
        return _Method(getattr(self.target, name))


@pytest.fixture
def handle() -> Callable[[Any], InProcessHandle]:
    return InProcessHandle
