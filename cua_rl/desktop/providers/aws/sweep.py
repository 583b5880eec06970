"""Terminating EC2 desktops nobody will stop (`cua-rl vm sweep --provider aws`).

Two cases leak instances: a run that is over (finished or crashed) and an
instance past its `cua-rl:expires-at`. `sweep(api, run_id)` terminates every
live instance of that run; `sweep(api, None)` terminates every cua-rl instance
(tagged `cua-rl:run`) whose expiry has passed or whose expiry tag is missing or
unreadable (an instance we cannot bound is treated as leaked). Instances
without `cua-rl:run` are never touched. Run it from cron or after `ray down`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cua_rl.desktop.providers.aws.config import TAG_DESKTOP, TAG_EXPIRES, TAG_RUN

LIVE_STATES = ["pending", "running", "stopping", "stopped"]


@dataclass(frozen=True, slots=True)
class SweptInstance:
    instance_id: str
    run: str | None
    desktop: str | None
    expires_at: str | None
    reason: str


def parse_expiry(value: str | None) -> datetime | None:
    """`cua-rl:expires-at` as an aware datetime, None when absent or malformed."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def sweep_reason(instance: dict[str, Any], run_id: str | None, now: datetime) -> str | None:
    """Why the instance should be terminated, or None to keep it."""
    from cua_rl.desktop.providers.aws.api import tag

    run = tag(instance, TAG_RUN)
    if run is None:
        return None
    if run_id is not None:
        return f"run {run_id} swept" if run == run_id else None
    raw = tag(instance, TAG_EXPIRES)
    expiry = parse_expiry(raw)
    if expiry is None:
        return f"{TAG_EXPIRES} tag missing or unreadable ({raw!r})"
    return f"expired at {raw}" if expiry <= now else None


async def sweep(
    api: Any, run_id: str | None, *, now: datetime | None = None, dry_run: bool = False
) -> list[SweptInstance]:
    """Terminate (unless `dry_run`) and return the instances `sweep_reason` picks.
    `api` is an `aws.api.Ec2Api`."""
    from cua_rl.desktop.providers.aws.api import tag

    now = now or datetime.now(UTC)
    filters = [
        {"Name": "tag-key", "Values": [TAG_RUN]},
        {"Name": "instance-state-name", "Values": LIVE_STATES},
    ]
    if run_id is not None:
        filters.append({"Name": f"tag:{TAG_RUN}", "Values": [run_id]})
    swept = []
    for instance in await api.instances(filters=filters):
        reason = sweep_reason(instance, run_id, now)
        if reason is not None:
            swept.append(
                SweptInstance(
                    instance["InstanceId"],
                    tag(instance, TAG_RUN),
                    tag(instance, TAG_DESKTOP),
                    tag(instance, TAG_EXPIRES),
                    reason,
                )
            )
    if swept and not dry_run:
        await api.terminate([s.instance_id for s in swept])
    return swept


async def sweep_account(
    region: str,
    profile: str | None,
    endpoint_url: str | None,
    run_id: str | None,
    *,
    dry_run: bool = False,
) -> list[SweptInstance]:
    """`sweep` over the EC2 instances one credentials profile sees in `region`
    (`endpoint_url`: moto, LocalStack), the API client closed afterwards."""
    from cua_rl.desktop.providers.aws.api import Ec2Api
    from cua_rl.desktop.providers.aws.config import AwsProviderConfig

    api = Ec2Api(AwsProviderConfig(region=region, profile=profile, endpoint_url=endpoint_url))
    try:
        return await sweep(api, run_id, dry_run=dry_run)
    finally:
        await api.close()
