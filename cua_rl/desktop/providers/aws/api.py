"""EC2 calls for the `aws` provider and the sweep: off the event loop, with backoff.

boto3 is blocking, so every call runs in a small thread pool of its own (never
asyncio's default pool, which other components use for file work). EC2 limits
the request rate per account; hundreds of actors resetting desktops at once
hit it, so throttling and transient server errors are retried with exponential
backoff and full jitter (sleeping on the event loop, not in a thread), and
botocore's own retries are off so the two never multiply. Any other API error
becomes an `Ec2Error` (a DesktopError, so the pool replaces the desktop) that
names the operation and carries the AWS error code.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cua_rl.desktop.providers.aws.config import AwsProviderConfig
from cua_rl.errors import DesktopError, Ec2Error
from cua_rl.retry import retrying

log = logging.getLogger(__name__)

THROTTLE_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
    }
)
TRANSIENT_CODES = frozenset(
    {"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable"}
)


CREDENTIALS_HINT = (
    "AWS credentials come from the environment, ~/.aws or a named "
    "profile (`profile:`); see docs/providers.md"
)


def backoff_delay(
    attempt: int, base_s: float, max_s: float, rand: Callable[[], float] = random.random
) -> float:
    """Full jitter (AWS architecture blog): uniform in [0, min(max, base * 2^attempt)],
    so clients throttled together do not retry together."""
    return rand() * min(max_s, base_s * (2**attempt))


def _code(exc: Any) -> str:
    """AWS's error code of a botocore ClientError."""
    return str(exc.response.get("Error", {}).get("Code", ""))


class Ec2Api:
    """One region's EC2 client, called asynchronously: `await api.call("op", **kw)`."""

    def __init__(
        self,
        config: AwsProviderConfig,
        client: Any = None,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self._client = client
        self._sleep = sleep
        self._rand = rand
        self._executor = ThreadPoolExecutor(config.api_threads, thread_name_prefix="cua-ec2")
        self._client_lock = asyncio.Lock()

    async def call(self, op: str, **kwargs: Any) -> dict[str, Any]:
        """Run `client.<op>(**kwargs)` in the pool; retry throttling with backoff."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionClosedError,
            ConnectTimeoutError,
            EndpointConnectionError,
            ReadTimeoutError,
        )

        client = await self._get_client()
        method = functools.partial(getattr(client, op), **kwargs)
        loop = asyncio.get_running_loop()
        transient = (
            EndpointConnectionError,
            ConnectionClosedError,
            ConnectTimeoutError,
            ReadTimeoutError,
        )

        def retryable(exc: BaseException) -> bool:
            if isinstance(exc, ClientError):
                return _code(exc) in THROTTLE_CODES | TRANSIENT_CODES
            return isinstance(exc, transient)

        try:
            async for attempt in retrying(
                f"EC2 {op}",
                attempts=self.config.max_attempts,
                retry_on=retryable,
                delay=lambda i: backoff_delay(
                    i, self.config.backoff_base_s, self.config.backoff_max_s, self._rand
                ),
                sleep=self._sleep,
            ):
                with attempt:
                    return await loop.run_in_executor(self._executor, method)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise Ec2Error(
                f"EC2 {op} ({self.config.region}): {_code(exc)}: {error.get('Message', exc)}",
                _code(exc),
            ) from exc
        except transient as exc:
            raise Ec2Error(f"EC2 {op} ({self.config.region}): {exc}", "ConnectionError") from exc
        except BotoCoreError as exc:  # no credentials, unknown profile, bad config
            raise Ec2Error(
                f"EC2 {op} ({self.config.region}): {exc} ({CREDENTIALS_HINT})", type(exc).__name__
            ) from exc
        raise AssertionError("unreachable: retrying re-raises the last error")

    async def pages(self, op: str, key: str, **kwargs: Any) -> list[Any]:
        """Every item under `key` across NextToken pages (describe_* calls)."""
        items: list[Any] = []
        token: str | None = None
        while True:
            page = await self.call(op, **kwargs, **({"NextToken": token} if token else {}))
            items.extend(page.get(key, []))
            token = page.get("NextToken")
            if not token:
                return items

    async def instances(
        self, filters: list[dict[str, Any]] | None = None, ids: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """Instance descriptions matching filters / ids, flattened out of reservations."""
        kwargs: dict[str, Any] = {}
        if filters:
            kwargs["Filters"] = filters
        if ids:
            kwargs["InstanceIds"] = ids
        reservations = await self.pages("describe_instances", "Reservations", **kwargs)
        return [i for r in reservations for i in r.get("Instances", [])]

    async def terminate(self, instance_ids: list[str]) -> None:
        """Terminate instances (batches of 500); ones already gone are fine."""
        for start in range(0, len(instance_ids), 500):
            batch = instance_ids[start : start + 500]
            try:
                await self.call("terminate_instances", InstanceIds=batch)
            except Ec2Error as exc:
                if exc.code != "InvalidInstanceID.NotFound":
                    raise
                for instance_id in batch:  # one unknown id fails the batch: go one by one
                    try:
                        await self.call("terminate_instances", InstanceIds=[instance_id])
                    except Ec2Error as one:
                        if one.code != "InvalidInstanceID.NotFound":
                            raise

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _get_client(self) -> Any:
        async with self._client_lock:
            if self._client is None:
                loop = asyncio.get_running_loop()
                self._client = await loop.run_in_executor(self._executor, self._make_client)
        return self._client

    def _make_client(self) -> Any:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as exc:
            raise DesktopError(
                "aws provider: boto3 is not installed (pip install 'cua-rl[aws]')"
            ) from exc
        from botocore.exceptions import BotoCoreError

        try:
            session = boto3.Session(
                profile_name=self.config.profile, region_name=self.config.region
            )
        except BotoCoreError as exc:  # e.g. ProfileNotFound
            raise Ec2Error(f"aws provider: {exc} ({CREDENTIALS_HINT})", type(exc).__name__) from exc
        return session.client(
            "ec2",
            endpoint_url=self.config.endpoint_url,
            # our own backoff handles throttling; botocore's would sleep in a thread
            config=Config(
                retries={"total_max_attempts": 1, "mode": "standard"},
                connect_timeout=10,
                read_timeout=60,
                max_pool_connections=self.config.api_threads,
            ),
        )


def tag(instance: dict[str, Any], key: str) -> str | None:
    """The value of tag `key` of an instance description, or None."""
    for item in instance.get("Tags", []) or []:
        if item.get("Key") == key:
            return item.get("Value")
    return None
