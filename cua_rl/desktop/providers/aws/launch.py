"""EC2 RunInstances arguments for one desktop or fleet host: tags (run, desktop,
expiry, TLS pins, fleet slots), network, user data and root volume. Pure functions,
kept apart from the provider so they are tested without an EC2 API."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from cua_rl.desktop.providers.aws.config import (
    TAG_DESKTOP,
    TAG_EXPIRES,
    TAG_RUN,
    TAG_TLS,
    AwsProviderConfig,
)
from cua_rl.desktop.providers.aws.fleet import TAG_SLOT, FleetLaunch, fleet_tags, fleet_user_data
from cua_rl.desktop.providers.aws.tls import GuestPair, cloud_config


def expires_at(now: datetime, ttl_s: float) -> str:
    """The `cua-rl:expires-at` value: ISO 8601 UTC, second precision, sortable."""
    return (now + timedelta(seconds=ttl_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def launch_params(
    config: AwsProviderConfig,
    desktop_id: str,
    ami: str,
    now: datetime,
    root_device: str | None = None,
    pair: GuestPair | None = None,
    fleet: FleetLaunch | None = None,
) -> dict[str, Any]:
    """RunInstances arguments for one desktop (a pure function, tested); `pair` is the
    guest's TLS pair for `image_kind: cua` (its key goes into the user data only),
    `fleet` the pairs of a fleet host (then `desktop_id` names the host)."""
    if (config.image_kind == "cua") != (pair is not None):
        missing = "without" if pair is None else "with"
        raise ValueError(f"image_kind {config.image_kind!r} {missing} a TLS pair")
    if (config.image_kind == "fleet-host") != (fleet is not None):
        missing = "without" if fleet is None else "with"
        raise ValueError(f"image_kind {config.image_kind!r} {missing} fleet pairs")
    tags = [
        {"Key": TAG_RUN, "Value": config.run_id},
        {"Key": TAG_DESKTOP, "Value": desktop_id},
        {"Key": TAG_EXPIRES, "Value": expires_at(now, config.ttl_s)},
        {"Key": "Name", "Value": f"cua-rl-{config.run_id}-{desktop_id}"[:255]},
        *({"Key": k, "Value": v} for k, v in config.extra_tags.items()),
    ]
    if pair is not None:
        tags.append({"Key": TAG_TLS, "Value": pair.fingerprint})
    if fleet is not None:
        tags += [
            *fleet_tags(fleet.slots, fleet.control),
            {"Key": f"{TAG_SLOT}0", "Value": fleet.first_desktop},
        ]
    params: dict[str, Any] = {
        "ImageId": ami,
        "InstanceType": config.instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "InstanceInitiatedShutdownBehavior": "terminate",
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tags},
            {"ResourceType": "volume", "Tags": tags},
        ],
        # idempotent under retries: a throttled-then-retried launch is one instance
        "ClientToken": f"{desktop_id[:40]}-{secrets.token_hex(8)}",
    }
    if config.subnet_id or config.associate_public_ip:
        nic: dict[str, Any] = {
            "DeviceIndex": 0,
            "AssociatePublicIpAddress": config.associate_public_ip,
        }
        if config.subnet_id:
            nic["SubnetId"] = config.subnet_id
        if config.security_group_ids:
            nic["Groups"] = list(config.security_group_ids)
        params["NetworkInterfaces"] = [nic]
    elif config.security_group_ids:
        params["SecurityGroupIds"] = list(config.security_group_ids)
    if config.key_name:
        params["KeyName"] = config.key_name
    minutes = max(1, int(config.ttl_s // 60)) if config.self_shutdown else None
    if fleet is not None:
        params["UserData"] = fleet_user_data(config, fleet, minutes)
    elif pair is not None:
        assert config.guest_token  # the config validator requires it with image_kind 'cua'
        params["UserData"] = cloud_config(pair, config.guest_token, minutes)
    elif minutes is not None:
        params["UserData"] = f"#!/bin/sh\nshutdown -h +{minutes} 'cua-rl ttl reached'\n"
    if config.root_volume_gb and root_device:
        params["BlockDeviceMappings"] = [
            {
                "DeviceName": root_device,
                "Ebs": {
                    "VolumeSize": config.root_volume_gb,
                    "VolumeType": "gp3",
                    "DeleteOnTermination": True,
                },
            }
        ]
    return params
