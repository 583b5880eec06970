"""Config of the `aws` provider (kept apart from the provider so that config
loading never imports boto3)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# OSWorld's public desktop AMI (1920x1080, its server on port 5000, no auth), as
# published in OSWorld's desktop_env/providers/aws/manager.py. AMIs are regional:
# copy it (`aws ec2 copy-image`) to use another region and set `ami_id`.
OSWORLD_AMIS = {"us-east-1": "ami-0d23263edb96951d8"}

TAG_RUN = "cua-rl:run"
TAG_DESKTOP = "cua-rl:desktop"
TAG_EXPIRES = "cua-rl:expires-at"
TAG_TLS = "cua-rl:tls-sha256"
"""Tag carrying the SHA-256 fingerprint of an instance's guest certificate
(image_kind `cua`), so every process of the run can pin it; a fingerprint is public,
the key never leaves the user data."""


class AwsProviderConfig(BaseModel):
    """OSWorld desktops as EC2 instances of the OSWorld AMI.

    Every instance is tagged with the run, the desktop id and an expiry time, and
    launched with `InstanceInitiatedShutdownBehavior=terminate`; `cua-rl vm sweep
    --provider aws` terminates instances of finished runs or past their expiry,
    so a crashed trainer cannot leak instances for longer than `ttl_s`.
    """

    model_config = ConfigDict(extra="forbid")

    type: Literal["aws"] = "aws"
    """Selects this provider in the `ProviderConfig` union."""
    region: str = "us-east-1"
    """EC2 region; the OSWorld AMI is published in us-east-1."""
    ami_id: str | None = None
    """AMI to launch; None uses OSWorld's AMI for `region` (`OSWORLD_AMIS`)."""
    image_kind: Literal["osworld", "cua", "fleet-host"] = "osworld"
    """What serves the guest protocol in the AMI. `osworld`: OSWorld's public AMI, its
    own server over plain http without auth (keep it on a private network).
    `cua`: an AMI baked with vm/images/cloud-init/cua-guest.yaml, our guest over HTTPS;
    the host makes a certificate and a token per instance, hands them over in the user
    data and pins the fingerprint (docs/security.md). Needs `ami_id` and `guest_token`.
    `fleet-host`: a plain Debian/Ubuntu AMI with cloud-init that runs
    `desktops_per_instance` container desktops of our image, each over HTTPS with its
    own pair and token on `guest_port + slot` (docs/images.md "Fleet hosts on EC2").
    Needs `ami_id`, `guest_token` and `fleet_image_pull` or `fleet_repo`."""
    desktops_per_instance: int = Field(1, ge=1, le=16)
    """Container desktops per instance with `image_kind: fleet-host` (each 1 CPU / 2 GiB
    by default: size `instance_type` to match). 16 at most: two tags per desktop and
    EC2's 50 tags per instance, and K pairs in 16 KiB of user data."""
    control_port: int = Field(4999, ge=1, le=65535)
    """Port of a fleet host's control endpoint (authenticated: a slot's reset, and the
    slot leases that keep two processes of a run from taking one slot); open it, like
    the guest ports, to the actors' hosts only."""
    fleet_image: str = "cua-rl-desktop:full"
    """Image tag a fleet host runs its desktops from."""
    fleet_image_pull: str | None = None
    """A registry image a fleet host pulls (and tags `fleet_image`); None builds the image
    on the host from `fleet_repo` (~10 min)."""
    fleet_repo: str | None = None
    """git URL of the cua-rl repository a fleet host builds its image from."""
    fleet_profile: Literal["minimal", "full"] = "full"
    """Image profile a fleet host builds."""
    fleet_cpus: float = Field(1.0, gt=0, le=64)
    """CPU limit per container desktop of a fleet host."""
    fleet_memory: str = Field("2g", pattern=r"^\d+[kmg]$")
    """Memory limit per container desktop of a fleet host."""
    fleet_width: int = Field(1920, ge=320, le=7680)
    """Screen width of a fleet host's desktops."""
    fleet_height: int = Field(1080, ge=240, le=4320)
    """Screen height of a fleet host's desktops."""
    instance_type: str = "t3.medium"
    """OSWorld's default size (2 vCPU, 4 GiB); larger types boot and act faster."""
    subnet_id: str | None = None
    """Subnet to launch in; None uses the default VPC's default subnet. The host
    running actors must reach the instances' guest port in it."""
    security_group_ids: list[str] = Field(default_factory=list)
    """Security groups; they must allow TCP `guest_port` (and 8006/9222 when used)
    from the actors' hosts only: OSWorld's server has no authentication."""
    key_name: str | None = None
    """EC2 key pair for SSH debugging; None launches without one."""
    associate_public_ip: bool = False
    """Give instances a public IPv4 (needed when actors run outside the VPC)."""
    address: Literal["private", "public"] = "private"
    """Which instance address desktop URLs use: `private` from inside the VPC
    (e.g. a Ray cluster in the same subnet), `public` from elsewhere."""
    guest_port: int = Field(5000, ge=1, le=65535)
    """Port of the guest server in the instance (OSWorld's server: 5000)."""
    guest_token: str | None = None
    """Bearer token of the guest server; None for the OSWorld AMI (no auth). Required
    with `image_kind: cua`, where it is the run's secret: each instance gets a token
    derived from it and its certificate, never this one."""
    run_id: str = Field("adhoc", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
    """Tag `cua-rl:run`: the training run owning the instances; `vm list/down`
    and `sweep` act on one run's instances."""
    ttl_s: float = Field(6 * 3600.0, ge=60, le=14 * 24 * 3600)
    """Lifetime: `cua-rl:expires-at` = launch (or last reset) + ttl_s; the sweep
    terminates instances past it, and the instance shuts itself down then too
    (see `self_shutdown`). Longer than the longest run between two resets."""
    self_shutdown: bool = True
    """Pass user data `shutdown -h +<ttl>` so an instance terminates itself at its
    expiry even when nobody sweeps (needs cloud-init in the AMI, as Ubuntu has; with
    `image_kind: cua` it is a `runcmd` of the instance's cloud-config)."""
    root_volume_gb: int | None = Field(None, ge=8, le=16384)
    """Root volume size; None keeps the AMI's."""
    extra_tags: dict[str, str] = Field(default_factory=dict)
    """More tags on instances and volumes (cost allocation, owner)."""
    reset_mode: Literal["replace_instance", "replace_root_volume"] = "replace_instance"
    """`replace_instance` (default): terminate and launch a fresh instance; works
    everywhere, the URL changes, costs a full boot (~1-3 min).
    `replace_root_volume`: CreateReplaceRootVolumeTask back to the launch state;
    keeps the instance, its IP and its hourly billing, a reboot-length wait."""
    wait_ready: bool = True
    """Poll the guest until it answers before returning a desktop; false returns
    once EC2 reports `running` (for tests without a guest, or callers that poll)."""
    ready_timeout_s: float = Field(900.0, gt=0, le=3600)
    """Deadline for `running` plus the guest answering after a launch or reset."""
    poll_interval_s: float = Field(5.0, gt=0, le=60)
    """Interval of DescribeInstances / task polling (each poll costs API quota)."""
    endpoint_url: str | None = None
    """EC2 endpoint override (moto, LocalStack); None uses AWS."""
    profile: str | None = None
    """AWS credentials profile; None uses the default credential chain."""
    max_attempts: int = Field(8, ge=1, le=30)
    """Attempts of one API call under throttling (RequestLimitExceeded, ...)."""
    backoff_base_s: float = Field(0.5, gt=0, le=30)
    """First backoff cap; it doubles each attempt, with full jitter."""
    backoff_max_s: float = Field(20.0, gt=0, le=300)
    """Largest backoff between two attempts."""
    api_threads: int = Field(8, ge=1, le=64)
    """Threads running boto3 calls (blocking), apart from asyncio's default pool."""

    @model_validator(mode="after")
    def _fleet_host_fits(self) -> AwsProviderConfig:
        if self.image_kind != "fleet-host":
            if self.desktops_per_instance != 1:
                raise ValueError(
                    "aws provider: desktops_per_instance > 1 needs image_kind 'fleet-host'"
                )
            return self
        if self.ami_id is None or not self.guest_token:
            raise ValueError(
                "aws provider: image_kind 'fleet-host' needs `ami_id` (a "
                "Debian/Ubuntu AMI with cloud-init) and `guest_token`"
            )
        if not (self.fleet_image_pull or self.fleet_repo):
            raise ValueError(
                "aws provider: image_kind 'fleet-host' needs `fleet_image_pull` "
                "or `fleet_repo` (where the host gets its image)"
            )
        last = self.guest_port + self.desktops_per_instance - 1
        if last > 65535 or self.guest_port <= self.control_port <= last:
            raise ValueError(
                f"aws provider: guest ports {self.guest_port}..{last} must be "
                f"valid and not contain control_port {self.control_port}"
            )
        if 2 * self.desktops_per_instance + len(self.extra_tags) + 6 > 50:
            raise ValueError(
                "aws provider: too many tags per instance (EC2 allows 50): "
                "lower desktops_per_instance or extra_tags"
            )
        return self

    @model_validator(mode="after")
    def _cua_image_needs_ami_and_token(self) -> AwsProviderConfig:
        if self.image_kind == "cua" and (self.ami_id is None or not self.guest_token):
            raise ValueError(
                "aws provider: image_kind 'cua' needs `ami_id` (the AMI baked "
                "with vm/images/cloud-init/cua-guest.yaml) and `guest_token`"
            )
        return self

    @property
    def has_network(self) -> bool:
        """Whether desktops reach the internet (read by `cua-rl tasks check`): yes,
        instances get their subnet's network (OSWorld's AMI expects one)."""
        return True
